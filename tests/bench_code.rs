//! Benchmark of the code tools (run by `scripts/bench.sh code`, ignored by `cargo test`),
//! through MCP over TCP against the demo fixture: `docs Enum.map/2` and `source` p50 (target
//! ≤ 5 ms), `callers` on a fresh node (cold index, target ≤ 500 ms) and answer sizes (target:
//! `docs Enum.map/2` ≤ 2 KB of text). Writes its own section of `scripts/bench_results.md`.

mod common;

use serde_json::{json, Value};
use std::time::{Duration, Instant};

const HEADER: &str = "## Code knowledge";
const SAMPLES: usize = 300;
const COLD_RUNS: usize = 5;

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// p50 and p99 of `samples` calls of `tool` (after a tenth as warm-up).
async fn timed(
    c: &mut common::Client,
    tool: &str,
    args: Value,
    samples: usize,
) -> (Duration, Duration) {
    let mut t = Vec::with_capacity(samples);
    for i in 0..samples + samples / 10 {
        let started = Instant::now();
        c.ok(tool, args.clone()).await;
        if i >= samples / 10 {
            t.push(started.elapsed());
        }
    }
    t.sort();
    (t[t.len() / 2], t[(t.len() * 99 / 100).min(t.len() - 1)])
}

async fn text_size(c: &mut common::Client, tool: &str, args: Value) -> usize {
    let result = c.call(tool, args).await;
    assert_ne!(result["isError"], json!(true), "{result}");
    common::text(&result).len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench.sh code"]
async fn code() {
    let server = common::Server::start();
    let mut c = server.client().await;
    let node = json!({"name": "code", "path": common::demo_app()});
    let callers = json!({"name": "code", "target": "DemoApp.Ledger.post/2"});
    // Cold: the first `callers` on a freshly started node (nothing read or cached yet).
    let mut cold = Vec::new();
    for i in 0..COLD_RUNS {
        if i == 0 {
            c.ok("start", node.clone()).await;
        } else {
            c.ok("restart", json!({"name": "code"})).await;
        }
        let started = Instant::now();
        let r = c.ok("callers", callers.clone()).await;
        cold.push(started.elapsed());
        assert_eq!(r["partial"], false, "{r}");
    }
    cold.sort();
    let docs = json!({"name": "code", "target": "Enum.map/2"});
    let source = json!({"name": "code", "target": "DemoApp.Ledger.post/2"});
    let cases = [
        (
            "`docs Enum.map/2`",
            "docs",
            docs.clone(),
            SAMPLES,
            "p50 ≤ 5 ms",
        ),
        (
            "`source DemoApp.Ledger.post/2`",
            "source",
            source.clone(),
            SAMPLES,
            "p50 ≤ 5 ms",
        ),
        (
            "`source Enum.map/2`",
            "source",
            json!({"name": "code", "target": "Enum.map/2"}),
            SAMPLES,
            "",
        ),
        (
            "`docs Enum` (module)",
            "docs",
            json!({"name": "code", "target": "Enum"}),
            100,
            "",
        ),
        (
            "`callers DemoApp.Ledger.post/2` (warm)",
            "callers",
            callers.clone(),
            100,
            "",
        ),
        (
            "`find Ledger`",
            "find",
            json!({"name": "code", "query": "Ledger"}),
            30,
            "",
        ),
    ];
    let mut rows = vec![format!(
        "| `callers DemoApp.Ledger.post/2` cold (first call on a fresh node, {COLD_RUNS} runs) | median {} ms, max {} ms | | ≤ 500 ms |",
        cold[COLD_RUNS / 2].as_millis(),
        cold[COLD_RUNS - 1].as_millis()
    )];
    for (label, tool, args, samples, target) in cases {
        let (p50, p99) = timed(&mut c, tool, args, samples).await;
        rows.push(format!(
            "| {label} ({samples} calls) | p50 {} | p99 {} | {target} |",
            us(p50),
            us(p99)
        ));
    }
    let sizes = [
        ("`docs Enum.map/2`", "docs", docs, "≤ 2 KB"),
        (
            "`docs Enum`",
            "docs",
            json!({"name": "code", "target": "Enum"}),
            "",
        ),
        (
            "`docs GenServer.handle_call/3`",
            "docs",
            json!({"name": "code", "target": "GenServer.handle_call/3"}),
            "",
        ),
        ("`source DemoApp.Ledger.post/2`", "source", source, ""),
        ("`callers DemoApp.Ledger.post/2`", "callers", callers, ""),
        (
            "`find map` (30 hits)",
            "find",
            json!({"name": "code", "query": "map"}),
            "",
        ),
    ];
    for (label, tool, args, target) in sizes {
        let bytes = text_size(&mut c, tool, args).await;
        rows.push(format!("| text of {label} | {bytes} bytes | | {target} |"));
    }
    let section = format!(
        "{HEADER} (demo fixture, through MCP over TCP, release build)\n\n\
         | measure | value | p99 | target |\n|---|---|---|---|\n{}\n",
        rows.join("\n")
    );
    println!("{section}");
    common::write_bench_section(HEADER, &section);
}
