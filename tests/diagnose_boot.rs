//! A node that is still starting is a node to diagnose. The ailments fixture's `stuck_boot`
//! never finishes starting (`Ailments.Licence.init/1` sleeps 200 ms and asks again, forever,
//! for a key nobody sets): a `start` that times out says where its start waits, with the
//! function and file:line, read before the node is killed, and blames no compile; what the
//! loop asks each time and what comes back is said; while it
//! starts, the tools that only look answer at once (no wait for a readiness that never
//! comes) and `diagnose` names the blocked `init` first; a node made ready by another check
//! (a port) is never called healthy while its application has not started. Every node dies
//! with its server, also when an assertion fails.

mod common;

use common::{ailments, diagnose_with, text, wait_until, Client, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// What every answer about the stuck boot must name: the blocked `init/1` and the function it
/// loops in, each with file:line.
fn names_the_blocked_init(answer: &str) {
    for needle in [
        "Ailments.Licence.init/1 lib/ailments/licence.ex:",
        "Ailments.Licence.await_key/0 lib/ailments/licence.ex:",
        "Ailments.Supervisor → Ailments.Licence",
    ] {
        assert!(answer.contains(needle), "no `{needle}` in: {answer}");
    }
}

/// `diagnose` on `name` over a short window, which must answer; its text and data.
async fn diagnose(c: &mut Client, name: &str) -> (String, Value) {
    diagnose_with(c, json!({"name": name, "window_ms": 500}), 2000).await
}

/// The first finding is `not_started` on the blocked init, and the node is not healthy.
fn not_started_first(answer: &str, report: &Value) {
    let first = &report["findings"][0];
    assert_eq!(first["kind"], "not_started", "{answer}");
    assert_eq!(first["module"], "Ailments.Licence", "{answer}");
    assert_eq!(first["function"], "await_key/0", "{answer}");
    assert_eq!(report["healthy"], false, "{answer}");
    assert!(!answer.contains("healthy"), "{answer}");
    let line = first["line"].as_str().unwrap();
    assert!(
        line.starts_with("not_started: application ailments not started "),
        "{line}"
    );
    names_the_blocked_init(line);
    // It retries rather than waits for good, says what it asks each time and what comes
    // back, and the next call shows the code.
    assert!(line.contains("looping"), "{line}");
    assert!(
        line.contains("; each time it calls Application.get_env(:ailments, :licence_key) → nil"),
        "{line}"
    );
    assert!(
        answer.contains("next: source {\"name\":\"")
            && answer.contains("Ailments.Licence.await_key/0"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_start_that_times_out_says_where_its_start_waits() {
    let server = Server::start();
    let mut c = server.client().await;
    let error = c
        .err(
            "start",
            json!({"name": "stuck", "path": ailments(), "env": {"AILMENT": "stuck_boot"},
                   "start_timeout_ms": 10000}),
        )
        .await;
    eprintln!("start stuck:\n{error}");
    assert!(
        error.contains("not ready within 10000 ms: application ailments not started "),
        "{error}"
    );
    names_the_blocked_init(&error);
    // Nothing was compiling: no compile is blamed.
    assert!(!error.contains("compile"), "{error}");
    assert_eq!(c.node_status("stuck").await["state"], "failed");
}

#[tokio::test]
async fn diagnose_on_a_node_still_starting_names_the_blocked_init_first() {
    let server = Server::start();
    let mut starter = server.client().await;
    let args = json!({"name": "stuck", "path": ailments(), "env": {"AILMENT": "stuck_boot"},
                      "start_timeout_ms": 600000});
    let start = tokio::spawn(async move { starter.call("start", args).await });
    let mut c = server.client().await;
    let node = c
        .wait_status("stuck", common::CALL_TIMEOUT, |n| n["state"] == "starting")
        .await;
    assert_eq!(node["state"], "starting", "{node}");

    // The tools that only look answer once the helper does, not after a 30 s wait.
    let asked = Instant::now();
    let waits = wait_until(
        Duration::from_secs(60),
        "waits kept failing on the starting node",
        async || c.call("waits", json!({"name": "stuck"})).await,
        |result| result["isError"] != true,
    )
    .await;
    eprintln!("waits stuck:\n{}", text(&waits));
    for (tool, args) in [
        ("processes", json!({"name": "stuck", "limit": 3})),
        ("supervision_tree", json!({"name": "stuck"})),
        ("applications", json!({"name": "stuck"})),
        ("system_info", json!({"name": "stuck"})),
    ] {
        let result = c.call(tool, args).await;
        eprintln!("{tool} stuck:\n{}", text(&result));
        assert_ne!(result["isError"], json!(true), "{tool}: {}", text(&result));
    }
    let (answer, report) = diagnose(&mut c, "stuck").await;
    assert!(
        asked.elapsed() < Duration::from_secs(25),
        "the tools that look waited {:?}",
        asked.elapsed()
    );
    not_started_first(&answer, &report);
    assert_eq!(c.node_status("stuck").await["state"], "starting");

    // Stopping it ends the start that would never finish.
    c.ok("stop", json!({"name": "stuck"})).await;
    let started = tokio::time::timeout(Duration::from_secs(30), start)
        .await
        .expect("the start did not end when the node was stopped")
        .unwrap();
    assert_eq!(started["isError"], json!(true), "{started}");
}

/// Starts the ailments fixture ill with `ailment` as node `name`, ready as soon as a port
/// that already accepts connections does (before its application has started), and waits
/// until `diagnose` finds the start of `module` that has not returned; its text and data.
async fn started_by_a_port(
    c: &mut Client,
    name: &str,
    ailment: &str,
    module: &str,
) -> (String, Value) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().unwrap().port();
    c.ok(
        "start",
        json!({"name": name, "path": ailments(), "env": {"AILMENT": ailment},
               "ready": {"port": port}}),
    )
    .await;
    assert_eq!(c.node_status(name).await["state"], "running");
    // The helper is up before Mix starts the application: until its start has begun, the
    // finding says what Mix does meanwhile; never is the node healthy.
    wait_until(
        Duration::from_secs(60),
        "diagnose never named the blocked start",
        async || diagnose(c, name).await,
        |(answer, report)| {
            let first = &report["findings"][0];
            assert_eq!(first["kind"], "not_started", "{answer}");
            first["module"] == module
        },
    )
    .await
}

#[tokio::test]
async fn a_node_ready_by_another_check_is_not_healthy_while_its_application_has_not_started() {
    let server = Server::start();
    let mut c = server.client().await;
    let (answer, report) =
        started_by_a_port(&mut c, "stuck", "stuck_boot", "Ailments.Licence").await;
    not_started_first(&answer, &report);
}

#[tokio::test]
async fn an_init_blocked_in_a_call_names_the_server_that_holds_it() {
    let server = Server::start();
    let mut c = server.client().await;
    let (answer, report) =
        started_by_a_port(&mut c, "ledger", "stuck_call", "Ailments.Ledger").await;
    let first = &report["findings"][0];
    assert_eq!(first["module"], "Ailments.Ledger", "{answer}");
    assert_eq!(first["function"], "init/1", "{answer}");
    assert_eq!(report["healthy"], false, "{answer}");
    let line = first["line"].as_str().unwrap();
    for needle in [
        "its start waits in Ailments.Ledger.init/1 lib/ailments/registrar.ex:",
        "in a call on Ailments.Registrar (idle, nothing queued: it holds the call unanswered)",
        "Ailments.Supervisor → Ailments.Ledger",
    ] {
        assert!(line.contains(needle), "no `{needle}` in: {line}");
    }
    assert!(!line.contains("looping"), "{line}");
}
