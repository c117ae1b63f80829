//! The safety matrix (run by `scripts/bench.sh safety`; ignored by `cargo test`): what each read
//! tool costs a node already in trouble. The ailments fixture with `AILMENT=matrix` holds every
//! pathology at once (a 200 MB state under 10,000 casts a second, a 1,000,000-message mailbox,
//! a 10,000,000-row table, a 500 MB binary, 100,000 monitors, a suspended server, a process in
//! a loop, a 5 MB log line; `OS_SUP_BENCH_SCALE` scales them, 1.0 by default). For every call:
//! a second with no call, then the call; the node's peak resident memory (`VmHWM`, reset
//! through `/proc/PID/clear_refs` before the call) over what it held before, and the worst
//! round trip of the node's own echo probe (every 2 ms) in each window. Writes its own section
//! of `scripts/bench_results.md`.

mod common;

use serde_json::{json, Value};
use std::time::{Duration, Instant};

const HEADER: &str = "## Safety matrix";
use common::matrix::NODE;

/// `VmRSS` and `VmHWM` of `pid`, in bytes.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb = |key: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(key)).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    };
    (kb("VmRSS:"), kb("VmHWM:"))
}

/// Resets `VmHWM` of `pid` to its resident memory now.
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}

/// The probe's worst round trip since the last read (µs); resets it.
async fn probe_worst(c: &mut common::Client) -> u64 {
    let v = c
        .eval(NODE, "Ailments.Matrix.probe_worst_us()")
        .await
        .get("value")
        .and_then(Value::as_str)
        .unwrap()
        .trim_matches('"')
        .to_string();
    v.parse().unwrap()
}

/// The line of an answer that says what it left out, if one does.
fn cut_line(answer: &str) -> String {
    const MARKS: [&str; 9] = [
        "not read", "left out", "summar", " more", "cut", "truncat", "of ", "…", "skipped",
    ];
    let Some((line, at)) = answer.lines().find_map(|l| {
        let l = l.trim();
        MARKS
            .iter()
            .filter_map(|m| l.find(m))
            .min()
            .map(|at| (l, at))
    }) else {
        return String::new();
    };
    // The words around the mark, when the line is long (a 5 MB log line cut at its end).
    let from = line[..at]
        .char_indices()
        .rev()
        .nth(60)
        .map_or(0, |(i, _)| i);
    let window = &line[from..];
    let end = window
        .char_indices()
        .nth(110)
        .map_or(window.len(), |(i, _)| i);
    let shown = format!("{}{}", if from > 0 { "…" } else { "" }, &window[..end]);
    shown.replace('|', "\\|")
}

fn mb(bytes: i64) -> String {
    format!("{:+.1} MB", bytes as f64 / 1e6)
}

struct Row {
    label: String,
    bytes: usize,
    took: Duration,
    error: bool,
    rise: i64,
    idle_worst_us: u64,
    call_worst_us: u64,
    cut: String,
}

