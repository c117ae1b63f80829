//! Chaos: children SIGKILLed again and again, a frozen (SIGSTOPped) child, the server itself
//! SIGKILLed, and `epmd` killed under running nodes. The supervisor follows its policy (and
//! `diagnose` of the failed node is its post-mortem), frozen nodes time out clearly without
//! slowing the others, nothing is left behind, and nothing hangs.

mod common;
mod hardening;

use common::{
    alive, beams_matching, demo_app, kill, text, wait_no_beams_left, wait_until, Client, Server,
};
use hardening::Resume;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

async fn bounded<T>(what: &str, limit: Duration, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {limit:?}"))
}

async fn start_erl(c: &mut Client, name: &str) -> u32 {
    let status = c.start_erl(name).await;
    status["os_pid"].as_u64().expect("os_pid") as u32
}

#[tokio::test]
async fn ten_sigkills_follow_the_restart_policy_then_failed() {
    let server = Server::start().reaping();
    let mut c = server.client().await;
    let status = c
        .ok("start", json!({"name": "victim", "path": demo_app(), "max_restarts": 3, "restart_period_ms": 60000}))
        .await;
    let mut pid = status["os_pid"].as_u64().unwrap();
    let mut delivered = 0;
    let mut restarted_after = Vec::new();
    for attempt in 0..10 {
        let node = c.node_status("victim").await;
        if node["state"] != "running" {
            assert_eq!(node["state"], "failed", "attempt {attempt}: {node}");
            continue;
        }
        kill(pid as u32, libc::SIGKILL);
        delivered += 1;
        let killed_at = Instant::now();
        let node = c
            .wait_status("victim", Duration::from_secs(60), |n| {
                (n["state"] == "running" && n["os_pid"].as_u64() != Some(pid))
                    || n["state"] == "failed"
            })
            .await;
        if node["state"] == "running" {
            restarted_after.push(killed_at.elapsed());
            assert_eq!(node["restarts"], delivered, "{node}");
            assert!(
                node["last_exit"].as_str().unwrap_or("").contains("SIGKILL"),
                "{node}"
            );
            pid = node["os_pid"].as_u64().unwrap();
        } else {
            assert_eq!(node["state"], "failed", "{node}");
        }
    }
    let node = c.node_status("victim").await;
    assert_eq!(
        delivered, 4,
        "3 restarts, then the 4th crash is final: {node}"
    );
    assert_eq!(node["state"], "failed", "{node}");
    assert_eq!(node["restarts"], 3, "{node}");
    assert!(node["os_pid"].is_null(), "{node}");
    let failure = node["failure"].as_str().unwrap_or("");
    assert!(
        failure.contains("restart limit") && failure.contains("SIGKILL"),
        "{node}"
    );
    assert!(!alive(pid as u32));
    // Clock: nothing restarts it behind our back, for a second at least.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(c.node_status("victim").await["state"], "failed");
    let err = c.err("eval", json!({"name": "victim", "code": "1"})).await;
    assert!(
        err.contains("not running") || err.contains("failed"),
        "{err}"
    );
    // `diagnose` answers with the post-mortem: the end the server kept, and its logs next.
    let diagnosed = c.call("diagnose", json!({"name": "victim"})).await;
    let answer = text(&diagnosed);
    assert_ne!(diagnosed["isError"], json!(true), "{answer}");
    let report = &diagnosed["structuredContent"];
    assert_eq!(report["findings"][0]["kind"], "node_down", "{answer}");
    assert_eq!(report["findings"][0]["next"]["tool"], "logs", "{answer}");
    assert_eq!(report["healthy"], false, "{answer}");
    assert!(
        answer
            .contains("node down: its restarts ran out (3 since it was started); its last exit: ")
            && answer.contains("SIGKILL"),
        "{answer}"
    );
    eprintln!(
        "chaos: 4 SIGKILLs delivered, restarted after {restarted_after:?}, then failed: {failure}"
    );
}

