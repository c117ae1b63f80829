//! Recovery: a helper killed inside a live node comes back on the next call (a child we
//! started, a node we attached to); a frozen node is noticed as lost within `net_ticktime`
//! and reconnected once it thaws; callers of a node whose connect is slow do not queue behind
//! one another. Real server binary and fixture, or real `erl` nodes; every OS process is
//! killed on drop, also when an assertion fails.

mod common;

use common::erl::ErlNode;

use common::{demo_node, wait_until, Server};
use os_sup_mcp::dist::DistError;
use os_sup_mcp::helper::{Client, EvalRequest, HelperError, Lang};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn erlang(code: &str) -> EvalRequest {
    let mut request = EvalRequest::new(code);
    request.lang = Lang::Erlang;
    request
}

/// Attaches `client` to `node`, retrying while the node boots.
async fn attach(client: &Client) {
    let _ = wait_until(
        Duration::from_secs(20),
        &format!("attached to {}", client.node()),
        async || client.attach().await,
        Result::is_ok,
    )
    .await;
}

/// Waits until the helper on `node` answers (through a client of its own).
async fn wait_for_helper(node: &ErlNode) {
    let probe = Client::new(node.name.clone(), &node.cookie);
    let _ = wait_until(
        Duration::from_secs(20),
        &format!("an answer from {}", node.name),
        async || probe.ping(Duration::from_secs(1)).await,
        Result::is_ok,
    )
    .await;
}

/// Evaluates `code` through the server, returning the value and how long the call took.
async fn timed_eval(c: &mut common::Client, name: &str, code: &str) -> (String, Duration) {
    let started = Instant::now();
    let out = c.eval(name, code).await;
    let elapsed = started.elapsed();
    (
        out["value"].as_str().unwrap_or_default().to_string(),
        elapsed,
    )
}

#[tokio::test]
async fn a_killed_helper_in_a_started_child_is_back_on_the_next_call() {
    let (_server, mut c) = demo_node("kid").await;
    let (before, _) = timed_eval(&mut c, "kid", "Process.whereis(:os_sup_helper)").await;

    let (killed, _) = timed_eval(
        &mut c,
        "kid",
        "Process.exit(Process.whereis(:os_sup_helper), :kill)",
    )
    .await;
    assert_eq!(killed, "true");

    // Without recovery this call would be dropped and wait out its 8 s before failing.
    let (value, elapsed) = timed_eval(&mut c, "kid", "1 + 1").await;
    eprintln!("first eval after the kill: {elapsed:?}");
    assert_eq!(value, "2");
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");

    let (after, fast) = timed_eval(&mut c, "kid", "Process.whereis(:os_sup_helper)").await;
    eprintln!("next eval: {fast:?}");
    assert!(after.starts_with("#PID<"), "{after}");
    assert_ne!(before, after, "a new helper process serves");
    assert!(fast < Duration::from_millis(400), "took {fast:?}");
    // The child is still the supervised, running node it was.
    let status = c.node_status("kid").await;
    assert_eq!(status["state"], "running", "{status}");
}

#[tokio::test]
async fn a_killed_helper_in_an_attached_node_is_back_on_the_next_call() {
    let plain = ErlNode::build("attached_kill").start();
    let server = Server::start();
    let mut c = server.client().await;
    let args = json!({"name": "plain", "node": plain.name, "cookie": plain.cookie});
    c.attach(args.clone()).await;
    let (killed, _) = timed_eval(&mut c, "plain", "exit(whereis(os_sup_helper), kill)").await;
    assert_eq!(killed, "true");

    let (value, elapsed) = timed_eval(&mut c, "plain", "lists:sum([1, 2, 3])").await;
    eprintln!("first eval after the kill: {elapsed:?}");
    assert_eq!(value, "6");
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    let (registered, fast) = timed_eval(&mut c, "plain", "is_pid(whereis(os_sup_helper))").await;
    assert_eq!(registered, "true");
    assert!(fast < Duration::from_millis(400), "took {fast:?}");

    // Detaching after a recovery works as ever and leaves the node running.
    c.ok("remove", json!({"name": "plain"})).await;
    assert!(common::alive(plain.child.id()));
}

