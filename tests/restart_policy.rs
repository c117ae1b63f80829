//! What a node's exit leads to, by its restart policy: a crash restarts it (a new OS process,
//! its log kept across runs) and a clean stop is final; the restart limit marks it failed;
//! `temporary` never restarts, `permanent` restarts even a clean exit, `transient` (the
//! default) leaves a clean exit alone; an application that exits under a Mix node is a crash
//! of the node.

mod common;

use common::{demo_app, kill, text, Server};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn crashes_restart_and_stops_stay_stopped() {
    let server = Server::start();
    let mut c = server.client().await;
    let first = c.start_demo("sup").await["os_pid"].as_u64().unwrap();

    // A crash (SIGKILL of the node's OS process) restarts it with a new OS pid.
    kill(first as u32, libc::SIGKILL);
    let node = c.wait_restarted("sup", first).await;
    assert_eq!(node["restarts"], 1);
    assert!(
        node["last_exit"].as_str().unwrap().contains("SIGKILL"),
        "{node}"
    );
    assert_eq!(c.eval("sup", "1 + 1").await["value"], "2");

    // `restart` gives a new OS process too.
    let second = node["os_pid"].as_u64().unwrap();
    let restarted = c.ok("restart", json!({"name": "sup"})).await;
    let third = restarted["os_pid"].as_u64().unwrap();
    assert_ne!(third, second);
    assert_eq!(restarted["state"], "running");
    // Its log keeps the runs before (the crash included), each new run marked.
    let log = c.ok("logs", json!({"name": "sup", "tail": 2000})).await;
    let texts: Vec<&str> = log["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["text"].as_str())
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("restarting after the node exited")),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.contains("a new run starts")),
        "{texts:?}"
    );

    // A clean stop is final.
    let stopped = c.ok("stop", json!({"name": "sup"})).await;
    assert_eq!(stopped["state"], "stopped");
    assert!(stopped["os_pid"].is_null());
    // Clock: still stopped 2 s later, no restart behind our back.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(c.node_status("sup").await["state"], "stopped");
    assert!(
        !common::alive(third as u32),
        "the stopped node's process is gone"
    );
    let not_running = c.err("eval", json!({"name": "sup", "code": "1"})).await;
    assert!(not_running.contains("not running"), "{not_running}");

    // `start` with just the name brings it back with the same settings.
    let again = c.ok("start", json!({"name": "sup"})).await;
    assert_eq!(again["state"], "running");
}

#[tokio::test]
async fn the_restart_limit_marks_the_node_failed() {
    let server = Server::start();
    let mut c = server.client().await;
    let status = c
        .ok("start", json!({"name": "flaky", "path": demo_app(), "max_restarts": 1, "restart_period_ms": 60000}))
        .await;
    let first = status["os_pid"].as_u64().unwrap();
    kill(first as u32, libc::SIGKILL);
    let node = c.wait_restarted("flaky", first).await;
    kill(node["os_pid"].as_u64().unwrap() as u32, libc::SIGKILL);
    let node = c
        .wait_state("flaky", "failed", Duration::from_secs(30))
        .await;
    assert!(
        node["failure"]
            .as_str()
            .unwrap()
            .contains("restart limit reached"),
        "{node}"
    );
    assert!(node["os_pid"].is_null());
}

#[tokio::test]
async fn restart_policies_decide_what_an_exit_leads_to() {
    let server = Server::start();
    let mut c = server.client().await;
    let temp = c
        .ok(
            "start",
            json!({"name": "temp", "path": demo_app(), "restart": "temporary"}),
        )
        .await;
    assert_eq!(temp["restart_policy"], "temporary");
    kill(temp["os_pid"].as_u64().unwrap() as u32, libc::SIGKILL);
    let node = c
        .wait_status("temp", Duration::from_secs(20), |n| n["state"] == "failed")
        .await;
    assert_eq!(
        node["state"], "failed",
        "temporary is never restarted: {node}"
    );
    assert_eq!(node["restarts"], 0);

    let perm = c
        .ok(
            "start",
            json!({"name": "perm", "path": demo_app(), "restart": "permanent", "backoff_ms": 100}),
        )
        .await;
    let first = perm["os_pid"].as_u64().unwrap();
    // A clean exit the server did not ask for: permanent restarts it anyway.
    c.eval(
        "perm",
        "spawn(fn -> Process.sleep(100); System.stop(0) end); :ok",
    )
    .await;
    let node = c.wait_restarted("perm", first).await;
    assert_eq!(node["restarts"], 1);
    assert_eq!(node["last_exit"], "exit status 0");

    // Transient (the default) leaves a clean exit alone.
    c.start_demo("trans").await;
    c.eval(
        "trans",
        "spawn(fn -> Process.sleep(100); System.stop(0) end); :ok",
    )
    .await;
    c.wait_state("trans", "stopped", Duration::from_secs(20))
        .await;
}

#[tokio::test]
async fn an_application_exit_is_a_crash_of_a_mix_node() {
    let server = Server::start();
    let mut c = server.client().await;
    let shop = common::shop();
    let started = c.start_project("shop", &shop).await;
    assert_eq!(
        started["apps"],
        json!([{"name": "shop", "state": "running"}]),
        "{started}"
    );
    let first_pid = started["os_pid"].clone();
    c.eval(
        "shop",
        // In a process of its own, after the eval has answered: the node dies of it, and an
        // eval still waiting for its reply then would see the connection go.
        "spawn(fn -> Process.sleep(100); Process.exit(Process.whereis(Shop.Supervisor), :kill) end)",
    )
    .await;
    let restarted = c
        .wait_status("shop", Duration::from_secs(60), |n| {
            n["restarts"] == 1 && n["state"] == "running"
        })
        .await;
    assert_eq!(restarted["restarts"], 1, "{restarted}");
    assert_ne!(restarted["os_pid"], first_pid, "a new OS process");
    let exit = restarted["last_exit"].as_str().unwrap_or_default();
    assert!(exit.contains("application `shop` exited"), "{restarted}");
    let apps = c
        .eval(
            "shop",
            "Application.started_applications() |> Enum.map(&elem(&1, 0))",
        )
        .await;
    assert!(apps["value"].as_str().unwrap().contains(":shop"), "{apps}");

    // `temporary`: the node is left up, and its status says the application is gone.
    c.ok(
        "start",
        json!({"name": "temp", "path": shop, "restart": "temporary"}),
    )
    .await;
    c.eval(
        "temp",
        // In a process of its own, after the eval has answered: the node dies of it, and an
        // eval still waiting for its reply then would see the connection go.
        "spawn(fn -> Process.sleep(100); Process.exit(Process.whereis(Shop.Supervisor), :kill) end)",
    )
    .await;
    let marked = c
        .wait_status("temp", Duration::from_secs(30), |n| {
            n["apps"][0]["state"] == "exited"
        })
        .await;
    assert_eq!(marked["state"], "running", "{marked}");
    assert_eq!(marked["apps"][0]["state"], "exited", "{marked}");
    let text = text(&c.call("status", json!({"name": "temp"})).await);
    assert!(text.contains("app shop: exited"), "{text}");
    assert!(text.starts_with("temp app-exited pid="), "{text}");
}
