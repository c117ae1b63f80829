//! Benchmark of a 20-node local cluster of the cluster fixture (run by `scripts/bench.sh
//! cluster`, ignored by `cargo test`): `start` with `nodes: 20` (until all run and see each
//! other) beside 20 single `start`s of the same project one after another, in the same run;
//! then `diagnose`, `processes` and `logs` asked of all 20 members at once: time and answer
//! bytes. Writes its own section of `scripts/bench_results.md`.

mod common;

use serde_json::json;
use std::time::{Duration, Instant};

const HEADER: &str = "## A 20-node cluster";
const NODES: usize = 20;

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench.sh cluster"]
async fn cluster() {
    let server = common::Server::start();
    let mut c = server.client().await;
    let path = common::cluster_app();

    // 20 single starts, one after another, each stopped and removed after.
    let started = Instant::now();
    for i in 1..=NODES {
        c.ok("start", json!({"name": format!("s{i}"), "path": path}))
            .await;
    }
    let singles = started.elapsed();
    for i in 1..=NODES {
        c.ok("stop", json!({"name": format!("s{i}")})).await;
        c.ok("remove", json!({"name": format!("s{i}")})).await;
    }

    let started = Instant::now();
    let cluster = c
        .ok("start", json!({"name": "c", "path": path, "nodes": NODES}))
        .await;
    let whole = started.elapsed();
    assert_eq!(cluster["view"]["fully_connected"], true, "{cluster}");

    let mut rows = vec![
        (
            format!("`start` with `nodes: {NODES}` (all running and fully connected)"),
            secs(whole),
        ),
        (
            format!("{NODES} single `start`s, one after another"),
            secs(singles),
        ),
    ];
    let mut sample = String::new();
    for (tool, args) in [
        ("diagnose", json!({"name": "c"})),
        ("processes", json!({"name": "c", "limit": 3})),
        ("logs", json!({"name": "c", "tail": 50})),
        ("status", json!({"name": "c"})),
        (
            "eval",
            json!({"name": "c", "all": true, "code": "length(Process.list())"}),
        ),
    ] {
        let started = Instant::now();
        let result = c.call(tool, args).await;
        let took = started.elapsed();
        assert_ne!(result["isError"], true, "{result}");
        let text = common::text(&result);
        let data = result["structuredContent"].to_string();
        if tool != "status" {
            assert!(
                text.starts_with(&format!("{tool} on cluster c: {NODES} of {NODES}")),
                "{text}"
            );
        }
        // Within one node's caps: 2 KB for `diagnose`, 16 KB of text (plus a cut marker).
        let cap = if tool == "diagnose" { 2048 } else { 17 * 1024 };
        assert!(text.len() <= cap, "{tool}: {} bytes:\n{text}", text.len());
        rows.push((
            format!("`{tool}` of all {NODES} members: time, text bytes, data bytes"),
            format!(
                "{:.0} ms, {} B, {} B",
                took.as_secs_f64() * 1e3,
                text.len(),
                data.len()
            ),
        ));
        if tool == "diagnose" {
            sample = text;
        }
    }
    let mut section = format!(
        "{HEADER} (cluster fixture, {NODES} members on this 2-core machine; release build)\n\n\
         Every member is a `mix run` of the fixture (`:pg` and `:global`): the first starts \
         alone (a Mix project compiles once), the others at once; `start` answers when all \
         run and every member sees the other {}. `eval` is asked of all members with \
         `all: true`.\n\n| measure | value |\n|---|---|\n",
        NODES - 1
    );
    for (what, value) in rows {
        section += &format!("| {what} | {value} |\n");
    }
    section += &format!(
        "\n`diagnose` of the cluster:\n\n```\n{}\n```\n",
        sample.trim()
    );
    println!("{section}");
    common::write_bench_section(HEADER, &section);
    c.ok("stop", json!({"name": "c"})).await;
}
