//! Calls that come while a node boots wait for it (in the registry, so every tool and the CLI
//! do): they run once it is up, or fail with the reason it did not come up. Never "it is
//! starting, retry".

mod common;

use common::{demo_app, private_dir, text, Server};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The README's `.mcp.json` case: `--stdio --project .`, and the agent's first call comes
/// while the project is still booting.
#[test]
fn a_first_call_over_stdio_waits_for_the_project_to_boot() {
    let state = private_dir();
    let mut server = Command::new(env!("CARGO_BIN_EXE_os_sup_mcp"))
        .arg("--stdio")
        .arg("--project")
        .arg(demo_app())
        .arg("--state-dir")
        .arg(state.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn server");
    let mut stdin = server.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = server.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let eval = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "eval", "arguments": {"name": "demo_app", "code": "Application.started_applications() |> length() > 0"}}});
    // Everything at once, as a client that connects and calls right away.
    writeln!(stdin, "{init}").unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    writeln!(stdin, "{eval}").unwrap();
    let reply = loop {
        let line = rx
            .recv_timeout(common::CALL_TIMEOUT)
            .expect("a reply to the eval");
        let msg: Value = serde_json::from_str(&line).expect("JSON on stdout");
        if msg["id"] == json!(2) {
            break msg;
        }
    };
    assert_ne!(reply["result"]["isError"], json!(true), "{reply}");
    assert_eq!(
        reply["result"]["structuredContent"]["value"], "true",
        "{reply}"
    );
    drop(stdin);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while server.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = server.kill();
            panic!("the server did not exit when stdin closed");
        }
        // Clock: paces this poll; the deadline above bounds it.
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A port nobody listens on yet.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn a_call_on_another_connection_waits_until_the_node_is_running() {
    let server = Server::start();
    let port = free_port();
    // Ready only once `port` accepts connections, which the test decides.
    let mut starter = server.client().await;
    let start = tokio::spawn(async move {
        starter
            .call(
                "start",
                json!({"name": "early", "path": demo_app(), "ready": {"port": port}}),
            )
            .await
    });
    let mut c = server.client().await;
    let node = c
        .wait_status("early", common::CALL_TIMEOUT, |n| n["state"] == "starting")
        .await;
    assert_eq!(node["state"], "starting", "{node}");
    let mut caller = server.client().await;
    let eval = tokio::spawn(async move {
        caller
            .call("eval", json!({"name": "early", "code": "1 + 1"}))
            .await
    });
    // Whether or not the eval has reached the registry yet, the node is still starting: it can
    // only become ready once this listener exists.
    let node = c.node_status("early").await;
    assert_eq!(node["state"], "starting", "{node}");
    let _listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind the readiness port");
    let started = start.await.unwrap();
    assert_ne!(started["isError"], json!(true), "{}", text(&started));
    let result = eval.await.unwrap();
    assert_ne!(result["isError"], json!(true), "{}", text(&result));
    assert_eq!(result["structuredContent"]["value"], "2", "{result}");
}

#[tokio::test]
async fn a_call_waiting_on_a_start_that_fails_gets_the_reason() {
    let server = Server::start();
    let port = free_port();
    let mut starter = server.client().await;
    let start = tokio::spawn(async move {
        starter
            .call(
                "start",
                json!({"name": "never", "path": demo_app(), "ready": {"port": port},
                       "start_timeout_ms": 8000}),
            )
            .await
    });
    let mut c = server.client().await;
    let node = c
        .wait_status("never", common::CALL_TIMEOUT, |n| n["state"] == "starting")
        .await;
    assert_eq!(node["state"], "starting", "{node}");
    let error = c.err("eval", json!({"name": "never", "code": "1"})).await;
    // Waited for the start (8 s from spawn) and told why it failed; or, on a machine so slow
    // that the start had already failed when the call came, told that it failed.
    assert!(
        error.contains("failed to start: not ready within 8000 ms") || error.contains("is failed"),
        "{error}"
    );
    let started = start.await.unwrap();
    assert_eq!(started["isError"], json!(true), "{started}");
}
