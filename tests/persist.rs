//! When the server dies (`kill -9`), nothing is lost: the next server on the same state dir
//! knows its nodes (stopped, with how the server ended), serves their logs from disk, starts
//! one again from its record (`start NAME`) or all that were up (`--resume`); a second server
//! on a dir in use is refused; records it cannot trust are set aside, said so.

mod common;

use common::erl::ErlNode;
use common::{beams_matching, kill, text, wait_no_beams_left, wait_until, Client, Server};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A copy of state dir `from` at `to` (mode 0700, as a state dir must be).
fn copy_dir(from: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o700)).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Each node's status by name, from `status`.
async fn states(c: &mut Client) -> Vec<(String, String, String)> {
    let status = c.ok("status", json!({})).await;
    status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_string(),
                n["state"].as_str().unwrap().to_string(),
                n["last_exit"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

async fn logs(c: &mut Client, name: &str, grep: &str) -> String {
    let page = c
        .call("logs", json!({"name": name, "grep": grep, "tail": 5}))
        .await;
    text(&page)
}

/// Waits until `server` has exited (it was killed).
async fn wait_gone(server: &mut Server) {
    wait_until(
        Duration::from_secs(10),
        "the killed server's exit",
        async || server.child.try_wait().unwrap(),
        Option::is_some,
    )
    .await;
}

#[tokio::test]
async fn a_killed_servers_nodes_are_known_logged_and_started_again_by_the_next() {
    let state = common::private_dir();
    let dir = state.path().to_str().unwrap().to_string();
    let mut first = Server::start_with(&["--state-dir", &dir]).reaping();
    let tag = first.tag();
    let mut c = first.client().await;
    c.start_demo("web").await;
    c.start_erl("plain").await;
    c.eval(
        "web",
        "require Logger; Logger.error(\"persist test: the error before the crash\"); :ok",
    )
    .await;
    // `plain` writes to its stdout without a pause: the server is killed while it writes.
    let ticking = json!({"name": "plain", "lang": "erlang", "code":
        "spawn(fun() -> group_leader(whereis(user), self()), \
         (fun L(N) -> io:format(\"tick ~p~n\", [N]), L(N + 1) end)(0) end), ok"});
    c.ok("eval", ticking).await;
    wait_until(
        Duration::from_secs(20),
        "the error and the ticks in the logs",
        async || {
            (
                logs(&mut c, "web", "persist test").await,
                logs(&mut c, "plain", "tick").await,
            )
        },
        |(error, ticks)| error.contains("the error before the crash") && ticks.contains("tick 1"),
    )
    .await;
    // Ticks reach the disk within the flusher's period: once some are there, the server is
    // killed while it writes more.
    let on_disk = state.path().join("logs/plain.log");
    wait_until(
        Duration::from_secs(10),
        "ticks on disk",
        async || std::fs::metadata(&on_disk).map_or(0, |m| m.len()),
        |bytes| *bytes > 0,
    )
    .await;
    kill(first.pid(), libc::SIGKILL);
    wait_gone(&mut first).await;
    wait_no_beams_left(&tag, "the server was killed").await;
    let resumed_dir = common::private_dir();
    copy_dir(state.path(), resumed_dir.path());

    let second = Server::start_with(&["--state-dir", &dir]).reaping();
    let mut c = second.client().await;
    let known = states(&mut c).await;
    assert_eq!(known.len(), 2, "{known:?}");
    for (name, state, last_exit) in &known {
        assert_eq!(state, "stopped", "{name}: {known:?}");
        assert!(
            last_exit.contains("the server that ran it ended at") && last_exit.contains("killed"),
            "{name}: {last_exit}"
        );
    }
    let error = logs(&mut c, "web", "persist test").await;
    assert!(error.contains("the error before the crash"), "{error}");
    let ticks = logs(&mut c, "plain", "tick").await;
    assert!(
        ticks.contains("tick "),
        "the lines written as it died: {ticks}"
    );

    // A third server on the same dir is refused, naming the one that holds it.
    let refused = Command::new(env!("CARGO_BIN_EXE_os_sup_mcp"))
        .args(["--listen", "127.0.0.1:0", "--state-dir", &dir])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{why}");
    assert!(
        why.contains(&format!("pid {}", second.pid())) && why.contains("--state-dir"),
        "{why}"
    );

    // `start NAME` starts it again from its record.
    let started = c.ok("start", json!({"name": "web"})).await;
    assert_eq!(started["state"], "running", "{started}");
    assert_eq!(c.eval("web", "1 + 1").await["value"], "2");
    c.ok("stop", json!({"name": "web"})).await;
    // `remove` forgets it, record and logs.
    c.ok("remove", json!({"name": "web"})).await;
    assert!(!state.path().join("nodes/web.json").exists());
    assert!(!state.path().join("logs/web.errors.log").exists());
    drop(second);

    // On the copy made as the first server died, `--resume` starts both again.
    let resumed_path = resumed_dir.path().to_str().unwrap();
    let third = Server::start_with(&["--state-dir", resumed_path, "--resume"]).reaping();
    let mut c = third.client().await;
    for name in ["web", "plain"] {
        c.wait_state(name, "running", Duration::from_secs(60)).await;
    }
    assert_eq!(beams_matching(&third.tag()).len(), 2);
    let error = logs(&mut c, "web", "persist test").await;
    assert!(error.contains("the error before the crash"), "{error}");
}

#[tokio::test]
async fn records_it_cannot_trust_are_set_aside_and_said_so() {
    let state = common::private_dir();
    let dir = state.path().to_str().unwrap().to_string();
    let first = Server::start_with(&["--state-dir", &dir]);
    let mut c = first.client().await;
    c.start_erl("good").await;
    drop(c);
    drop(first);
    let nodes = state.path().join("nodes");
    let good = std::fs::read_to_string(nodes.join("good.json")).unwrap();
    std::fs::write(nodes.join("cut.json"), &good[..good.len() / 2]).unwrap();
    std::fs::write(nodes.join("junk.json"), "name = \"edited by hand\"\n").unwrap();

    let second = Server::start_with(&["--state-dir", &dir]);
    let cut = second.log_line("cut.json");
    assert!(
        cut.contains("set aside") && cut.contains("truncated"),
        "{cut}"
    );
    let junk = second.log_line("junk.json");
    assert!(
        junk.contains("set aside") && junk.contains("not a node record"),
        "{junk}"
    );
    let mut c = second.client().await;
    let known: Vec<String> = states(&mut c).await.into_iter().map(|(n, ..)| n).collect();
    assert_eq!(known, ["good"]);
    let left: Vec<String> = std::fs::read_dir(&nodes)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    for name in ["cut", "junk"] {
        assert!(
            left.iter()
                .any(|f| f.starts_with(&format!("{name}.json.set-aside-"))),
            "{left:?}"
        );
    }
    let status: Value = c.ok("status", json!({"name": "good"})).await;
    assert_eq!(status["nodes"][0]["state"], "stopped");
}

/// `status` of cluster `c` until its three members run and see each other.
async fn wait_connected(c: &mut Client) -> Value {
    wait_until(
        Duration::from_secs(60),
        "cluster c running and connected",
        async || c.ok("status", json!({"name": "c"})).await,
        |status| {
            status["cluster"]["fully_connected"] == true
                && status["nodes"].as_array().unwrap().len() == 3
                && status["nodes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|n| n["state"] == "running")
        },
    )
    .await
}

#[tokio::test]
async fn a_killed_servers_cluster_comes_back_whole() {
    let state = common::private_dir();
    let dir = state.path().to_str().unwrap().to_string();
    let mut first = Server::start_with(&["--state-dir", &dir]).reaping();
    let tag = first.tag();
    let mut c = first.client().await;
    let started = c
        .ok(
            "start",
            json!({"name": "c", "path": common::cluster_app(), "nodes": 3}),
        )
        .await;
    assert_eq!(started["view"]["fully_connected"], true, "{started}");
    kill(first.pid(), libc::SIGKILL);
    wait_gone(&mut first).await;
    wait_no_beams_left(&tag, "the server was killed").await;

    // Known again, stopped, as a cluster: `start c` starts its members, connected.
    let mut second = Server::start_with(&["--state-dir", &dir]).reaping();
    let tag = second.tag();
    let mut c = second.client().await;
    let known = states(&mut c).await;
    let names: Vec<&str> = known.iter().map(|(n, ..)| n.as_str()).collect();
    assert_eq!(names, ["c-1", "c-2", "c-3"]);
    assert!(
        known.iter().all(|(_, state, _)| state == "stopped"),
        "{known:?}"
    );
    let again = c.ok("start", json!({"name": "c"})).await;
    assert_eq!(again["view"]["fully_connected"], true, "{again}");
    let index = c.eval("c-2", "System.get_env(\"OS_SUP_NODE_INDEX\")").await;
    assert_eq!(index["value"], "\"2\"");
    kill(second.pid(), libc::SIGKILL);
    wait_gone(&mut second).await;
    wait_no_beams_left(&tag, "the server was killed").await;

    // `--resume` starts the whole cluster again.
    let third = Server::start_with(&["--state-dir", &dir, "--resume"]).reaping();
    let mut c = third.client().await;
    wait_connected(&mut c).await;
    let pg = c.eval("c-1", "length(:pg.get_members(:workers))").await;
    assert_eq!(
        pg["value"], "3",
        "the members joined each other's :pg group"
    );
}

#[tokio::test]
async fn a_node_attached_by_a_killed_server_is_listed_detached_without_its_cookie() {
    let state = common::private_dir();
    let dir = state.path().to_str().unwrap().to_string();
    let peer = ErlNode::build("persist_peer").start();
    let mut first = Server::start_with(&["--state-dir", &dir]).reaping();
    let mut c = first.client().await;
    c.attach(json!({"name": "peer", "node": peer.name, "cookie": peer.cookie}))
        .await;
    let record = std::fs::read_to_string(state.path().join("nodes/peer.attached.json")).unwrap();
    assert!(record.contains(&peer.name), "{record}");
    assert!(!record.contains(&peer.cookie), "never the cookie: {record}");
    kill(first.pid(), libc::SIGKILL);
    wait_gone(&mut first).await;

    let second = Server::start_with(&["--state-dir", &dir]).reaping();
    let mut c = second.client().await;
    let known = states(&mut c).await;
    assert_eq!(known.len(), 1, "{known:?}");
    let (name, state_now, why) = &known[0];
    assert_eq!((name.as_str(), state_now.as_str()), ("peer", "detached"));
    assert!(
        why.contains("killed") && why.contains("`attach` it again"),
        "{why}"
    );
    let refused = c.err("eval", json!({"name": "peer", "code": "1"})).await;
    assert!(refused.contains("`attach` it again"), "{refused}");
    // Attached again, it is attached; removed, it is forgotten.
    c.attach(json!({"name": "peer", "node": peer.name, "cookie": peer.cookie}))
        .await;
    assert_eq!(c.node_status("peer").await["state"], "attached");
    c.ok("remove", json!({"name": "peer"})).await;
    assert!(!state.path().join("nodes/peer.attached.json").exists());
}

/// A server that cannot start (here: `--project` names no directory) tells the next one so,
/// not that it was killed.
#[test]
fn a_server_that_could_not_start_says_so_to_the_next() {
    let state = common::private_dir();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_os_sup_mcp"))
        .args(["--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state.path())
        .args(["--project", "/nonexistent/os_sup_app"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let lock = std::fs::read_to_string(state.path().join("server.lock")).unwrap();
    assert!(
        lock.contains("exited 1 as it started") && lock.contains("--project"),
        "{lock}"
    );
}
