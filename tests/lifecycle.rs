//! A lifecycle that cannot stick: slots freed by stopped nodes and `remove`, stops that
//! interrupt a start or a restart backoff, commands that do not come up as the expected node
//! fail fast with a reason, a Mix release started, evaluated and stopped, and a port's program
//! that ignores its stdin ended with its node.

mod common;

use common::{beams_matching, demo_app, names, text, timed, Server};
use serde_json::json;
use std::process::Command;
use std::time::{Duration, Instant};

#[tokio::test]
async fn only_live_nodes_take_a_slot_and_remove_forgets_a_record() {
    let server = Server::start_with(&["--max-nodes", "2"]);
    let mut c = server.client().await;
    let erl = |name: &str| json!({"name": name, "command": ["erl", "-noshell"]});
    for name in ["a", "b"] {
        c.ok("start", erl(name)).await;
        c.ok("stop", json!({"name": name})).await;
    }
    c.ok("start", erl("c")).await;
    c.ok("start", erl("d")).await;
    let full = c.err("start", erl("e")).await;
    assert!(full.contains("--max-nodes"), "{full}");

    let running = c.err("remove", json!({"name": "c"})).await;
    assert!(running.contains("stop` it first"), "{running}");
    let removed = c.ok("remove", json!({"name": "a"})).await;
    assert_eq!(removed["name"], "a");
    let status = c.ok("status", json!({})).await;
    let names = names(&status["nodes"]);
    assert_eq!(names, ["b", "c", "d"]);
    let gone = c.err("logs", json!({"name": "a"})).await;
    assert!(gone.contains("no node named `a`"), "{gone}");
    // `b` is a record: it can be started again by name once a slot is free.
    c.ok("stop", json!({"name": "c"})).await;
    c.ok("start", json!({"name": "b"})).await;
}

#[tokio::test]
async fn stop_interrupts_a_start_and_a_restart_backoff() {
    let server = Server::start();
    let mut c = server.client().await;
    // A start that would wait 60 s for a port nobody opens.
    let addr = server.addr.clone();
    let starting = tokio::spawn(async move {
        let mut c = common::Client::connect(&addr).await;
        c.call(
            "start",
            json!({"name": "slow", "command": ["erl", "-noshell"], "ready": {"port": 9},
                   "start_timeout_ms": 60000}),
        )
        .await
    });
    c.wait_status("slow", Duration::from_secs(30), |n| {
        n["state"] == "starting"
    })
    .await;
    let (stopped, took) = timed(c.ok("stop", json!({"name": "slow"}))).await;
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let start = starting.await.unwrap();
    assert!(text(&start).contains("cancelled"), "{start}");

    // A node that crashes at once restarts after a long backoff; stop wins over it.
    c.call(
        "start",
        json!({"name": "crashy", "command": ["erl", "-noshell"], "backoff_ms": 30000}),
    )
    .await;
    c.eval(
        "crashy",
        "spawn(fun() -> timer:sleep(100), halt(3) end), ok.",
    )
    .await;
    c.wait_state("crashy", "restarting", Duration::from_secs(30))
        .await;
    let stopped = c.ok("stop", json!({"name": "crashy"})).await;
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    // Clock: still stopped a moment later (no pending restart flips it back).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = c.node_status("crashy").await;
    assert_eq!(after["state"], "stopped", "{after}");
}

#[tokio::test]
async fn commands_that_do_not_come_up_as_our_node_fail_fast_with_a_reason() {
    let server = Server::start();
    let mut c = server.client().await;
    let began = Instant::now();
    let renamed = c
        .err(
            "start",
            json!({"name": "renamed", "command": ["erl", "-noshell", "-sname", format!("other{}", std::process::id())]}),
        )
        .await;
    assert!(renamed.contains("started a node named `other"), "{renamed}");
    let not_beam = c
        .err(
            "start",
            json!({"name": "notbeam", "command": ["sleep", "60"]}),
        )
        .await;
    assert!(
        not_beam.contains("no BEAM with the os_sup_mcp helper came up within 10 s"),
        "{not_beam}"
    );
    assert!(
        began.elapsed() < Duration::from_secs(40),
        "both failed well before the 120 s start timeout: {:?}",
        began.elapsed()
    );
    let status = c.node_status("notbeam").await;
    assert_eq!(status["state"], "failed", "{status}");
}

/// Builds a Mix release of the demo fixture (prod) into a temporary directory.
fn build_release(into: &std::path::Path) -> std::path::PathBuf {
    let out = Command::new("mix")
        .args(["release", "--overwrite", "--quiet", "--path"])
        .arg(into)
        .env("MIX_ENV", "prod")
        .current_dir(demo_app())
        .output()
        .expect("mix release");
    assert!(out.status.success(), "mix release failed: {out:?}");
    into.join("bin/demo_app")
}

#[tokio::test]
async fn a_mix_release_starts_evaluates_and_stops() {
    let dir = common::private_dir();
    let bin = build_release(&dir.path().join("rel"));
    let server = Server::start();
    let mut c = server.client().await;
    let started = c
        .ok(
            "start",
            json!({"name": "rel", "command": [bin, "start"], "start_timeout_ms": 60000}),
        )
        .await;
    assert_eq!(started["state"], "running", "{started}");
    let apps = c
        .eval(
            "rel",
            "Application.started_applications() |> Enum.map(&elem(&1, 0))",
        )
        .await;
    assert!(
        apps["value"].as_str().unwrap().contains(":demo_app"),
        "{apps}"
    );
    let mix = c.eval("rel", "Code.ensure_loaded?(Mix)").await;
    assert_eq!(mix["value"], "false", "a release runs without Mix");
    let tree = c.ok("supervision_tree", json!({"name": "rel"})).await;
    assert!(tree.to_string().contains("DemoApp"), "{tree}");
    let node = started["node"].as_str().unwrap().to_string();
    let stopped = c.ok("stop", json!({"name": "rel"})).await;
    assert_eq!(stopped["state"], "stopped");
    assert_eq!(stopped["last_exit"], "exit status 0");
    assert!(
        beams_matching(&node).is_empty(),
        "the release's BEAM is gone"
    );
}

/// A port's program runs in a session of its own (`erl_child_setup` starts it so), out of
/// reach of the node's process group; one that ignores the end of its stdin (`sleep`) would
/// outlive the node. `stop` ends it with the node.
#[tokio::test]
async fn a_port_program_that_ignores_its_stdin_is_ended_with_its_node() {
    let server = Server::start();
    let mut c = server.client().await;
    c.ok(
        "start",
        json!({"name": "p", "command": ["erl", "-noshell"]}),
    )
    .await;
    let value = c
        .ok(
            "eval",
            json!({"name": "p", "lang": "erlang", "code":
                "P = open_port({spawn_executable, \"/bin/sh\"}, [{args, [\"-c\", \"exec sleep 100017\"]}]), \
                 {os_pid, Os} = erlang:port_info(P, os_pid), Os."}),
        )
        .await;
    let os_pid: u32 = value["value"].as_str().unwrap().parse().unwrap();
    let alive = || std::path::Path::new(&format!("/proc/{os_pid}")).exists();
    assert!(alive(), "the port's program runs: {value}");
    c.ok("stop", json!({"name": "p"})).await;
    common::wait_until(
        Duration::from_secs(5),
        "the port's program ended with its node",
        async || alive(),
        |alive| !alive,
    )
    .await;
}
