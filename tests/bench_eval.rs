//! Latency benchmark (run by `scripts/bench.sh`, ignored by `cargo test`): `eval "1 + 1"`
//! through MCP over TCP against the demo fixture, and the raw helper `ping` over distribution
//! as the floor. Prints p50/p99 and writes them to `scripts/bench_results.md`.

mod common;

use os_sup_mcp::dist::Connection;
use os_sup_mcp::term;
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WARMUP: usize = 200;
const SAMPLES: usize = 3000;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn summary(label: &str, mut samples: Vec<Duration>) -> String {
    samples.sort();
    let line = format!(
        "| {label} | {} | {:.0} µs | {:.0} µs | {:.0} µs |",
        samples.len(),
        percentile(&samples, 0.50).as_secs_f64() * 1e6,
        percentile(&samples, 0.99).as_secs_f64() * 1e6,
        samples.last().unwrap().as_secs_f64() * 1e6,
    );
    println!("{line}");
    line
}

async fn raw_ping() -> Vec<Duration> {
    let name = format!("bench_{}@127.0.0.1", std::process::id());
    let mut erl = Command::new("erl")
        .args(["-name", &name, "-setcookie", "bench", "-noshell", "-pa"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("priv"))
        .args(["-eval", "os_sup_helper:start()"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("erl");
    let deadline = Instant::now() + Duration::from_secs(20);
    let conn = loop {
        if let Ok(conn) = Connection::open(&name, "bench", Duration::from_secs(2)).await {
            if conn
                .call("os_sup_helper", term::atom("ping"), Duration::from_secs(1))
                .await
                .is_ok()
            {
                break conn;
            }
        }
        assert!(Instant::now() < deadline, "bench node did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut samples = Vec::with_capacity(SAMPLES);
    for i in 0..WARMUP + SAMPLES {
        let started = Instant::now();
        conn.call("os_sup_helper", term::atom("ping"), Duration::from_secs(1))
            .await
            .unwrap();
        if i >= WARMUP {
            samples.push(started.elapsed());
        }
    }
    let _ = erl.kill();
    let _ = erl.wait();
    samples
}

async fn mcp_eval() -> Vec<Duration> {
    let server = common::Server::start();
    let mut client = server.client().await;
    client.start_demo("bench").await;
    let mut samples = Vec::with_capacity(SAMPLES);
    for i in 0..WARMUP + SAMPLES {
        let started = Instant::now();
        let out = client
            .ok("eval", json!({"name": "bench", "code": "1 + 1"}))
            .await;
        if i >= WARMUP {
            samples.push(started.elapsed());
        }
        assert_eq!(out["value"], "2");
    }
    samples
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench.sh"]
async fn eval_latency() {
    let header = "| what | samples | p50 | p99 | max |\n|---|---|---|---|---|";
    println!("{header}");
    let ping = summary("helper `ping` over distribution (floor)", raw_ping().await);
    let eval = summary(
        "MCP `eval \"1 + 1\"` over TCP (sequential)",
        mcp_eval().await,
    );
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let report = format!(
        "# Benchmark results\n\nWritten by `scripts/bench.sh` ({profile} build, {} cores, {}).\n\n{header}\n{ping}\n{eval}\n",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        String::from_utf8_lossy(&Command::new("date").arg("-u").arg("+%F").output().unwrap().stdout).trim(),
    );
    std::fs::write(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench_results.md"),
        report,
    )
    .unwrap();
}
