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

use serde_json::json;
use std::time::{Duration, Instant};

const HEADER: &str = "## Diagnose beside the application";
const WINDOW: Duration = Duration::from_secs(10);

/// The probe: an echo process, and a process that asks it every 2 ms and records
/// `{Seq, Window, LatencyUs}` in its public table `probe`, the window named by
/// `persistent_term` `probe_window` (changed by the bench between windows).
const PROBE: &str = r#"
persistent_term:put(probe_window, idle),
Echo = spawn(fun Echo() -> receive {From, Ref} -> From ! {Ref, ok}, Echo() end end),
Probe = spawn(fun() ->
    Tab = ets:new(probe, [named_table, public, ordered_set]),
    Loop = fun Loop(Seq) ->
        receive after 2 -> ok end,
        T0 = erlang:monotonic_time(microsecond),
        Ref = make_ref(),
        Echo ! {self(), Ref},
        receive {Ref, ok} -> ok end,
        Us = erlang:monotonic_time(microsecond) - T0,
        ets:insert(Tab, {Seq, persistent_term:get(probe_window), Us}),
        Loop(Seq + 1)
    end,
    Loop(0)
end),
register(probe_echo, Echo), register(probe, Probe),
timer:sleep(100), ok.
"#;

/// `p50 p99 max count` of window `W`'s round trips, in µs.
fn window_stats(window: &str) -> String {
    format!(
        "L = lists:sort(ets:select(probe, [{{{{'_', {window}, '$1'}}, [], ['$1']}}])), \
         N = length(L), \
         At = fun(P) -> lists:nth(max(1, min(N, round(P * N))), L) end, \
         lists:flatten(io_lib:format(\"~b ~b ~b ~b\", [At(0.5), At(0.99), lists:last(L), N]))."
    )
}

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
