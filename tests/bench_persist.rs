//! Benchmark of the log's disk copy (run by `scripts/bench.sh persist`, ignored by `cargo
//! test`): a node logging about 10 000 lines/s for 10 s, and one writing 1 000 000 lines as
//! fast as it can, each on a server that keeps logs on disk (`--state-dir`) and on one that
//! keeps them in its ring only (no `--state-dir`: its default, private, dir); what each costs
//! the server in CPU time, how fast it absorbs the flood, and what the node pays (nothing
//! more: the server writes the disk copy). Writes its own section of
//! `scripts/bench_results.md`.

mod common;

use common::{cpu_time as cpu, Server};
use serde_json::json;
use std::time::{Duration, Instant};

const HEADER: &str = "## Log disk copy";

/// A server with the disk copy (`--state-dir`) or without it.
fn server(disk: bool, dir: &tempfile::TempDir) -> Server {
    let path = dir.path().to_str().unwrap();
    if disk {
        Server::start_with(&["--state-dir", path])
    } else {
        Server::start_with_env(&[], &[("XDG_STATE_HOME", path)])
    }
}

struct Run {
    lines: u64,
    seconds: f64,
    server_cpu: Duration,
    node_cpu: Duration,
}

/// Node `log` of `server` writes `chunks` chunks of 100 lines of 100 bytes to its stdout,
/// `pause_ms` between chunks; the run ends once the server has them all.
async fn run(server: &Server, chunks: u64, pause_ms: u64) -> Run {
    let mut c = server.client().await;
    let node = c
        .ok(
            "start",
            json!({"name": "log", "command": ["erl", "-noshell"]}),
        )
        .await;
    let node_pid = node["os_pid"].as_u64().unwrap() as u32;
    let next = |page: &serde_json::Value| page["next_seq"].as_u64().unwrap();
    let base = next(&c.ok("logs", json!({"name": "log", "tail": 0})).await);
    let code = format!(
        "Line = binary:copy(<<\"x\">>, 99), \
         Chunk = iolist_to_binary([[Line, $\\n] || _ <- lists:seq(1, 100)]), \
         spawn(fun() -> P = open_port({{fd, 0, 1}}, [out, binary]), \
         [begin port_command(P, Chunk), timer:sleep({pause_ms}) end || _ <- lists:seq(1, {chunks})] end), ok"
    );
    let (server_before, node_before) = (cpu(server.pid()), cpu(node_pid));
    let started = Instant::now();
    c.ok(
        "eval",
        json!({"name": "log", "code": code, "lang": "erlang"}),
    )
    .await;
    let lines = chunks * 100;
    loop {
        let page = c.ok("logs", json!({"name": "log", "tail": 0})).await;
        if next(&page) >= base + lines {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "stalled: {page}"
        );
        // Clock: paces this poll; the time it sees the last line at is measured.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let result = Run {
        lines,
        seconds: started.elapsed().as_secs_f64(),
        server_cpu: cpu(server.pid()) - server_before,
        node_cpu: cpu(node_pid) - node_before,
    };
    c.ok("stop", json!({"name": "log"})).await;
    result
}

fn row(label: &str, run: &Run) -> String {
    format!(
        "| {label} | {:.0} lines/s | {:.2} s ({:.1}% of one core) | {:.2} s |",
        run.lines as f64 / run.seconds,
        run.server_cpu.as_secs_f64(),
        100.0 * run.server_cpu.as_secs_f64() / run.seconds,
        run.node_cpu.as_secs_f64(),
    )
}

#[tokio::test]
#[ignore = "benchmark: scripts/bench.sh persist"]
async fn the_log_disk_copy_costs() {
    let mut rows = Vec::new();
    // Per setting (ring only, with the disk copy): the steady runs' share of a core, and the
    // floods' server CPU per line.
    let mut steady_share = [Vec::new(), Vec::new()];
    let mut flood_per_line = [Vec::new(), Vec::new()];
    // Alternated, twice: the machine's load changes from one minute to the next.
    for round in 1..=2 {
        for disk in [false, true] {
            let dir = common::private_dir();
            let server = server(disk, &dir);
            let what = if disk {
                "ring + disk copy"
            } else {
                "ring only"
            };
            let steady = run(&server, 1000, 10).await;
            rows.push(row(
                &format!("~10 000 lines/s for 10 s, {what} (round {round})"),
                &steady,
            ));
            let flood = run(&server, 10_000, 0).await;
            steady_share[disk as usize].push(steady.server_cpu.as_secs_f64() / steady.seconds);
            flood_per_line[disk as usize].push(flood.server_cpu.as_secs_f64() / flood.lines as f64);
            rows.push(row(
                &format!("1 000 000 lines at once, {what} (round {round})"),
                &flood,
            ));
            if disk {
                let bytes: u64 = std::fs::read_dir(dir.path().join("logs"))
                    .unwrap()
                    .map(|e| e.unwrap().metadata().unwrap().len())
                    .sum();
                rows.push(format!("| disk copy after both runs | {} KB on disk (bounded like the ring: 20 000 lines, 8 MB) | | |", bytes / 1024));
            }
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let section = format!(
        "{HEADER} (a plain `erl` node writing 100-byte lines to its stdout; the server's and the \
         node's CPU time while the server absorbs them)\n\n\
         | run | absorbed | server CPU | node CPU |\n|---|---|---|---|\n{}\n\n\
         The disk copy's cost, on the server (the node does none of the writing; its CPU \
         varies with how fast the server drains its pipe, in a flood): at ~10 000 lines/s, {:.1}% of a core beside {:.1}% for the \
         ring alone; in a flood, {:.2} µs of server CPU a line beside {:.2} µs.\n",
        rows.join("\n"),
        100.0 * mean(&steady_share[1]),
        100.0 * mean(&steady_share[0]),
        1e6 * mean(&flood_per_line[1]),
        1e6 * mean(&flood_per_line[0]),
    );
    println!("{section}");
    common::write_bench_section(HEADER, &section);
}
