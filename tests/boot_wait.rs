//! Calls that come while a node boots wait for it (in the registry, so every tool and the CLI
//! do): they run once it is up, or fail with the reason it did not come up. Never "it is
//! starting, retry".

mod common;

use common::{demo_app, private_dir, text, Client, Server, StdioServer};
use serde_json::{json, Value};
use tokio::task::JoinHandle;

/// The README's `.mcp.json` case: `--stdio --project .`, and the agent's first call comes
/// while the project is still booting.
#[test]
fn a_first_call_over_stdio_waits_for_the_project_to_boot() {
    let state = private_dir();
    let project = demo_app();
    let mut server = StdioServer::start(&[
        "--project",
        project.to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    let eval = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "eval", "arguments": {"name": "demo_app", "code": "Application.started_applications() |> length() > 0"}}});
    // Everything at once, as a client that connects and calls right away.
    server.send_initialize();
    server.send(&eval);
    let reply = server.reply(2);
    assert_ne!(reply["result"]["isError"], json!(true), "{reply}");
    assert_eq!(
        reply["result"]["structuredContent"]["value"], "true",
        "{reply}"
    );
    assert!(
        server.close().is_some(),
        "the server did not exit when stdin closed"
    );
}

/// A port nobody listens on yet.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().unwrap().port()
}

/// Calls `start` with `args` on a connection of its own, in the background, and waits until
/// the node is starting: the call's result to come, and a client on another connection.
async fn start_in_background(server: &Server, args: Value) -> (JoinHandle<Value>, Client) {
    let name = args["name"].as_str().unwrap().to_string();
    let mut starter = server.client().await;
    let start = tokio::spawn(async move { starter.call("start", args).await });
    let mut c = server.client().await;
    let node = c
        .wait_status(&name, common::CALL_TIMEOUT, |n| n["state"] == "starting")
        .await;
    assert_eq!(node["state"], "starting", "{node}");
    (start, c)
}

#[tokio::test]
async fn a_call_on_another_connection_waits_until_the_node_is_running() {
    let server = Server::start();
    let port = free_port();
    // Ready only once `port` accepts connections, which the test decides.
    let args = json!({"name": "early", "path": demo_app(), "ready": {"port": port}});
    let (start, mut c) = start_in_background(&server, args).await;
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
    let args = json!({"name": "never", "path": demo_app(), "ready": {"port": port},
                      "start_timeout_ms": 8000});
    let (start, mut c) = start_in_background(&server, args).await;
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
