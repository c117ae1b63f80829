//! The server's nodes end with it: SIGTERM stops every node before the server exits 0, a
//! SIGKILLed server leaves no BEAM behind, and a node that outlived a killed server (as if
//! wedged) is reaped by the next server on the same state directory. Whatever a test leaves
//! running when it fails, its `reaping` server kills.

mod common;

use common::{alive, beams_matching, kill, wait_no_beams_left, wait_until, Server};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn sigterm_stops_every_node_and_exits() {
    let mut server = Server::start().reaping();
    let tag = server.tag();
    let mut c = server.client().await;
    c.start_demo("term1").await;
    c.start_erl("term2").await;
    assert_eq!(beams_matching(&tag).len(), 2);
    kill(server.pid(), libc::SIGTERM);
    let status = wait_until(
        Duration::from_secs(20),
        "the server's exit after SIGTERM",
        async || server.child.try_wait().unwrap(),
        Option::is_some,
    )
    .await;
    assert!(
        status.is_some_and(|s| s.success()),
        "server exits 0 on SIGTERM"
    );
    assert!(
        beams_matching(&tag).is_empty(),
        "every node stopped before exit"
    );
}

#[tokio::test]
async fn sigkill_of_the_server_leaves_no_beam_behind() {
    let server = Server::start().reaping();
    let tag = server.tag();
    let mut c = server.client().await;
    c.start_demo("orphan1").await;
    c.start_erl("orphan2").await;
    assert_eq!(beams_matching(&tag).len(), 2, "both nodes run");
    kill(server.pid(), libc::SIGKILL);
    wait_no_beams_left(&tag, "the server died").await;
}

#[tokio::test]
async fn the_next_server_reaps_what_a_killed_one_left_behind() {
    let state_dir = common::private_dir();
    let dir = state_dir.path().to_str().unwrap();
    let first = Server::start_with(&["--state-dir", dir]).reaping();
    let mut c = first.client().await;
    let pid = c.start_erl("survivor").await["os_pid"].as_u64().unwrap() as u32;
    // Without its control-pipe watcher the node cannot notice that the server died (as if it
    // were wedged): it survives it.
    let unwatch =
        json!({"name": "survivor", "code": "exit(whereis(os_sup_helper_control), kill), ok"});
    c.ok("eval", unwatch).await;
    kill(first.pid(), libc::SIGKILL);
    // Clock: proof that the node outlives its server: still there 2.5 s later.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(alive(pid), "the stopped node outlived its server");

    let second = Server::start_with(&["--state-dir", dir]);
    wait_until(
        Duration::from_secs(5),
        "the survivor reaped",
        async || alive(pid),
        |alive| !alive,
    )
    .await;
    assert!(!alive(pid), "the survivor was reaped");
    let logged = second.stderr.lock().unwrap().join("\n");
    assert!(logged.contains("reaped `survivor`"), "{logged}");
    drop(second);
    // A clean shutdown leaves no state file behind (the nodes' records and logs stay, for
    // the next server).
    let left: Vec<String> = std::fs::read_dir(state_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".json"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
