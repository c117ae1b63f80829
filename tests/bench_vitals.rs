//! Benchmark of the vital-signs sampler (run by `scripts/bench.sh vitals`, ignored by
//! `cargo test`): what one sample costs a node (the helper's `sample/0` timed inside the node,
//! and the whole `vitals` call's round trip from a hidden node, as the sampler makes it), and
//! what sampling 32 nodes costs the server. Two servers run side by side in the same minute,
//! each attached to 32 idle plain `erl` nodes of its own: one samples, the other runs with
//! `OS_SUP_VITALS=off`; the difference in CPU time (server and nodes) is the sampler's.
//! Writes its own section of `scripts/bench_results.md`.

mod common;

use common::erl::ErlNode;
use common::{cpu_time as cpu, wait_until};
use os_sup_mcp::helper::{Client, EvalRequest, Lang, ToolCall};
use serde_json::json;
use std::time::{Duration, Instant};

const HEADER: &str = "## Vital-signs sampler";
const NODES: usize = 32;
const CALLS: usize = 300;
const WINDOW: Duration = Duration::from_secs(60);

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Attaches every node to the server, retrying while a node is still booting.
async fn attach_all(server: &common::Server, nodes: &[ErlNode], prefix: &str) {
    let mut c = server.client().await;
    for (i, node) in nodes.iter().enumerate() {
        let args =
            json!({"name": format!("{prefix}{i}"), "node": node.name, "cookie": node.cookie});
        c.attach(args).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench.sh vitals"]
async fn vitals() {
    // One sample, inside the node and as a call from a hidden node.
    let probe = ErlNode::build("vprobe").helper().start();
    let client = Client::new(probe.name.clone(), &probe.cookie);
    let _ = wait_until(
        Duration::from_secs(30),
        "the probe node's answer",
        async || client.ping(Duration::from_secs(2)).await,
        Result::is_ok,
    )
    .await;
    let mut inside = EvalRequest::new(
        "{T, _} = timer:tc(fun() -> [os_sup_node_vitals:sample() || _ <- lists:seq(1, 1000)] end), T",
    );
    inside.lang = Lang::Erlang;
    let inside_us: f64 = client
        .eval(&inside)
        .await
        .unwrap()
        .unwrap()
        .value
        .parse()
        .unwrap();
    let per_sample_inside = Duration::from_secs_f64(inside_us / 1000.0 / 1e6);
    let mut calls = Vec::with_capacity(CALLS);
    let call = ToolCall::new("vitals").with_timeout(Duration::from_secs(1));
    for _ in 0..CALLS {
        let started = Instant::now();
        client.run_tool(&call).await.unwrap();
        calls.push(started.elapsed());
    }
    calls.sort();
    drop(probe);

    // 32 nodes sampled beside 32 nodes attached but not sampled, in the same minute.
    let sampled = common::Server::start();
    let unsampled = common::Server::start_with_env(&[], &[("OS_SUP_VITALS", "off")]);
    let on: Vec<ErlNode> = (0..NODES)
        .map(|i| ErlNode::build(&format!("von{i}")).start())
        .collect();
    let off: Vec<ErlNode> = (0..NODES)
        .map(|i| ErlNode::build(&format!("voff{i}")).start())
        .collect();
    attach_all(&sampled, &on, "on").await;
    attach_all(&unsampled, &off, "off").await;
    // Clock: the attach work's burst of CPU must end before the measured window starts.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let group_cpu = |nodes: &[ErlNode]| nodes.iter().map(|n| cpu(n.child.id())).sum::<Duration>();
    let before = (
        cpu(sampled.pid()),
        cpu(unsampled.pid()),
        group_cpu(&on),
        group_cpu(&off),
    );
    // Clock: the measured window.
    tokio::time::sleep(WINDOW).await;
    let after = (
        cpu(sampled.pid()),
        cpu(unsampled.pid()),
        group_cpu(&on),
        group_cpu(&off),
    );
    let (rss_on, rss_off) = (rss_kb(sampled.pid()), rss_kb(unsampled.pid()));
    let samples = NODES as f64 * WINDOW.as_secs_f64() / 2.0;
    let share = |d: Duration| format!("{:.2} %", d.as_secs_f64() / WINDOW.as_secs_f64() * 100.0);
    let server_on = after.0 - before.0;
    let server_off = after.1 - before.1;
    let nodes_on = after.2 - before.2;
    let nodes_off = after.3 - before.3;
    let per = |on: Duration, off: Duration| {
        ms(Duration::from_secs_f64(
            (on.as_secs_f64() - off.as_secs_f64()).max(0.0) / samples,
        ))
    };

    let rows = [
        ("`os_sup_node_vitals:sample()` inside the node (1000 runs), each", ms(per_sample_inside), "-".to_string()),
        (
            "the `vitals` call from a hidden node, round trip p50 / p99",
            format!("{} / {}", ms(calls[CALLS / 2]), ms(calls[CALLS * 99 / 100])),
            "-".to_string(),
        ),
        (
            "node CPU per sample (32 sampled nodes minus 32 unsampled, over the minute)",
            per(nodes_on, nodes_off),
            format!("{} vs {} for all 32", share(nodes_on), share(nodes_off)),
        ),
        (
            "server CPU, 32 nodes sampled vs not",
            format!("{} vs {}", share(server_on), share(server_off)),
            format!("{} per sample", per(server_on, server_off)),
        ),
        (
            "server RSS, 32 nodes sampled vs not (a minute of samples here; a full hour adds ~700 KB a node)",
            format!("{:.1} MB vs {:.1} MB", rss_on as f64 / 1024.0, rss_off as f64 / 1024.0),
            "-".to_string(),
        ),
    ];
    let mut section = format!(
        "{HEADER} (one sample every 2 s; {NODES} idle plain `erl` nodes per server, a {} s \
         window, {CALLS} calls; release build)\n\nTwo servers run side by side in the same minute, \
         each attached to {NODES} nodes of its own; one runs with `OS_SUP_VITALS=off`. CPU is \
         user + system time from `/proc` (10 ms ticks). The sample itself is a small part of a \
         node's CPU per sample; the rest is the wake-up, the distribution messages and the \
         helper's worker process (not broken down further).\n\n| measure | value | beside |\n|---|---|---|\n",
        WINDOW.as_secs()
    );
    for (what, value, beside) in rows {
        section += &format!("| {what} | {value} | {beside} |\n");
    }
    println!("{section}");
    common::write_bench_section(HEADER, &section);
}
