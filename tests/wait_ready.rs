//! Readiness: `start` waits until a log line, a port or a URL says the node is ready, and fails
//! fast, with the exit status and last lines, when the node exits first; `wait_ready` says
//! what it saw last (a 404 with the start of its body, a refused connection, a closed port, a
//! regex not matched yet with the last log lines), and checks with a backoff: a few requests
//! per second at most, not a flood of requests and log lines.

mod common;

use common::{demo_node, Server};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A web server that answers every request with a 404 and counts them (test scaffolding: the
/// thing under test is the prober).
async fn not_found_server() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = socket.read(&mut buf).await;
                let body = r#"{"errors":{"detail":"Not Found"}}"#;
                let answer = format!(
                    "HTTP/1.1 404 Not Found\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    (port, requests)
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn wait_ready_says_what_it_saw_and_backs_off() {
    let (_server, mut c) = demo_node("w").await;

    let (port, requests) = not_found_server().await;
    let started = Instant::now();
    let not_found = c
        .err(
            "wait_ready",
            json!({"name": "w", "ready": {"url": format!("http://127.0.0.1:{port}/health")},
                   "timeout_ms": 3000}),
        )
        .await;
    let took = started.elapsed();
    let made = requests.load(Ordering::SeqCst);
    assert!(not_found.contains("answered 404 Not Found"), "{not_found}");
    assert!(
        not_found.contains("Not Found\\\"}}"),
        "the body is quoted: {not_found}"
    );
    assert!(
        not_found.contains("the node is up"),
        "the node is not compiling: no advice to raise the timeout: {not_found}"
    );
    assert!(!not_found.contains("first compile"), "{not_found}");
    // A few requests a second at most (it was ~19/s before the backoff).
    let per_second = made as f64 / took.as_secs_f64();
    assert!(
        made >= 2 && per_second <= 4.0,
        "{made} requests in {took:?}: {not_found}"
    );

    // What the node printed before this wait (an earlier probe's request, as Phoenix logs it)
    // is not quoted under its failure; the timeout named is the one given.
    c.eval(
        "w",
        "IO.puts(\"GET /api/nope\"); IO.puts(\"Sent 404 in 1ms\")",
    )
    .await;
    let closed = closed_port();
    let refused = c
        .err(
            "wait_ready",
            json!({"name": "w", "ready": {"url": format!("http://127.0.0.1:{closed}/")},
                   "timeout_ms": 1000}),
        )
        .await;
    assert!(refused.contains("connection refused"), "{refused}");
    // (Not the bare "404": the closed port's number may hold it.)
    assert!(!refused.contains("answered 404"), "{refused}");
    assert!(!refused.contains("/api/nope"), "{refused}");
    assert!(refused.contains("not ready within 1000 ms"), "{refused}");

    let port_closed = c
        .err(
            "wait_ready",
            json!({"name": "w", "ready": {"port": closed}, "timeout_ms": 1000}),
        )
        .await;
    assert!(
        port_closed.contains(&format!("port {closed}: connection refused")),
        "{port_closed}"
    );

    let no_line = c
        .err(
            "wait_ready",
            json!({"name": "w", "ready": {"log": "never printed \\d+"}, "timeout_ms": 1000}),
        )
        .await;
    assert!(
        no_line.contains("no log line matched `never printed \\d+` yet; the last ones:"),
        "{no_line}"
    );

    // Met conditions still answer at once.
    let (port, _) = not_found_server().await;
    let open = c
        .call(
            "wait_ready",
            json!({"name": "w", "ready": {"port": port}, "timeout_ms": 3000}),
        )
        .await;
    assert_ne!(open["isError"], json!(true), "{open}");
    tokio::time::timeout(Duration::from_secs(20), c.ok("stop", json!({"name": "w"})))
        .await
        .expect("stop in time");
}

#[tokio::test]
async fn readiness_by_log_line_port_and_url_and_fast_failure() {
    let server = Server::start();
    let mut c = server.client().await;

    let by_log = json!({"name": "bylog", "ready": {"log": "listening n[o]w"},
        "command": ["erl", "-noshell", "-eval", "timer:sleep(300), io:format(\"listening now~n\")"]});
    let started = c.ok("start", by_log).await;
    assert_eq!(started["state"], "running");
    let seen = c
        .ok("logs", json!({"name": "bylog", "grep": "listening"}))
        .await;
    assert_eq!(
        seen["matched"], 1,
        "ready only once the line was there: {seen}"
    );

    let port = closed_port();
    let listen = format!(
        "spawn(fun() -> timer:sleep(300), {{ok, L}} = gen_tcp:listen({port}, [{{reuseaddr, true}}, {{ip, {{127,0,0,1}}}}]), timer:sleep(infinity), L end)"
    );
    let by_port = json!({"name": "byport", "ready": {"port": port}, "command": ["erl", "-noshell", "-eval", listen]});
    c.ok("start", by_port).await;
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    let again = c
        .ok(
            "wait_ready",
            json!({"name": "byport", "ready": {"port": port}, "timeout_ms": 5000}),
        )
        .await;
    assert_eq!(again["state"], "running");

    let http_port = closed_port();
    let http = format!(
        "spawn(fun() -> {{ok, L}} = gen_tcp:listen({http_port}, [binary, {{active, false}}, {{reuseaddr, true}}, {{ip, {{127,0,0,1}}}}]), \
         Loop = fun Loop() -> {{ok, S}} = gen_tcp:accept(L), _ = gen_tcp:recv(S, 0, 1000), \
         ok = gen_tcp:send(S, <<\"HTTP/1.0 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok\">>), gen_tcp:close(S), Loop() end, Loop() end)"
    );
    let url = format!("http://127.0.0.1:{http_port}/health");
    let by_url = json!({"name": "byurl", "ready": {"url": url}, "command": ["erl", "-noshell", "-eval", http]});
    c.ok("start", by_url).await;

    // A node that exits while `start` waits fails fast, with its exit status and last lines.
    let dying = json!({"name": "dying", "ready": {"log": "never printed"}, "start_timeout_ms": 60000,
        "command": ["erl", "-noshell", "-eval", "io:format(\"about to die~n\"), timer:sleep(500), halt(3)"]});
    let begun = std::time::Instant::now();
    let failed = c.err("start", dying).await;
    assert!(begun.elapsed() < Duration::from_secs(15), "failed fast");
    assert!(failed.contains("exit status 3"), "{failed}");
    assert!(failed.contains("about to die"), "{failed}");
    let bad = c
        .err(
            "wait_ready",
            json!({"name": "bylog", "ready": {"url": "https://x"}}),
        )
        .await;
    assert!(bad.contains("http://"), "{bad}");
}