#[tokio::test]
async fn a_frozen_attached_node_is_lost_within_net_ticktime_and_back_after_it_thaws() {
    let node = ErlNode::build("frozen").start();
    let client =
        Client::new(node.name.clone(), &node.cookie).with_net_ticktime(Duration::from_secs(1));
    attach(&client).await;
    client.ping(Duration::from_secs(2)).await.unwrap();

    node.freeze();
    // An eval may run 5 s (+3 s of slack): the lost link, not the timeout, ends this one.
    let started = Instant::now();
    let err = client
        .eval(&erlang("lists:sum([1, 2, 3])"))
        .await
        .expect_err("a frozen node cannot answer");
    let lost_after = started.elapsed();
    eprintln!("frozen node: the call failed after {lost_after:?}: {err}");
    assert!(
        matches!(err, HelperError::Dist(DistError::ConnectionLost { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("frozen"), "{err}");
    assert!(lost_after < Duration::from_millis(2500), "{lost_after:?}");

    // While it stays frozen a call is bounded by its own timeout (the connect cannot finish).
    let started = Instant::now();
    let err = client.ping(Duration::from_millis(800)).await.unwrap_err();
    let waited = started.elapsed();
    eprintln!("call while frozen: {waited:?}: {err}");
    assert!(waited < Duration::from_millis(1500), "{waited:?}");

    node.signal(libc::SIGCONT);
    let started = Instant::now();
    client
        .ping(Duration::from_secs(5))
        .await
        .expect("reconnected once the node thawed");
    eprintln!("thawed node answered after {:?}", started.elapsed());
    let out = client
        .eval(&erlang("lists:sum([1, 2, 3])"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.value, "6");
}

#[tokio::test]
async fn callers_do_not_queue_behind_a_slow_connect_and_share_its_outcome() {
    let node = ErlNode::build("slow_connect").helper().start();
    wait_for_helper(&node).await;

    // A frozen node accepts TCP connections (the kernel does) but never completes the
    // handshake: the connect hangs until the node thaws or the connect timeout (5 s).
    node.freeze();
    let client = Arc::new(Client::new(node.name.clone(), &node.cookie));
    let t0 = Instant::now();
    let ping = |timeout: Duration| {
        let client = client.clone();
        tokio::spawn(async move {
            let result = client.ping(timeout).await;
            (result, t0.elapsed())
        })
    };
    let a = ping(Duration::from_secs(10));
    // Clock: b asks 300 ms into a's connect, which hangs while the node is frozen.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let b = ping(Duration::from_secs(10));
    // Clock: the short caller asks 500 ms into the connect.
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A caller with a short deadline gives up on time, not when the connect ends.
    let started = Instant::now();
    let short = client.ping(Duration::from_millis(300)).await;
    let short_took = started.elapsed();
    eprintln!("short caller during the slow connect: {short_took:?}: {short:?}");
    assert!(short.is_err());
    assert!(short_took < Duration::from_millis(700), "{short_took:?}");

    // Clock: the node thaws ~1.5 s into the connect, well before its 5 s timeout.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    node.signal(libc::SIGCONT);
    let (a, a_done) = a.await.unwrap();
    let (b, b_done) = b.await.unwrap();
    eprintln!("after the thaw at ~1.5 s: a done at {a_done:?}, b at {b_done:?}");
    a.expect("the first caller got the connection");
    b.expect("the second caller got the same connection");
    assert!(a_done < Duration::from_secs(4) && b_done < Duration::from_secs(4));

    // A connect that fails is reported to everyone waiting for it, at once.
    let client = Arc::new(Client::new(node.name.clone(), &node.cookie));
    node.freeze();
    let t0 = Instant::now();
    let first = {
        let client = client.clone();
        tokio::spawn(async move { (client.ping(Duration::from_secs(10)).await, t0.elapsed()) })
    };
    // Clock: the second caller asks 1 s into the connect that will fail.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let second = client.ping(Duration::from_secs(10)).await;
    let second_done = t0.elapsed();
    let (first, first_done) = first.await.unwrap();
    node.signal(libc::SIGCONT);
    eprintln!(
        "failed connect: first caller at {first_done:?}, second (1 s later) at {second_done:?}"
    );
    for err in [first.unwrap_err(), second.unwrap_err()] {
        assert!(
            matches!(err, HelperError::Dist(DistError::ConnectTimeout { .. })),
            "{err:?}"
        );
    }
    // The second caller shared the first one's connect rather than starting its own.
    let apart = second_done.abs_diff(first_done);
    assert!(apart < Duration::from_millis(500), "{apart:?}");
    assert!(second_done < Duration::from_millis(5800), "{second_done:?}");
    client
        .ping(Duration::from_secs(5))
        .await
        .expect("the next call connects anew");
}
