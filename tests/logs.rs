//! The log of a node (`logs`): printed output and logger events, the application's own and an
//! eval's, read by source, level, regex and time, and kept after a crash and across automatic
//! restarts.

mod common;

use common::{demo_app, kill, wait_until, Server};
use serde_json::{json, Value};
use std::time::Duration;

/// How long a logger event may take to reach `logs`.
const ARRIVAL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn logs_keep_output_and_logger_events_after_a_crash() {
    let server = Server::start();
    let mut c = server.client().await;
    let status = c
        .ok(
            "start",
            json!({"name": "logs", "path": demo_app(), "max_restarts": 0}),
        )
        .await;
    c.eval(
        "logs",
        r#"IO.puts(:user, "printed to stdout"); require Logger; Logger.error("logged by eval")"#,
    )
    .await;
    // A logger event from the application itself (not an eval): a crashing GenServer.
    c.eval(
        "logs",
        r#"spawn(fn -> GenServer.call(DemoApp.Counter, :no_such_call) end); :ok"#,
    )
    .await;

    // Both events reach the server through the node's logger handler: read until they have.
    let by_eval =
        |events: &Value| {
            events["lines"].as_array().unwrap().iter().any(|l| {
                l["text"].as_str().unwrap().contains("logged by eval") && l["eval"] == true
            })
        };
    let events = wait_until(
        ARRIVAL,
        "the eval's logger event",
        async || {
            c.ok("logs", json!({"name": "logs", "source": "logger"}))
                .await
        },
        by_eval,
    )
    .await;
    assert!(by_eval(&events), "{events}");
    let crash = json!({"name": "logs", "min_level": "error", "skip_eval": true, "grep": "Counter|no_such_call"});
    let errors = wait_until(
        ARRIVAL,
        "the crash report",
        async || c.ok("logs", crash.clone()).await,
        |errors| errors["matched"].as_u64() >= Some(1),
    )
    .await;
    assert!(
        errors["matched"].as_u64().unwrap() >= 1,
        "the crash report is logged: {errors}"
    );

    // After a crash (no restarts allowed) the log and exit stay readable.
    kill(status["os_pid"].as_u64().unwrap() as u32, libc::SIGKILL);
    let node = c
        .wait_state("logs", "failed", Duration::from_secs(20))
        .await;
    assert!(node["last_exit"].as_str().unwrap().contains("SIGKILL"));
    assert!(
        node["last_error"].as_str().is_some(),
        "status shows the last error: {node}"
    );
    let after = c
        .ok(
            "logs",
            json!({"name": "logs", "grep": "printed to stdout", "source": "stdout"}),
        )
        .await;
    assert_eq!(after["matched"], 1, "{after}");
    let since = c
        .ok("logs", json!({"name": "logs", "since": "10m", "tail": 5}))
        .await;
    assert!(since["lines"].as_array().unwrap().len() <= 5);
    let bad = c.err("logs", json!({"name": "logs", "grep": "("})).await;
    assert!(bad.contains("regular expression"), "{bad}");
}

#[tokio::test]
async fn the_log_survives_automatic_restarts() {
    let server = Server::start();
    let mut c = server.client().await;
    let first = c.start_demo("relog").await["os_pid"].as_u64().unwrap();
    c.eval("relog", r#"IO.puts(:user, "said before the crash")"#)
        .await;
    kill(first as u32, libc::SIGKILL);
    c.wait_restarted("relog", first).await;
    let kept = c
        .ok(
            "logs",
            json!({"name": "relog", "grep": "said before the crash|restarting after"}),
        )
        .await;
    assert_eq!(kept["matched"], 2, "{kept}");
}
