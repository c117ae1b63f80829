//! Benchmark of the health report (run by `scripts/bench.sh health`, ignored by `cargo test`):
//! `diagnose` with a 1 s window on a node with 100 000 idle processes plus the ailments
//! fixture's leak, through MCP over TCP, beside a bare `erlang:processes()` walk with
//! `process_info` measured in the same run (by eval); and the answer's size. Writes its own
//! section of `scripts/bench_results.md`.

mod common;

use serde_json::json;
use std::time::{Duration, Instant};

const HEADER: &str = "## Health report";
const RUNS: usize = 5;
const IDLE: u32 = 100_000;

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench.sh health"]
async fn health() {
    let server = common::Server::start();
    let mut c = server.client().await;
    c.start_ailment("sick", "leak").await;
    let spawned = c
        .eval(
            "sick",
            &format!(
                "for _ <- 1..{IDLE}, do: spawn(fn -> receive do :never -> :ok end end); \
                 length(Process.list())"
            ),
        )
        .await;
    eprintln!("processes: {}", spawned["value"]);

    let walk_code = "items = [:initial_call, :current_function, :message_queue_len, :memory, \
                     :links, :registered_name, :parent]; \
                     {us, n} = :timer.tc(fn -> Enum.count(:erlang.processes(), \
                     &(:erlang.process_info(&1, items) != :undefined)) end); \
                     \"#{div(us, 1000)} #{n}\"";
    let (mut ours, mut walks, mut bytes, mut texts) = (Vec::new(), Vec::new(), Vec::new(), None);
    for _ in 0..RUNS {
        let walk = c.eval("sick", walk_code).await;
        let walk = walk["value"]
            .as_str()
            .unwrap()
            .trim_matches('"')
            .to_string();
        let walk_ms: u64 = walk.split(' ').next().unwrap().parse().unwrap();
        walks.push(Duration::from_millis(walk_ms));

        let started = Instant::now();
        let result = c
            .call("diagnose", json!({"name": "sick", "window_ms": 1000}))
            .await;
        ours.push(started.elapsed());
        assert_ne!(result["isError"], json!(true), "{result}");
        let text = common::text(&result);
        assert_eq!(
            result["structuredContent"]["findings"][0]["kind"], "leak",
            "{text}"
        );
        bytes.push(text.len());
        texts = Some(text);
    }
    ours.sort();
    walks.sort();
    let text = texts.unwrap();
    println!("{text}");
    let processes = spawned["value"].as_str().unwrap_or("?").to_string();
    let rows = [
        (
            "`diagnose` (1 s window) through MCP, p50".to_string(),
            ms(ours[RUNS / 2]),
            "≤ 1.5 s".to_string(),
        ),
        (
            "`diagnose` (1 s window) through MCP, max".to_string(),
            ms(ours[RUNS - 1]),
            "≤ 1.5 s".to_string(),
        ),
        (
            "bare walk: `erlang:processes()` + `process_info` (7 items) each, by eval, p50"
                .to_string(),
            ms(walks[RUNS / 2]),
            String::new(),
        ),
        (
            "`diagnose` minus the 1 s window, p50 (≈ one walk after the window)".to_string(),
            ms(ours[RUNS / 2].saturating_sub(Duration::from_secs(1))),
            String::new(),
        ),
        (
            "answer text, max".to_string(),
            format!("{} bytes", bytes.iter().max().unwrap()),
            "≤ 2 KB".to_string(),
        ),
    ];
    let mut section = format!(
        "{HEADER} (ailments fixture with the leak plus {IDLE} idle processes: {processes} \
         processes; {RUNS} runs, release build)\n\n`diagnose` scans every process twice (one \
         `process_info` each), the first scan and the waits scan inside the window, so it takes \
         about window + one walk. The bare walk runs in an eval (its closure is interpreted, \
         a little slower than compiled code).\n\n| measure | value | target |\n|---|---|---|\n"
    );
    for (what, value, target) in rows {
        section += &format!("| {what} | {value} | {target} |\n");
    }
    section += &format!(
        "\nThe first finding of the last run:\n\n```\n{}\n```\n",
        text.lines().take(3).collect::<Vec<_>>().join("\n")
    );
    println!("{section}");
    common::write_bench_section(HEADER, &section);
    c.ok("stop", json!({"name": "sick"})).await;
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
