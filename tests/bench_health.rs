//! Benchmark of the health report (run by `scripts/bench.sh scale`, or with the stack sampler
//! by `scripts/bench.sh health`; ignored by `cargo test`): `diagnose` with a 1 s window on
//! nodes with 100 000 and 1 000 000 idle processes plus the ailments fixture's leak, through
//! MCP over TCP, beside a bare walk of the same node (`erlang:processes()` and one
//! `process_info` of the same items each, compiled, one process) measured in the same run; and
//! whether every answer found the leak, read every process, and was cut short nowhere.
//! Writes its own section of `scripts/bench_results.md`.

mod common;

use serde_json::json;
use std::time::{Duration, Instant};

const HEADER: &str = "## Health report at scale";
const RUNS: usize = 5;

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

/// A module the node compiles, so the bare walk is compiled code as ours is.
const BARE_WALK: &str = r##"
defmodule BareWalk do
  @items [:initial_call, :current_function, :message_queue_len, :memory, :links,
          :total_heap_size, :reductions, :status, :registered_name, :monitors, :parent]
  def run do
    {us, n} = :timer.tc(fn -> Enum.count(:erlang.processes(), &(:erlang.process_info(&1, @items) != :undefined)) end)
    "#{div(us, 1000)} #{n}"
  end
end
:ok
"##;

struct Measured {
    processes: String,
    ours: Vec<Duration>,
    walks: Vec<Duration>,
    bytes: usize,
    figures: String,
}