async fn measure(c: &mut common::Client, pid: u32, label: &str, tool: &str, args: Value) -> Row {
    probe_worst(c).await;
    // Clock: the window with no call that the call's window is set beside.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_worst_us = probe_worst(c).await;
    let (before, _) = memory(pid);
    reset_peak(pid);
    let started = Instant::now();
    let result = c.call(tool, args).await;
    let took = started.elapsed();
    // What the call leaves behind (a tracer still running, a copy not yet collected) counts.
    // Clock: the half second after the call belongs to its window.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, peak) = memory(pid);
    let call_worst_us = probe_worst(c).await;
    let answer = common::text(&result);
    eprintln!(
        "== {label} ({} bytes, {took:?}, {}):\n{}",
        answer.len(),
        mb(peak as i64 - before as i64),
        answer.chars().take(1500).collect::<String>()
    );
    Row {
        label: label.to_string(),
        bytes: answer.len(),
        took,
        error: result["isError"] == json!(true),
        rise: peak as i64 - before as i64,
        idle_worst_us,
        call_worst_us,
        cut: cut_line(&answer),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench.sh safety"]
async fn safety_matrix() {
    let scale: f64 = std::env::var("OS_SUP_BENCH_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    let server = common::Server::start();
    let mut c = server.client().await;
    let booted = Instant::now();
    let pid = common::matrix::start(&mut c, scale).await;
    let boot = booted.elapsed();
    let (held, _) = memory(pid);
    let calls = common::matrix::reads();
    let mut rows = Vec::new();
    let mut status_worst = Duration::ZERO;
    for (label, tool, args) in calls {
        let row = measure(&mut c, pid, label, tool, args).await;
        rows.push(row);
        if tool == "trace" {
            // While the trace runs, status must answer within a second each time.
            let began = Instant::now();
            while began.elapsed() < Duration::from_secs(5) {
                let started = Instant::now();
                c.ok("status", json!({"name": NODE})).await;
                status_worst = status_worst.max(started.elapsed());
                // Clock: paces the status calls through the trace's 5 s.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let results = measure(
                &mut c,
                pid,
                "trace_results of it",
                "trace_results",
                json!({"name": NODE}),
            )
            .await;
            rows.push(results);
        }
    }
    // The baseline of get_state's read in place: the copy sys:get_state makes (what get_state
    // did before), taken by code the agent runs.
    let copy = measure(
        &mut c,
        pid,
        "baseline: sys:get_state of the 200 MB state, copied (eval)",
        "eval",
        json!({"name": NODE, "code": ":sys.get_state(Ailments.Matrix.Catalog).puts"}),
    )
    .await;
    rows.push(copy);
    c.ok("stop", json!({"name": NODE})).await;

    let mut section = format!(
        "{HEADER} (ailments fixture, AILMENT=matrix, scale {scale}; release build, this machine)\n\n\
         One node holds every pathology at once: a GenServer with a {} MB state taking 10,000 \
         casts a second, a GenServer with {} messages queued that it never takes, a table of {} \
         rows, a {} MB binary, {} monitors of one process, a suspended GenServer, a process in a \
         loop, a {} MB log line. It held {} resident after boot ({:.0} s). For each call: one \
         second with no call, then the call (and 0.5 s after it); the node's peak resident \
         memory over what it held just before (`VmHWM` reset through `/proc/PID/clear_refs`), \
         and the worst round trip of the node's own echo probe (every 2 ms; one scheduler of \
         the two is always busy with the loop) in the window with no call and in the call's. \
         Target: +≤ 50 MB (or 10 % of what the node holds), the probe's worst + ≤ 50 ms, each \
         answer within its bound and saying what it left out. While the trace ran, `status` \
         answered in at most {} ms (target: 1 s). Before issue 55's changes (c8d451f, same \
         fixture and scale): `get_state` of the 200 MB state +199.7 MB and an error (the copy \
         overran the request's heap limit), of the 500 MB binary 8,259 bytes of its start with \
         no size; `process_info` of 100 k monitors +43.9 MB, of the process monitored \
         100 k times +22.8 MB.\n\n\
         | call | answer | took | peak memory | probe worst: no call / call | what it says it left out |\n\
         |---|---|---|---|---|---|\n",
        (200.0 * scale).round(),
        (1_000_000.0 * scale).round(),
        (10_000_000.0 * scale).round(),
        (500.0 * scale).round(),
        (100_000.0 * scale).round(),
        (5.0 * scale).round(),
        mb(held as i64).trim_start_matches('+'),
        boot.as_secs_f64(),
        status_worst.as_millis(),
    );
    for r in &rows {
        section += &format!(
            "| {} | {} B{} | {} ms | {} | {:.1} / {:.1} ms | {} |\n",
            r.label,
            r.bytes,
            if r.error { " (error)" } else { "" },
            r.took.as_millis(),
            mb(r.rise),
            r.idle_worst_us as f64 / 1e3,
            r.call_worst_us as f64 / 1e3,
            r.cut
        );
    }
    eprintln!("{section}");
    if std::env::var("OS_SUP_BENCH_WRITE").as_deref() != Ok("0") {
        common::write_bench_section(HEADER, &section);
    }
}
