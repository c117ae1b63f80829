//! What `start` and `status` say is true whatever the start mode: the project's applications
//! are watched when a `command` runs Mix (not only for a `path` start), a command that asks a
//! question on its standard input fails in seconds quoting it, uptime counts from the OS
//! process's start, and the error shown beside an exit belongs to that run, on one cut line.

mod common;

use common::{demo_app, kill, Server};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_command_running_mix_has_its_applications_watched_and_restarted() {
    let server = Server::start();
    let mut c = server.client().await;
    let started = c
        .ok(
            "start",
            json!({"name": "cmd", "path": demo_app(), "command": ["mix", "run", "--no-halt"]}),
        )
        .await;
    assert_eq!(started["apps"][0]["name"], "demo_app", "{started}");
    assert!(
        started["uptime_ms"].as_u64().is_some_and(|up| up > 0),
        "uptime counts from the process's start, in the start answer too: {started}"
    );
    let pid = started["os_pid"].as_u64().unwrap();

    c.eval(
        "cmd",
        // In a process of its own, after the eval has answered: the node dies of it, and an
        // eval still waiting for its reply then would see the connection go.
        "spawn(fn -> Process.sleep(100); Process.exit(Process.whereis(DemoApp.Supervisor), :kill) end)",
    )
    .await;
    let node = c.wait_restarted("cmd", pid).await;
    assert_eq!(node["restarts"], 1, "{node}");
    assert!(
        node["last_exit"]
            .as_str()
            .unwrap_or_default()
            .contains("application `demo_app` exited"),
        "{node}"
    );
    assert_eq!(node["apps"][0]["state"], "running", "{node}");
}

#[tokio::test]
async fn a_command_that_asks_on_stdin_fails_in_seconds_quoting_the_question() {
    let server = Server::start();
    let mut c = server.client().await;
    let marker = format!("sleep 61.{}", std::process::id());
    let asked = Instant::now();
    let error = c
        .err(
            "start",
            json!({"name": "asks", "command": ["sh", "-c",
                format!("printf 'Shall I install Hex? [Yn] '; read answer; {marker}")]}),
        )
        .await;
    assert!(asked.elapsed() < Duration::from_secs(10), "{error}");
    assert!(
        error.contains("waits for an answer on its standard input: `Shall I install Hex? [Yn]`"),
        "{error}"
    );
    assert!(
        error.contains("#0") && error.contains("out Shall I install Hex?"),
        "the prompt is in the quoted output: {error}"
    );
    let left = std::process::Command::new("pgrep")
        .args(["-f", &marker])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "nothing is left running: {left:?}");
}

#[tokio::test]
async fn the_error_beside_an_exit_is_that_runs_on_one_cut_line() {
    let server = Server::start();
    let mut c = server.client().await;
    let started = c.start_demo("err").await;
    let pid = started["os_pid"].as_u64().unwrap();
    // An error long before the exit (a failed request, say), 2 KB long.
    c.eval(
        "err",
        r#"require Logger; Logger.error("old failure " <> String.duplicate("x", 2000))"#,
    )
    .await;
    // Clock: the error is more than 5 s old at the exit (the server's `EXIT_ERROR_NEAR`).
    tokio::time::sleep(Duration::from_secs(6)).await;
    kill(pid as u32, libc::SIGKILL);
    let node = c.wait_restarted("err", pid).await;
    let error = node["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("old failure"), "{node}");
    assert!(
        error.contains("before the exit: maybe not its cause"),
        "labelled as maybe unrelated: {node}"
    );
    assert!(error.chars().count() < 300, "one cut line: {error}");

    // A stop asked for is no error's doing: its answer repeats no old error.
    let stopped = c.ok("stop", json!({"name": "err"})).await;
    assert!(stopped["last_error"].is_null(), "{stopped}");
}