async fn measure(server: &common::Server, idle: u32) -> Measured {
    let mut c = server.client().await;
    let args = json!({"name": "scale", "path": common::ailments(),
                      "env": {"AILMENT": "leak", "ELIXIR_ERL_OPTIONS": "+P 2000000"}});
    c.ok("start", args).await;
    let spawned = c
        .ok(
            "eval",
            json!({"name": "scale", "timeout_ms": 60_000, "code": format!(
                "for _ <- 1..{idle}, do: spawn(fn -> receive do :never -> :ok end end); \
                 length(Process.list())")}),
        )
        .await;
    c.eval("scale", BARE_WALK).await;
    let (mut ours, mut walks, mut bytes, mut figures) = (Vec::new(), Vec::new(), 0, String::new());
    for _ in 0..RUNS {
        let walk = c.eval("scale", "BareWalk.run()").await;
        let walk = walk["value"]
            .as_str()
            .unwrap()
            .trim_matches('"')
            .to_string();
        walks.push(Duration::from_millis(
            walk.split(' ').next().unwrap().parse().unwrap(),
        ));

        let started = Instant::now();
        let result = c
            .call("diagnose", json!({"name": "scale", "window_ms": 1000}))
            .await;
        ours.push(started.elapsed());
        assert_ne!(result["isError"], json!(true), "{result}");
        let text = common::text(&result);
        assert_eq!(
            result["structuredContent"]["findings"][0]["kind"], "leak",
            "{text}"
        );
        assert!(!text.contains("TRUNCATED"), "a walk was cut short: {text}");
        bytes = bytes.max(text.len());
        figures = text
            .lines()
            .find(|l| l.starts_with("figures:"))
            .unwrap_or("")
            .to_string();
    }
    c.ok("stop", json!({"name": "scale"})).await;
    ours.sort();
    walks.sort();
    Measured {
        processes: spawned["value"].as_str().unwrap_or("?").to_string(),
        ours,
        walks,
        bytes,
        figures,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench.sh scale"]
async fn scale() {
    let server = common::Server::start();
    let mut section = format!(
        "{HEADER} (ailments fixture with the leak plus idle processes; {RUNS} runs each, \
         release build)\n\n`diagnose` walks every process twice, once at each end of the \
         window, split across the node's schedulers (`os_sup_proc_scan`); where a walk falls \
         behind 800 ms it reads a sample of the rest (the same processes at both ends, and every \
         process born between them) and says so. The \
         bare walk is one process reading the same 11 items of every process, compiled, in the \
         same node in the same run.\n\n\
         | processes | `diagnose` p50 | max | bare walk p50 | target | leak found, nothing truncated |\n\
         |---|---|---|---|---|---|\n"
    );
    let mut notes = String::new();
    // `OS_SUP_BENCH_PROCESSES=100000` measures one size only.
    let only: Option<u32> = std::env::var("OS_SUP_BENCH_PROCESSES")
        .ok()
        .and_then(|v| v.parse().ok());
    for (idle, target) in [(100_000, "≤ 1 s"), (1_000_000, "≤ 2 s")] {
        if only.is_some_and(|n| n != idle) {
            continue;
        }
        let m = measure(&server, idle).await;
        section += &format!(
            "| {} | {} | {} | {} | {target} | {RUNS} of {RUNS} |\n",
            m.processes,
            ms(m.ours[RUNS / 2]),
            ms(m.ours[RUNS - 1]),
            ms(m.walks[RUNS / 2]),
        );
        notes += &format!(
            "\n{} processes, the last answer's figures ({} bytes at most):\n\n```\n{}\n```\n",
            m.processes, m.bytes, m.figures
        );
    }
    section += &notes;
    println!("{section}");
    common::write_bench_section(HEADER, &section);
}

const PROFILE_HEADER: &str = "## Stack sampler";

/// The sampler `diagnose`'s cpu finding and `process_info`'s `profile_ms` use: what one read
/// of a process's status and stack costs, and how much a 2 s profile (a read every 5 ms)
/// slows the process it profiles (the ailments fixture's CPU hog, by its reductions over
/// 2 s with and without the profile, alternating).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench.sh health"]
async fn sampler() {
    let server = common::Server::start();
    let mut c = server.client().await;
    c.start_ailment("hog", "cpu").await;
    let read_cost = c
        .eval(
            "hog",
            "pid = Process.whereis(Ailments.Indexer); \
             {us, _} = :timer.tc(fn -> for _ <- 1..20_000, \
               do: Process.info(pid, [:status, :current_stacktrace]) end); us / 20_000",
        )
        .await;
    let per_read: f64 = read_cost["value"].as_str().unwrap().parse().unwrap();
    let reductions = "pid = Process.whereis(Ailments.Indexer); \
                      {_, r0} = Process.info(pid, :reductions); Process.sleep(2000); \
                      {_, r1} = Process.info(pid, :reductions); r1 - r0";
    let (mut alone, mut profiled) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let r = c.eval("hog", reductions).await;
        alone.push(r["value"].as_str().unwrap().parse::<f64>().unwrap());
        let (r, profile) = tokio::join!(
            async {
                let mut c2 = server.client().await;
                c2.eval("hog", reductions).await
            },
            async {
                let mut c3 = server.client().await;
                c3.ok(
                    "process_info",
                    json!({"name": "hog", "pid": "Ailments.Indexer", "profile_ms": 2000}),
                )
                .await
            }
        );
        profiled.push(r["value"].as_str().unwrap().parse::<f64>().unwrap());
        assert!(
            profile["profile"]["reads"].as_u64().unwrap() > 100,
            "{profile}"
        );
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let change = (mean(&profiled) / mean(&alone) - 1.0) * 100.0;
    let section = format!(
        "{PROFILE_HEADER} (ailments fixture, AILMENT=cpu: Ailments.Indexer rebuilds an index \
         every 20 ms; release build)\n\n| measure | value |\n|---|---|\n\
         | one read of a process's status and stack (`process_info`, by eval, mean of 20 000) | \
         {per_read:.2} µs |\n\
         | the profiled process's reductions over 2 s, alone (mean of 3) | {:.1} M |\n\
         | the same while profiled for 2 s, a read every 5 ms (mean of 3) | {:.1} M |\n\
         | change while profiled | {change:+.1} % |\n\n\
         A profile reads each process every 5 ms (at most 8 processes): about {:.0} µs of the \
         profiling process's time per second per profiled process; `diagnose` profiles only \
         when a process took 2 M reductions a second or more, for 300 ms.\n",
        mean(&alone) / 1e6,
        mean(&profiled) / 1e6,
        per_read * 200.0
    );
    println!("{section}");
    common::write_bench_section(PROFILE_HEADER, &section);
    c.ok("stop", json!({"name": "hog"})).await;
}
