//! The distribution client against a real plain-Erlang node (no Elixir) running the helper:
//! errors, multiplexing, late replies, ticks and reconnection.

mod common;

use common::erl::ErlNode;

use os_sup_mcp::dist::{ConnectOptions, Connection, DistError};
use os_sup_mcp::helper::{Client, EvalRequest, Lang};
use os_sup_mcp::term;
use std::time::{Duration, Instant};

/// A connection to `node` once its helper answers (it boots in the background).
async fn connect(node: &ErlNode) -> Connection {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match Connection::open(&node.name, &node.cookie, Duration::from_secs(2)).await {
            Ok(conn) if ping(&conn).await.is_ok() => return conn,
            // Clock: paces this poll; the deadline above bounds it.
            _ if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
            other => panic!("cannot reach {}: {:?}", node.name, other.err()),
        }
    }
}

/// A plain `erl` node with the helper loaded; killed on drop.
fn helper_node(base: &str, extra: &[&str]) -> ErlNode {
    ErlNode::build(base).helper().args(extra).start()
}

async fn ping(conn: &Connection) -> Result<String, DistError> {
    let reply = conn
        .call("os_sup_helper", term::atom("ping"), Duration::from_secs(2))
        .await?;
    Ok(term::as_atom(&reply).unwrap_or("?").to_string())
}

fn eval_term(code: &str) -> eetf::Term {
    term::tuple(vec![
        term::atom("eval"),
        term::atom("erlang"),
        term::binary(code),
        term::map(vec![("timeout_ms", term::int(10_000))]),
    ])
}

#[tokio::test]
async fn clear_errors_for_unknown_nodes_and_wrong_cookies() {
    let node = helper_node("cookie", &[]);
    connect(&node).await;
    let wrong = Connection::open(&node.name, "not_the_cookie", Duration::from_secs(5)).await;
    assert!(
        matches!(wrong, Err(DistError::AuthFailed { .. })),
        "{:?}",
        wrong.err()
    );
    let ghost = format!("ghost_{}@127.0.0.1", std::process::id());
    let missing = Connection::open(&ghost, &node.cookie, Duration::from_secs(5)).await;
    assert!(
        matches!(missing, Err(DistError::NotRegistered { .. })),
        "{:?}",
        missing.err()
    );
    let bad = Connection::open("no-at-sign", &node.cookie, Duration::from_secs(5)).await;
    assert!(matches!(bad, Err(DistError::BadNodeName(_))));
}