#[tokio::test]
async fn a_frozen_child_times_out_while_another_answers() {
    let server = Server::start().reaping();
    let mut c = server.client().await;
    let frozen = c.start_demo("frozen").await["os_pid"].as_u64().unwrap() as u32;
    start_erl(&mut c, "other").await;
    assert_eq!(c.eval("frozen", "1 + 1").await["value"], "2");

    kill(frozen, libc::SIGSTOP);
    let _resume = Resume(frozen);
    let mut frozen_client = server.client().await;
    let eval = tokio::spawn(async move {
        let started = Instant::now();
        let r = frozen_client
            .call(
                "eval",
                json!({"name": "frozen", "code": "1 + 1", "timeout_ms": 2000}),
            )
            .await;
        let s = frozen_client
            .call("status", json!({"name": "frozen"}))
            .await;
        (r, s, started.elapsed())
    });
    // The other node is not slowed down.
    for _ in 0..5 {
        let started = Instant::now();
        assert_eq!(c.eval("other", "1 + 1").await["value"], "2");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
    let (eval_result, status_result, took) =
        bounded("frozen eval + status", Duration::from_secs(25), eval)
            .await
            .unwrap();
    eprintln!("frozen: eval {eval_result} status {status_result} in {took:?}");
    assert_eq!(eval_result["isError"], json!(true), "{eval_result}");
    let msg = text(&eval_result).to_lowercase();
    assert!(
        msg.contains("timed out") || msg.contains("timeout") || msg.contains("no reply"),
        "{msg}"
    );
    // `status` of the frozen node: an error or a status that says the node does not answer.
    let status_text = text(&status_result).to_lowercase();
    assert!(
        status_result["isError"] == json!(true)
            || status_result["structuredContent"]["info"].is_null(),
        "{status_result}"
    );
    assert!(!status_text.is_empty());
    assert!(took < Duration::from_secs(20), "frozen calls took {took:?}");

    kill(frozen, libc::SIGCONT);
    let answered = bounded("eval after SIGCONT", Duration::from_secs(40), async {
        loop {
            let r = c
                .call("eval", json!({"name": "frozen", "code": "1 + 1"}))
                .await;
            if text(&r) == "2" {
                return r;
            }
            // Clock: paces this poll; `bounded` above bounds it.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert_eq!(answered["structuredContent"]["value"], "2");
    assert_eq!(c.node_status("frozen").await["state"], "running");
}

#[tokio::test]
async fn sigkill_of_the_server_with_three_children_leaves_no_beam() {
    let mut server = Server::start().reaping();
    let tag = server.tag();
    let mut c = server.client().await;
    c.start_demo("k1").await;
    start_erl(&mut c, "k2").await;
    start_erl(&mut c, "k3").await;
    assert_eq!(beams_matching(&tag).len(), 3, "three nodes run");
    kill(server.pid(), libc::SIGKILL);
    let _ = server.child.wait();
    wait_no_beams_left(&tag, "the server was SIGKILLed").await;
}

/// Pids of `epmd` processes started with `ERL_EPMD_PORT=port` in their environment.
fn epmds_on(port: u16) -> Vec<u32> {
    let needle = format!("ERL_EPMD_PORT={port}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            cmd.split(|b| *b == 0)
                .next()
                .is_some_and(|argv0| argv0 == b"epmd" || argv0.ends_with(b"/epmd"))
                && env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes())
                && alive(*pid)
        })
        .collect()
}

/// Kills the private epmd of a test when dropped.
struct EpmdGuard(u16);

impl Drop for EpmdGuard {
    fn drop(&mut self) {
        for pid in epmds_on(self.0) {
            kill(pid, libc::SIGKILL);
        }
    }
}

#[tokio::test]
async fn killing_epmd_keeps_nodes_answering_and_new_starts_clear() {
    // A private epmd port, so the machine's own epmd and other tests are not touched.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let port_s = port.to_string();
    let _epmd = EpmdGuard(port);
    let server = Server::start_with_env(&[], &[("ERL_EPMD_PORT", port_s.as_str())]).reaping();
    let mut c = server.client().await;
    c.start_demo("e1").await;
    start_erl(&mut c, "e2").await;
    let epmds = epmds_on(port);
    assert!(
        !epmds.is_empty(),
        "the children started an epmd on port {port}"
    );
    let ps = std::process::Command::new("ps")
        .args(["-o", "pid,ppid,stat,args", "-p"])
        .arg(
            epmds
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(","),
        )
        .output()
        .unwrap();
    eprintln!(
        "epmd processes on port {port}:\n{}",
        String::from_utf8_lossy(&ps.stdout)
    );
    for pid in &epmds {
        kill(*pid, libc::SIGKILL);
    }
    wait_until(
        Duration::from_secs(5),
        "epmd is dead",
        async || epmds_on(port),
        Vec::is_empty,
    )
    .await;
    assert!(epmds_on(port).is_empty(), "epmd is dead");

    // Existing connections keep working.
    for name in ["e1", "e2"] {
        let r = bounded(
            "eval after epmd died",
            Duration::from_secs(20),
            c.call(
                "eval",
                json!({"name": name, "code": "1 + 1", "lang": "erlang"}),
            ),
        )
        .await;
        assert_eq!(text(&r), "2", "{name}: {r}");
        let s = bounded(
            "status after epmd died",
            Duration::from_secs(20),
            c.node_status(name),
        )
        .await;
        assert_eq!(s["state"], "running", "{s}");
    }
    // A new start recovers (its BEAM starts a new epmd) or fails clearly; no hang.
    let r: Value = bounded(
        "start after epmd died",
        Duration::from_secs(90),
        c.call(
            "start",
            json!({"name": "e3", "command": ["erl", "-noshell"], "start_timeout_ms": 30000}),
        ),
    )
    .await;
    eprintln!("start after epmd died: {}", text(&r));
    if r["isError"] == json!(true) {
        assert!(!text(&r).is_empty());
    } else {
        assert_eq!(c.eval("e3", "1 + 1").await["value"], "2");
    }
    // The old nodes still answer after the new start.
    assert_eq!(
        text(&c.call("eval", json!({"name": "e1", "code": "1 + 1"})).await),
        "2"
    );
}
