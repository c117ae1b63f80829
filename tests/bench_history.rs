//! Benchmark of what the helper's always-on watchers cost a node (run by `scripts/bench.sh
//! history`; ignored by `cargo test`): the history keeper (`os_sup_node_history`, a reading of
//! every table's rows and of the followed processes each tick, a walk for the largest
//! processes every sixth) and the stall watch (`os_sup_trace_sysmon`, the system monitor). A
//! plain `erl` node started by a server with `OS_SUP_VITALS=off` (so neither runs until the
//! bench starts them) holds idle processes and 2000 tables; inside it the probe of
//! `bench_probe` makes a round trip every 2 ms. Window A: the watchers off; window B: both on,
//! the keeper at a tick a second (ten times its default rate, a walk every 6 s); in the same run.
//! The node's CPU time over each window is read from `/proc`. Writes its own section of
//! `scripts/bench_results.md`.

mod common;

use common::probe::{window_stats, PROBE};
use serde_json::json;
use std::time::Duration;

const HEADER: &str = "## Always-on watchers";
const WINDOW: Duration = Duration::from_secs(30);
const EVERY_MS: u64 = 1000;
const TABLES: u32 = 2000;

/// The keeper's and the watch's own memory (process and tables), in bytes, and the keeper's
/// readings: `Bytes Readings`.
const WATCHERS_MEMORY: &str = r#"
Word = erlang:system_info(wordsize),
Proc = fun(N) -> case whereis(N) of undefined -> 0; P -> element(2, process_info(P, memory)) end end,
Tab = fun(T) -> case ets:info(T, memory) of undefined -> 0; M -> M * Word end end,
Bytes = Proc(os_sup_node_history) + Proc(os_sup_trace_sysmon)
        + Tab(os_sup_node_history) + Tab(os_sup_sysmon_stalls),
Readings = case ets:info(os_sup_node_history, size) of undefined -> 0; S -> S end,
lists:flatten(io_lib:format("~b ~b", [Bytes, Readings])).
"#;

async fn erl(c: &mut common::Client, code: &str) -> String {
    let value = c
        .ok(
            "eval",
            json!({"name": "probe", "code": code, "lang": "erlang", "timeout_ms": 60_000}),
        )
        .await;
    value["value"]
        .as_str()
        .unwrap()
        .trim_matches('"')
        .to_string()
}

/// Runs `setup` (Erlang, ending with `, `), then one window named `name` of the probe: the
/// node's CPU time over it.
async fn window(c: &mut common::Client, os_pid: u32, setup: &str, name: &str) -> Duration {
    erl(
        c,
        &format!("{setup}persistent_term:put(probe_window, {name}), ok."),
    )
    .await;
    let before = common::cpu_time(os_pid);
    // Clock: a window is this long a time of the node as it is (watchers on or off).
    tokio::time::sleep(WINDOW).await;
    common::cpu_time(os_pid) - before
}

struct Run {
    processes: u32,
    off: (String, Duration),
    on: (String, Duration),
    off_again: (String, Duration),
    memory_bytes: u64,
    readings: u64,
}

