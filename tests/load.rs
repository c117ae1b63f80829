//! Load: 50 concurrent TCP sessions × 200 mixed calls (`status`, `eval`, `supervision_tree`)
//! against one fixture node. Every call is answered correctly, and the server's RSS and open
//! file descriptors come back near their baseline once the sessions close.

mod common;
mod hardening;

use common::{wait_until, Client, Server};
use hardening::{fd_count, rss_kb};
use serde_json::json;
use std::time::{Duration, Instant};

const NODE: &str = "load";
const SESSIONS: usize = 50;
const CALLS: usize = 200;

/// One mixed call, checked; returns its latency.
async fn mixed_call(c: &mut Client, session: usize, i: usize) -> Duration {
    let started = Instant::now();
    match i % 3 {
        0 => {
            let status = c.ok("status", json!({"name": NODE})).await;
            assert_eq!(status["nodes"][0]["state"], "running", "{status}");
        }
        1 => {
            let (a, b) = (session * 1000 + i, i * 7);
            let out = c.eval(NODE, &format!("{a} + {b}")).await;
            assert_eq!(out["value"], (a + b).to_string(), "{out}");
        }
        _ => {
            let tree = c
                .ok(
                    "supervision_tree",
                    json!({"name": NODE, "root": "DemoApp.Supervisor", "depth": 1}),
                )
                .await;
            assert_eq!(tree["roots"][0]["name"], "DemoApp.Supervisor", "{tree}");
            assert!(
                tree["roots"][0]["children"].as_array().unwrap().len() >= 4,
                "{tree}"
            );
        }
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_sessions_times_two_hundred_calls() {
    // Every session may have an eval in flight at once: raise the per-node eval cap (8 by
    // default; tests/security.rs checks the refusal) to the number of sessions.
    let server = Server::start_with(&["--max-evals", &SESSIONS.to_string()]).reaping();
    let pid = server.pid();
    let fds_in_warm_up = {
        let mut c = server.client().await;
        c.start_demo(NODE).await;
        // Warm up every path once, so the baseline includes lazily built state.
        let mut warm = vec![c];
        for session in 0..3 {
            let mut w = server.client().await;
            for i in 0..3 {
                mixed_call(&mut w, session, i).await;
            }
            warm.push(w);
        }
        fd_count(pid)
    };
    // The baseline has none of the warm-up's four sessions: their sockets are closed.
    wait_until(
        Duration::from_secs(10),
        "the warm-up sessions closed",
        async || fd_count(pid),
        |fds| fds + 4 <= fds_in_warm_up,
    )
    .await;
    let (rss_before, fds_before) = (rss_kb(pid), fd_count(pid));

    let started = Instant::now();
    let sessions: Vec<_> = (0..SESSIONS)
        .map(|s| {
            let addr = server.addr.clone();
            tokio::spawn(async move {
                let mut c = Client::connect(&addr).await;
                let mut latencies = Vec::with_capacity(CALLS);
                for i in 0..CALLS {
                    latencies.push(mixed_call(&mut c, s, i).await);
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(SESSIONS * CALLS);
    let mut peak_fds = 0;
    let mut peak_rss = 0;
    for s in sessions {
        peak_fds = peak_fds.max(fd_count(pid));
        peak_rss = peak_rss.max(rss_kb(pid));
        latencies.extend(
            tokio::time::timeout(Duration::from_secs(120), s)
                .await
                .expect("every session finishes within 120 s")
                .expect("session"),
        );
    }
    let took = started.elapsed();
    assert_eq!(latencies.len(), SESSIONS * CALLS);
    latencies.sort();
    let p50 = latencies[latencies.len() / 2];
    let p99 = latencies[latencies.len() * 99 / 100];
    let max = *latencies.last().unwrap();

    // Sessions are closed (dropped); give the server a moment to release them.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut rss_after, mut fds_after) = (rss_kb(pid), fd_count(pid));
    while (fds_after > fds_before + 5 || rss_after > rss_before + 20 * 1024)
        && Instant::now() < deadline
    {
        // Clock: paces this poll; the deadline above bounds it.
        tokio::time::sleep(Duration::from_millis(200)).await;
        (rss_after, fds_after) = (rss_kb(pid), fd_count(pid));
    }
    eprintln!(
        "load: {} calls in {took:?} ({:.0}/s), p50 {p50:?} p99 {p99:?} max {max:?}; \
         RSS {rss_before} kB -> peak {peak_rss} kB -> {rss_after} kB; fds {fds_before} -> peak {peak_fds} -> {fds_after}",
        latencies.len(),
        latencies.len() as f64 / took.as_secs_f64()
    );
    assert!(
        fds_after <= fds_before + 5,
        "fds {fds_before} -> {fds_after}"
    );
    assert!(
        rss_after <= rss_before + 20 * 1024,
        "RSS {rss_before} kB -> {rss_after} kB"
    );
    // Still serving.
    let mut c = server.client().await;
    assert_eq!(c.eval(NODE, "1 + 1").await["value"], "2");
}
