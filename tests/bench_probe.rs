//! Benchmark of what `diagnose` costs the application on a production-size node (run by
//! `scripts/bench.sh probe`; ignored by `cargo test`). A plain `erl +P 2000000` node started by
//! the server holds idle processes; inside it a probe process makes a request/response round
//! trip with an echo process every 2 ms, recording each latency in a table it writes into (a
//! table that grows: something for `diagnose` to find). Window A: 10 s with no tool call;
//! window B: 10 s of `diagnose` (1 s window) called back to back; in the same run, at 100 000
//! and 1 000 000 processes. Before the probe starts, the bare node of idle processes is
//! diagnosed a minute after they were spawned: no finding is expected (their spawning is a
//! past step). Writes its own section of `scripts/bench_results.md`.

mod common;

use common::probe::{window_stats, PROBE};
use serde_json::json;
use std::time::{Duration, Instant};

const HEADER: &str = "## Diagnose beside the application";
const WINDOW: Duration = Duration::from_secs(10);

struct Stats {
    p50: u64,
    p99: u64,
    max: u64,
    rounds: u64,
}

fn parse_stats(value: &serde_json::Value) -> Stats {
    let text = value["value"]
        .as_str()
        .unwrap()
        .trim_matches('"')
        .to_string();
    let n: Vec<u64> = text.split(' ').map(|v| v.parse().unwrap()).collect();
    Stats {
        p50: n[0],
        p99: n[1],
        max: n[2],
        rounds: n[3],
    }
}

async fn erl(c: &mut common::Client, code: &str) -> serde_json::Value {
    c.ok(
        "eval",
        json!({"name": "probe", "code": code, "lang": "erlang", "timeout_ms": 60_000}),
    )
    .await
}

struct Run {
    processes: u32,
    bare: String,
    idle: Stats,
    during: Stats,
    answers: Vec<Duration>,
    failures: Vec<String>,
    first: String,
    /// Where each answer's time went on the node (`figures.steps_ms`).
    steps: Vec<String>,
}

async fn run(server: &common::Server, idle: u32) -> Run {
    let mut c = server.client().await;
    c.ok(
        "start",
        json!({"name": "probe", "command": ["erl", "-noshell", "+P", "2000000"]}),
    )
    .await;
    erl(
        &mut c,
        &format!(
            "Pids = [spawn(fun() -> receive never -> ok end end) || _ <- lists:seq(1, {idle})], \
             length(Pids)."
        ),
    )
    .await;
    // Clock: the bare node of idle processes is asked a minute after their spawning.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let bare = c
        .call("diagnose", json!({"name": "probe", "window_ms": 1000}))
        .await;
    let bare = common::text(&bare).lines().next().unwrap_or("").to_string();

    erl(&mut c, PROBE).await;
    // Window A: no tool call.
    erl(&mut c, "persistent_term:put(probe_window, a), ok.").await;
    // Clock: window A is ten seconds of the probe with no tool call.
    tokio::time::sleep(WINDOW).await;
    // Window B: diagnose back to back.
    erl(&mut c, "persistent_term:put(probe_window, b), ok.").await;
    let (mut answers, mut failures, mut first) = (Vec::new(), Vec::new(), String::new());
    let mut steps = Vec::new();
    let began = Instant::now();
    while began.elapsed() < WINDOW {
        let started = Instant::now();
        let result = c
            .call("diagnose", json!({"name": "probe", "window_ms": 1000}))
            .await;
        answers.push(started.elapsed());
        let text = common::text(&result);
        steps.push(result["structuredContent"]["figures"]["steps_ms"].to_string());
        if result["isError"] == json!(true) {
            failures.push(text.lines().next().unwrap_or("").to_string());
        } else if first.is_empty() {
            // The verdict's line, or the first finding's (after the count's line).
            let mut lines = text.lines();
            first = match lines.next() {
                Some(l) if l.ends_with("most urgent first:") => lines.next().unwrap_or(l),
                Some(l) => l,
                None => "",
            }
            .to_string();
        }
    }
    erl(&mut c, "persistent_term:put(probe_window, done), ok.").await;
    let idle_stats = parse_stats(&erl(&mut c, &window_stats("a")).await);
    let during = parse_stats(&erl(&mut c, &window_stats("b")).await);
    c.ok("stop", json!({"name": "probe"})).await;
    answers.sort();
    Run {
        processes: idle,
        bare,
        idle: idle_stats,
        during,
        answers,
        failures,
        first,
        steps,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench.sh probe"]
async fn probe() {
    let server = common::Server::start();
    let mut section = format!(
        "{HEADER} (release build, this machine)\n\nA plain `erl +P 2000000` node started by the \
         server holds idle processes; a probe process in it makes a round trip with an echo \
         process every 2 ms and records each latency in a table it writes into. Window A: \
         {}s with no tool call; window B: {}s of `diagnose` (1 s window) back to back, in the \
         same run. Targets: every `diagnose` answers in ≤ 2 s; the probe's p99 in B ≤ 2× A's, \
         no round trip over 5 ms.\n\n\
         | processes | round trip A: p50 / p99 / max (rounds) | B: p50 / p99 / max (rounds) | \
         `diagnose` answers: p50 / max (count, failed) |\n|---|---|---|---|\n",
        WINDOW.as_secs(),
        WINDOW.as_secs()
    );
    let mut notes = String::new();
    let only: Option<u32> = std::env::var("OS_SUP_BENCH_PROCESSES")
        .ok()
        .and_then(|v| v.parse().ok());
    for idle in [100_000, 1_000_000] {
        if only.is_some_and(|n| n != idle) {
            continue;
        }
        let r = run(&server, idle).await;
        let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1e3);
        let stats = |s: &Stats| format!("{} / {} / {} µs ({})", s.p50, s.p99, s.max, s.rounds);
        section += &format!(
            "| {} | {} | {} | {} / {} ({}, {} failed) |\n",
            r.processes,
            stats(&r.idle),
            stats(&r.during),
            ms(r.answers[r.answers.len() / 2]),
            ms(*r.answers.last().unwrap()),
            r.answers.len(),
            r.failures.len(),
        );
        notes += &format!(
            "\n{} processes: the bare node a minute after their spawning: `{}`; with the probe, \
             the first answer: `{}`; each answer's time on the node (ms): {}{}\n",
            r.processes,
            r.bare,
            r.first,
            r.steps.join(", "),
            r.failures
                .first()
                .map(|f| format!("; a failure: `{f}`"))
                .unwrap_or_default()
        );
    }
    section += &notes;
    println!("{section}");
    common::write_bench_section(HEADER, &section);
}