async fn run(server: &common::Server, idle: u32) -> Run {
    let mut c = server.client().await;
    c.ok(
        "start",
        json!({"name": "probe",
               // No busy-waiting schedulers: the node's CPU time is its work, not the spinning
               // that any change in its wake-ups moves by several % of a core.
               "command": ["erl", "-noshell", "+P", "2000000", "+sbwt", "none",
                           "+sbwtdcpu", "none", "+sbwtdio", "none"],
               "env": {"OS_SUP_HISTORY_EVERY_MS": EVERY_MS.to_string()}}),
    )
    .await;
    let os_pid: u32 = erl(&mut c, "list_to_integer(os:getpid()).")
        .await
        .parse()
        .unwrap();
    erl(
        &mut c,
        &format!(
            "Pids = [spawn(fun() -> receive never -> ok end end) || _ <- lists:seq(1, {idle})], \
             Owner = spawn(fun() -> [ets:new(t, [set, public]) || _ <- lists:seq(1, {TABLES})], \
             receive never -> ok end end), length(Pids)."
        ),
    )
    .await;
    erl(&mut c, PROBE).await;
    // Clock: the spawning's collections settle before the measured windows.
    tokio::time::sleep(Duration::from_secs(10)).await;

    let cpu_off = window(&mut c, os_pid, "", "a").await;
    let cpu_on = window(
        &mut c,
        os_pid,
        "os_sup_node_history:ensure(), os_sup_trace_sysmon:watch(), ",
        "b",
    )
    .await;
    let memory = erl(&mut c, WATCHERS_MEMORY).await;
    let cpu_off_again = window(
        &mut c,
        os_pid,
        "os_sup_node_history:stop(), os_sup_trace_sysmon:stop(), ",
        "c",
    )
    .await;
    erl(&mut c, "persistent_term:put(probe_window, done), ok.").await;

    let off = erl(&mut c, &window_stats("a")).await;
    let on = erl(&mut c, &window_stats("b")).await;
    let off_again = erl(&mut c, &window_stats("c")).await;
    let (memory_bytes, readings) = memory.split_once(' ').unwrap();
    c.ok("stop", json!({"name": "probe"})).await;
    Run {
        processes: idle,
        off: (off, cpu_off),
        on: (on, cpu_on),
        off_again: (off_again, cpu_off_again),
        memory_bytes: memory_bytes.parse().unwrap(),
        readings: readings.parse().unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench.sh history"]
async fn history() {
    let server = common::Server::start_with_env(&[], &[("OS_SUP_VITALS", "off")]);
    let mut section = format!(
        "{HEADER} (the history keeper and the stall watch; release build, this machine)\n\n\
         A plain `erl` node with idle processes and {TABLES} tables; a probe process in it \
         makes a round trip with an echo process every 2 ms. Window A: {w} s with the watchers \
         off; window B: {w} s with both on, the keeper reading every {EVERY_MS} ms (ten times \
         its default rate: a walk of the processes every {walk} s); window C: off again (A and \
         C show what the node does anyway). The node's schedulers do not busy-wait (`+sbwt \
         none`), so its CPU time is work. Node CPU is user + system \
         time from `/proc` over the window (10 ms ticks), as a share of one core. Targets: the \
         probe's p99 in B ≤ 2× A's; at the default rate the keeper costs under 1 % of a core.\n\n\
         | processes | round trip A (off): p50 / p99 / max µs (rounds) | B (on) | C (off) \
         | node CPU A / B / C | watchers' memory at the end of B (readings kept) |\n\
         |---|---|---|---|---|---|\n",
        w = WINDOW.as_secs(),
        walk = EVERY_MS * 6 / 1000,
    );
    let only: Option<u32> = std::env::var("OS_SUP_BENCH_PROCESSES")
        .ok()
        .and_then(|v| v.parse().ok());
    for idle in [10_000, 100_000, 1_000_000] {
        if only.is_some_and(|n| n != idle) {
            continue;
        }
        let r = run(&server, idle).await;
        let stats = |s: &str| {
            let n: Vec<&str> = s.split(' ').collect();
            format!("{} / {} / {} ({})", n[0], n[1], n[2], n[3])
        };
        let share =
            |d: Duration| format!("{:.2} %", d.as_secs_f64() / WINDOW.as_secs_f64() * 100.0);
        section += &format!(
            "| {} | {} | {} | {} | {} / {} / {} | {:.1} MB ({}) |\n",
            r.processes,
            stats(&r.off.0),
            stats(&r.on.0),
            stats(&r.off_again.0),
            share(r.off.1),
            share(r.on.1),
            share(r.off_again.1),
            r.memory_bytes as f64 / 1048576.0,
            r.readings,
        );
    }
    section += "\nPast 200 000 processes the keeper walks no more (it follows the processes it \
                has): the 1 000 000 row shows the readings of tables alone. At the default \
                rate (a reading every 10 s, a walk every minute) the keeper's cost is a tenth of \
                B's CPU beyond A's and C's; its heap is freed when it hibernates between \
                readings, which a tick a second never lets it do.\n";
    println!("{section}");
    common::write_bench_section(HEADER, &section);
}