#[tokio::test]
async fn many_calls_in_flight_and_late_replies_go_nowhere() {
    let node = helper_node("mux", &[]);
    let conn = connect(&node).await;

    let calls = (0..200).map(|_| ping(&conn));
    for reply in futures::future::join_all(calls).await {
        assert_eq!(reply.unwrap(), "pong");
    }

    // A call that times out; its reply arrives later and must not reach the next caller.
    let slow = conn
        .call(
            "os_sup_helper",
            eval_term("timer:sleep(300), late_reply"),
            Duration::from_millis(50),
        )
        .await;
    assert!(
        matches!(slow, Err(DistError::Timeout { .. })),
        "{:?}",
        slow.err()
    );
    for _ in 0..10 {
        assert_eq!(ping(&conn).await.unwrap(), "pong");
        // Clock: the pings span the late reply's arrival (300 ms after the call).
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A request to a name nobody registered times out cleanly; the connection stays usable.
    let nobody = conn
        .call(
            "nobody_here",
            term::atom("ping"),
            Duration::from_millis(100),
        )
        .await;
    assert!(matches!(nobody, Err(DistError::Timeout { .. })));
    assert_eq!(ping(&conn).await.unwrap(), "pong");
}

#[tokio::test]
async fn ticks_keep_an_idle_connection_alive() {
    // net_ticktime 2: the node drops a link that stays silent for ~2 s.
    let node = helper_node("ticks", &["-kernel", "net_ticktime", "2"]);
    let conn = connect(&node).await;
    // Clock: idle for more than twice the node's net_ticktime.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!conn.is_closed(), "the node dropped an idle connection");
    assert_eq!(ping(&conn).await.unwrap(), "pong");
}

#[tokio::test]
async fn lost_connections_are_reported_and_reestablished() {
    let node = helper_node("lost", &[]);
    connect(&node).await;
    let client = Client::new(node.name.clone(), &node.cookie);
    client.ping(Duration::from_secs(2)).await.unwrap();

    // The node drops our (hidden) connection while staying alive.
    let mut drop_us = EvalRequest::new("[erlang:disconnect_node(N) || N <- nodes(hidden)], ok");
    drop_us.lang = Lang::Erlang;
    // Its reply is lost with the connection: the eval ends once our side has seen it go.
    let lost = client.eval(&drop_us).await;
    assert!(
        lost.is_err(),
        "the node dropped us before it answered: {lost:?}"
    );
    client
        .ping(Duration::from_secs(2))
        .await
        .expect("reconnected on the next call");

    // A dead node: calls fail fast with a clear error instead of hanging.
    let conn = connect(&node).await;
    drop(node);
    let started = Instant::now();
    let err = ping(&conn).await.unwrap_err();
    assert!(
        matches!(
            err,
            DistError::ConnectionLost { .. } | DistError::Timeout { .. }
        ),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    let again = client
        .ping(Duration::from_secs(2))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        again.contains("not registered") || again.contains("lost"),
        "{again}"
    );
}

#[tokio::test]
async fn the_helper_survives_code_reloads() {
    let node = helper_node("reload", &[]);
    connect(&node).await;
    let client = Client::new(node.name.clone(), &node.cookie);
    let erlang = |code: &str| {
        let mut request = EvalRequest::new(code);
        request.lang = Lang::Erlang;
        request
    };
    let whereis = erlang("pid_to_list(whereis(os_sup_helper))");
    let before = client.eval(&whereis).await.unwrap().unwrap().value;
    // Two loads in a row purge the first version: anything still running it would be killed.
    let reload = erlang(
        "{M, B, F} = code:get_object_code(os_sup_helper), {module, M} = code:load_binary(M, F, B), ok",
    );
    for _ in 0..3 {
        let out = client.eval(&reload).await.unwrap();
        assert_eq!(out.unwrap().value, "ok");
    }
    client.ping(Duration::from_secs(2)).await.unwrap();
    let after = client.eval(&whereis).await.unwrap().unwrap().value;
    assert_eq!(before, after, "the same helper process still serves");
}

fn signal(node: &ErlNode, signal: i32) {
    unsafe { libc::kill(node.child.id() as i32, signal) };
}

#[tokio::test]
async fn a_silent_peer_is_lost_within_net_ticktime_and_a_quiet_one_is_not() {
    // The node ticks at its own default pace (every 15 s): only our probe keeps a 1 s
    // net_ticktime link alive while nothing else is said.
    let node = helper_node("silence", &[]);
    connect(&node).await;
    let options = ConnectOptions {
        net_ticktime: Duration::from_secs(1),
        ..ConnectOptions::default()
    };
    let conn = Connection::open_with(&node.name, &node.cookie, &options)
        .await
        .unwrap();
    // Clock: quiet for three of our 1 s net_ticktimes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    if conn.is_closed() {
        panic!(
            "a healthy but quiet node was declared lost: {:?}",
            ping(&conn).await
        );
    }
    assert_eq!(ping(&conn).await.unwrap(), "pong");

    // A frozen node: the waiting call fails once the link has been silent for net_ticktime,
    // long before its own 30 s timeout.
    common::freeze(node.child.id());
    let started = Instant::now();
    let err = conn
        .call("os_sup_helper", term::atom("ping"), Duration::from_secs(30))
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    signal(&node, libc::SIGCONT);
    eprintln!("frozen node detected after {elapsed:?}: {err}");
    assert!(
        matches!(err, DistError::ConnectionLost { .. }),
        "{err:?} after {elapsed:?}"
    );
    assert!(err.to_string().contains("nothing received"), "{err}");
    assert!(elapsed < Duration::from_millis(2500), "{elapsed:?}");
    assert!(conn.is_closed());
    // Every later call on the dead connection fails at once.
    let started = Instant::now();
    assert!(matches!(
        ping(&conn).await,
        Err(DistError::ConnectionLost { .. })
    ));
    assert!(started.elapsed() < Duration::from_millis(50));
}

#[tokio::test]
async fn a_late_reply_to_an_abandoned_pending_call_goes_nowhere() {
    let node = helper_node("pending", &[]);
    let conn = connect(&node).await;
    let mut pending = conn
        .send_call(
            "os_sup_helper",
            eval_term("timer:sleep(300), late_reply"),
            Duration::from_secs(1),
        )
        .await
        .unwrap();
    // Waiting is cancel-safe: a timeout leaves the call pending.
    let early = pending.reply_within(Duration::from_millis(50)).await;
    assert!(matches!(early, Err(DistError::Timeout { .. })), "{early:?}");
    drop(pending);
    for _ in 0..10 {
        assert_eq!(ping(&conn).await.unwrap(), "pong");
        // Clock: the pings span the late reply's arrival (300 ms after the call).
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // And one that is waited for again gets its reply.
    let mut pending = conn
        .send_call(
            "os_sup_helper",
            eval_term("timer:sleep(200), on_time"),
            Duration::from_secs(1),
        )
        .await
        .unwrap();
    assert!(pending
        .reply_within(Duration::from_millis(20))
        .await
        .is_err());
    let reply = pending.reply_within(Duration::from_secs(2)).await.unwrap();
    let value = term::tagged(reply).and_then(|(tag, value)| {
        assert_eq!(tag, "ok");
        term::get(&value, "value").and_then(term::as_text)
    });
    assert_eq!(value.as_deref(), Some("on_time"));
}
