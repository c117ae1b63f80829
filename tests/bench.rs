//! Latency benchmarks (run by `scripts/bench.sh`, ignored by `cargo test`), all through MCP over
//! TCP against the demo fixture: `eval "1 + 1"` with the raw helper `ping` over distribution as
//! the floor, and the introspection tools. Prints p50/p99 and writes
//! `scripts/bench_results.md`.

mod common;

use common::erl::ErlNode;
use common::wait_until;

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
    let erl = ErlNode::build("bench").helper().start();
    let deadline = Instant::now() + Duration::from_secs(20);
    let conn = loop {
        if let Ok(conn) = Connection::open(&erl.name, &erl.cookie, Duration::from_secs(2)).await {
            if conn
                .call("os_sup_helper", term::atom("ping"), Duration::from_secs(1))
                .await
                .is_ok()
            {
                break conn;
            }
        }
        assert!(Instant::now() < deadline, "bench node did not come up");
        // Clock: paces this poll; the deadline above bounds it.
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
    drop(erl);
    samples
}

/// Traces a function called in a tight loop (`DemoApp.Hot`) with `max_events: 100`: the node's call rate
/// before, during and after, and how long the session takes to stop by itself.
async fn trace_overload(c: &mut common::Client) -> String {
    let setup = "ref = :counters.new(1, []); :persistent_term.put(:bench_calls, ref); \
                 pid = spawn(fn -> DemoApp.Hot.spin(ref) end); Process.register(pid, :bench_loop); :ok";
    c.eval("small", setup).await;
    let rate = |ms: u64| {
        format!(
            "r = :persistent_term.get(:bench_calls); a = :counters.get(r, 1); Process.sleep({ms}); \
             div((:counters.get(r, 1) - a) * 1000, {ms})"
        )
    };
    let calls_per_s = |v: &serde_json::Value| v["value"].as_str().unwrap().parse::<u64>().unwrap();
    let before = calls_per_s(&c.eval("small", &rate(1000)).await);
    let started = Instant::now();
    let trace = json!({"name": "small", "module": "DemoApp.Hot", "function": "work",
                       "max_events": 100, "duration_ms": 10000});
    let session = c.ok("trace", trace).await["session"]
        .as_str()
        .unwrap()
        .to_string();
    let during = calls_per_s(&c.eval("small", &rate(100)).await);
    let stopped = loop {
        let r = c
            .ok("trace_results", json!({"session": session, "limit": 1}))
            .await;
        if r["state"] == "stopped" {
            break r;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the trace never stopped"
        );
        // Clock: paces this poll, finely: the time it sees the stop at is measured.
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let seen_stopped = started.elapsed();
    let after = calls_per_s(&c.eval("small", &rate(1000)).await);
    c.eval("small", "Process.exit(Process.whereis(:bench_loop), :kill)")
        .await;
    let report = format!(
        "\n## Tracing a hot function (`DemoApp.Hot.work/1` in a tight loop, `max_events: 100`)\n\n\
         | measure | value |\n|---|---|\n\
         | calls/s before the trace | {before} |\n\
         | calls/s in the first 100 ms after `trace` returned | {during} |\n\
         | calls/s after the session stopped | {after} |\n\
         | session stopped by itself (node-measured) | {} ms, reason `{}`, {} events |\n\
         | stop seen through MCP after | {} ms |\n",
        stopped["elapsed_ms"],
        stopped["stop_reason"].as_str().unwrap_or("?"),
        stopped["count"],
        seen_stopped.as_millis(),
    );
    println!("{report}");
    report
}

/// A child printing as fast as it can (200 MB in 100-byte lines straight to fd 1): how fast
/// the server absorbs it, and a filtered `logs` query over the full 100 000-line ring.
async fn log_ingestion() -> String {
    let server = common::Server::start_with(&["--log-lines", "100000", "--log-bytes", "67108864"]);
    let mut c = server.client().await;
    c.ok(
        "start",
        json!({"name": "spew", "command": ["erl", "-noshell"]}),
    )
    .await;
    let last_seq = |page: &serde_json::Value| page["next_seq"].as_u64().unwrap();
    let base = last_seq(&c.ok("logs", json!({"name": "spew", "tail": 0})).await);
    const CHUNKS: u64 = 200;
    const LINES_PER_CHUNK: u64 = 10_000;
    let spew = format!(
        "Line = binary:copy(<<\"x\">>, 99), \
         Chunk = iolist_to_binary([[Line, $\\n] || _ <- lists:seq(1, {LINES_PER_CHUNK})]), \
         P = open_port({{fd, 0, 1}}, [out, binary]), \
         [port_command(P, Chunk) || _ <- lists:seq(1, {CHUNKS})], ok"
    );
    let started = Instant::now();
    c.ok(
        "eval",
        json!({"name": "spew", "code": spew, "lang": "erlang", "timeout_ms": 60000}),
    )
    .await;
    let lines = CHUNKS * LINES_PER_CHUNK;
    loop {
        let page = c.ok("logs", json!({"name": "spew", "tail": 0})).await;
        if last_seq(&page) >= base + lines {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "ingestion stalled: {page}"
        );
        // Clock: paces this poll, finely: the time it sees the last line at is measured.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = started.elapsed().as_secs_f64();
    let typical = json!({"name": "spew", "grep": "error|timeout", "min_level": null, "tail": 10});
    let mut typical_timings = mcp_calls(&mut c, "logs", typical, 50).await;
    let worst = json!({"name": "spew", "grep": "x{50}$", "source": "stdout", "tail": 10});
    let mut worst_timings = mcp_calls(&mut c, "logs", worst.clone(), 50).await;
    let full = c.ok("logs", worst).await;
    assert_eq!(full["buffered"], 100_000, "{full}");
    assert_eq!(full["matched"], 100_000);
    typical_timings.sort();
    worst_timings.sort();
    let ms = |t: &[Duration], p: f64| percentile(t, p).as_secs_f64() * 1e3;
    let report = format!(
        "\n## Log ingestion (a child writing {} MB in 100-byte lines as fast as it can)\n\n\
         | measure | value |\n|---|---|\n\
         | lines absorbed | {lines} in {took:.2} s = {:.0} lines/s |\n\
         | bytes absorbed | {:.0} MB/s |\n\
         | `logs` grep `error\\|timeout` over the full 100 000-line ring, through MCP | p50 {:.1} ms, p99 {:.1} ms |\n\
         | `logs` grep `x{{50}}$` matching all 100 000 lines (worst case), through MCP | p50 {:.1} ms, p99 {:.1} ms |\n",
        lines * 100 / 1_000_000,
        lines as f64 / took,
        (lines * 100) as f64 / took / 1e6,
        ms(&typical_timings, 0.5),
        ms(&typical_timings, 0.99),
        ms(&worst_timings, 0.5),
        ms(&worst_timings, 0.99),
    );
    println!("{report}");
    report
}

/// Times `samples` calls of `tool` (after a few warm-up calls); every call must succeed.
async fn mcp_calls(
    client: &mut common::Client,
    tool: &str,
    args: serde_json::Value,
    samples: usize,
) -> Vec<Duration> {
    let mut timings = Vec::with_capacity(samples);
    for i in 0..samples + samples / 10 {
        let started = Instant::now();
        client.ok(tool, args.clone()).await;
        if i >= samples / 10 {
            timings.push(started.elapsed());
        }
    }
    timings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench.sh"]
async fn latency() {
    let header = "| what | samples | p50 | p99 | max |\n|---|---|---|---|---|";
    println!("{header}");
    let mut rows = vec![summary(
        "helper `ping` over distribution (floor)",
        raw_ping().await,
    )];
    let server = common::Server::start();
    let mut c = server.client().await;
    let bulk_env = json!({"DEMO_BULK_CHILDREN": "5000"});
    c.ok(
        "start",
        json!({"name": "bench", "path": common::demo_app(), "env": bulk_env}),
    )
    .await;
    assert_eq!(c.eval("bench", "1 + 1").await["value"], "2");
    let eval = json!({"name": "bench", "code": "1 + 1"});
    let timings = mcp_calls(&mut c, "eval", eval, SAMPLES).await;
    rows.push(summary(
        "MCP `eval \"1 + 1\"` over TCP (sequential)",
        timings,
    ));

    // Wait for the 5000 bulk children, then pad the node to over 10 000 processes.
    let count = "DynamicSupervisor.count_children(DemoApp.BulkSup).active";
    wait_until(
        Duration::from_secs(60),
        "the 5000 bulk children",
        async || c.eval("bench", count).await["value"].clone(),
        |active| active == "5000",
    )
    .await;
    let pad = "for _ <- 1..5000, do: spawn(fn -> receive do :never -> :ok end end); :ok";
    c.eval("bench", pad).await;
    let processes: u64 = c.eval("bench", ":erlang.system_info(:process_count)").await["value"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(processes > 10_000, "{processes}");

    c.start_demo("small").await;
    let cases = [
        (
            "MCP `supervision_tree` of the fixture as shipped (3 dynamic workers)".to_string(),
            "supervision_tree",
            json!({"name": "small"}),
            300,
        ),
        (
            "MCP `supervision_tree` of the fixture with 5000 bulk children (summarised)"
                .to_string(),
            "supervision_tree",
            json!({"name": "bench"}),
            300,
        ),
        (
            "MCP `supervision_tree` of the 5000-child DynamicSupervisor alone".to_string(),
            "supervision_tree",
            json!({"name": "bench", "root": "DemoApp.BulkSup"}),
            300,
        ),
        (
            format!("MCP `processes` top 10 by memory over {processes} processes"),
            "processes",
            json!({"name": "bench", "limit": 10}),
            100,
        ),
        (
            "MCP `system_info` (includes a 100 ms scheduler sample)".to_string(),
            "system_info",
            json!({"name": "bench"}),
            30,
        ),
    ];
    for (label, tool, args, samples) in cases {
        let timings = mcp_calls(&mut c, tool, args, samples).await;
        rows.push(summary(&label, timings));
    }

    let trace = trace_overload(&mut c).await;
    let logs = log_ingestion().await;

    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let date = Command::new("date")
        .arg("-u")
        .arg("+%F")
        .output()
        .unwrap()
        .stdout;
    let report = format!(
        "# Benchmark results\n\nWritten by `scripts/bench.sh` ({profile} build, {} cores, {}).\n\n{header}\n{}\n",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        String::from_utf8_lossy(&date).trim(),
        rows.join("\n"),
    ) + &trace
        + &logs;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench_results.md");
    // The lifecycle section is written by its own benchmark: keep it.
    let kept = std::fs::read_to_string(&path)
        .ok()
        .and_then(|old| old.find(LIFECYCLE_HEADER).map(|i| old[i..].to_string()))
        .unwrap_or_default();
    std::fs::write(path, report + "\n" + &kept).unwrap();
}

const LIFECYCLE_HEADER: &str = "## Lifecycle";
const LIFECYCLE_RUNS: usize = 20;

/// One bare `elixir -S mix run -e 'System.halt(0)'` of the fixture: boot, compile check, app
/// started, halt. The baseline a start through os_sup_mcp is compared with.
async fn bare_run() -> Duration {
    let started = Instant::now();
    let status = tokio::process::Command::new("elixir")
        .args(["-S", "mix", "run", "-e", "System.halt(0)"])
        .current_dir(common::demo_app())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .expect("elixir");
    assert!(status.success());
    started.elapsed()
}

/// One bare `elixir -S mix run --no-halt` of the fixture, as a node is run: the time until its
/// application has started (it prints a line then), and the node, still running.
async fn bare_kept_up() -> (Duration, tokio::process::Child) {
    use tokio::io::AsyncBufReadExt;
    let started = Instant::now();
    let mut child = tokio::process::Command::new("elixir")
        .args(["-S", "mix", "run", "-e", "IO.puts(:up)", "--no-halt"])
        .current_dir(common::demo_app())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("elixir");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(line) = lines.next_line().await.expect("stdout") {
        if line == "up" {
            return (started.elapsed(), child);
        }
    }
    panic!("the bare node ended before its application started");
}

/// User + system CPU an OS process has used so far (from `/proc`); nothing once it is gone.
fn cpu_used(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: u64 = [11, 12] // utime, stime (fields 14 and 15 of the whole line)
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1000 / per_second)
}

/// `a - b` with its sign, in ms.
fn diff_ms(a: Duration, b: Duration) -> String {
    let d = a.as_secs_f64() - b.as_secs_f64();
    format!("{}{:.0} ms", if d < 0.0 { "−" } else { "+" }, d.abs() * 1e3)
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

/// Start and stop times of the demo fixture through MCP beside bare `mix run`s of it, measured
/// in the same run, alternating so that machine noise hits both alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench.sh"]
async fn lifecycle() {
    let server = common::Server::start();
    let mut c = server.client().await;
    let project = common::demo_app();
    // Warm both paths once (file cache, epmd).
    bare_run().await;
    c.ok("start", json!({"name": "warm", "path": project}))
        .await;
    c.ok("stop", json!({"name": "warm"})).await;

    let (mut bare, mut ours, mut stops) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..LIFECYCLE_RUNS {
        bare.push(bare_run().await);
        let started = Instant::now();
        c.ok("start", json!({"name": "seq", "path": project})).await;
        ours.push(started.elapsed());
        let stopping = Instant::now();
        c.ok("stop", json!({"name": "seq"})).await;
        stops.push(stopping.elapsed());
    }
    for v in [&mut bare, &mut ours, &mut stops] {
        v.sort();
    }

    let started = Instant::now();
    futures::future::join_all((0..LIFECYCLE_RUNS).map(|_| bare_run())).await;
    let bare_parallel = started.elapsed();

    // The same, each bare node left running until the last is up, as ours are.
    let started = Instant::now();
    let kept = futures::future::join_all((0..LIFECYCLE_RUNS).map(|_| bare_kept_up())).await;
    let bare_kept_parallel = started.elapsed();
    // (`elixir` execs `erl`, which execs the VM: one process from spawn to now.)
    let bare_cpu: Duration = kept
        .iter()
        .filter_map(|(_, child)| child.id())
        .map(cpu_used)
        .sum();
    drop(kept);

    let addr = server.addr.clone();
    let started = Instant::now();
    let clients = futures::future::join_all((0..LIFECYCLE_RUNS).map(|i| {
        let addr = addr.clone();
        let project = project.clone();
        async move {
            let mut c = common::Client::connect(&addr).await;
            c.ok("start", json!({"name": format!("par{i}"), "path": project}))
                .await;
            c
        }
    }))
    .await;
    let ours_parallel = started.elapsed();
    let nodes = c.ok("status", json!({})).await;
    let ours_cpu: Duration = nodes["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["name"].as_str().is_some_and(|n| n.starts_with("par")))
        .map(|n| cpu_used(n["os_pid"].as_u64().expect("os_pid") as u32))
        .sum();
    let started = Instant::now();
    futures::future::join_all(
        clients
            .into_iter()
            .enumerate()
            .map(|(i, mut c)| async move {
                c.ok("stop", json!({"name": format!("par{i}")})).await;
            }),
    )
    .await;
    let stop_parallel = started.elapsed();

    let p = |v: &[Duration], q: f64| percentile(v, q);
    let rows = [
        (
            "start to application started, p50",
            ms(p(&ours, 0.5)),
            ms(p(&bare, 0.5)),
            diff_ms(p(&ours, 0.5), p(&bare, 0.5)),
            "≤ bare + 50 ms",
        ),
        (
            "start to application started, p95",
            ms(p(&ours, 0.95)),
            ms(p(&bare, 0.95)),
            diff_ms(p(&ours, 0.95), p(&bare, 0.95)),
            "≤ bare + 150 ms",
        ),
        (
            "20 starts in parallel (wall)",
            ms(ours_parallel),
            ms(bare_parallel),
            format!(
                "{:.2}×",
                ours_parallel.as_secs_f64() / bare_parallel.as_secs_f64()
            ),
            "≤ 1.2×",
        ),
        (
            "20 starts in parallel, the bare nodes left running (wall)",
            ms(ours_parallel),
            ms(bare_kept_parallel),
            format!(
                "{:.2}×",
                ours_parallel.as_secs_f64() / bare_kept_parallel.as_secs_f64()
            ),
            "",
        ),
        (
            "CPU per node until the last of the 20 is up (user + system)",
            ms(ours_cpu / LIFECYCLE_RUNS as u32),
            ms(bare_cpu / LIFECYCLE_RUNS as u32),
            diff_ms(
                ours_cpu / LIFECYCLE_RUNS as u32,
                bare_cpu / LIFECYCLE_RUNS as u32,
            ),
            "",
        ),
        (
            "stop of a healthy node, p50",
            ms(p(&stops, 0.5)),
            "".into(),
            "".into(),
            "≤ 300 ms",
        ),
        (
            "stop of a healthy node, max",
            ms(*stops.last().unwrap()),
            "".into(),
            "".into(),
            "",
        ),
        (
            "20 stops in parallel (wall)",
            ms(stop_parallel),
            "".into(),
            "".into(),
            "parallel",
        ),
    ];
    let mut section = format!(
        "{LIFECYCLE_HEADER} (demo fixture, compiled; {LIFECYCLE_RUNS} runs each, alternating)\n\n\
         The baseline is a bare `elixir -S mix run -e 'System.halt(0)'` of the same fixture in the \
         same run (boot, application started, halt).\n\n\
         | measure | os_sup_mcp | bare `mix run` | difference | target |\n|---|---|---|---|---|\n"
    );
    for (what, ours, bare, diff, target) in rows {
        section += &format!("| {what} | {ours} | {bare} | {diff} | {target} |\n");
    }
    println!("{section}");
    common::write_bench_section(LIFECYCLE_HEADER, &section);
}

const DASHBOARD_HEADER: &str = "## Dashboard";
const DASHBOARD_BLOCKS: usize = 3;
/// Seconds of evals per block, with the page and without.
const DASHBOARD_BLOCK_S: u64 = 6;

/// `eval "1 + 1"` for `seconds`; each call's time.
async fn evals_for(c: &mut common::Client, seconds: u64) -> Vec<Duration> {
    let eval = json!({"name": "dash", "code": "1 + 1"});
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut timings = Vec::new();
    while Instant::now() < until {
        let started = Instant::now();
        c.ok("eval", eval.clone()).await;
        timings.push(started.elapsed());
    }
    timings
}

/// `eval "1 + 1"` through MCP with the dashboard open in a headless Chromium (polling every
/// 0.5–3 s: nodes, log, activity, tree with a mailbox sample, processes over a 1 s window;
/// reloaded every 2 s) and without it, in alternating blocks of the same run; and what each
/// of the page's requests costs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench.sh dashboard"]
async fn dashboard() {
    use common::chromium::{chromium_installed, Browser};
    assert!(chromium_installed(), "the dashboard bench needs chromium");
    let server = common::Server::start_with(&["--http", "127.0.0.1:0"]);
    let http = server.logged("http");
    let mut c = server.client().await;
    c.start_demo("dash").await;
    evals_for(&mut c, 1).await;
    let (mut without, mut with) = (Vec::new(), Vec::new());
    let (mut requests, mut reloads) = (0, 0);
    let count = "performance.getEntriesByType('resource').length";
    for _ in 0..DASHBOARD_BLOCKS {
        without.extend(evals_for(&mut c, DASHBOARD_BLOCK_S).await);
        let mut page = Browser::drive(&format!("http://{http}/"), 1400, 1000);
        let shown = page.wait_for(
            "document.querySelectorAll('#procs tbody tr').length > 0 \
             && document.querySelectorAll('#tree summary').length > 0",
            Duration::from_secs(30),
        );
        assert!(shown.is_some(), "the page never showed the node");
        page.eval("performance.clearResourceTimings()");
        for second in 1..=DASHBOARD_BLOCK_S {
            with.extend(evals_for(&mut c, 1).await);
            requests += page.eval(count).as_u64().unwrap_or(0);
            if second % 2 == 0 {
                page.call("Page.reload", json!({}));
                reloads += 1;
            } else {
                page.eval("performance.clearResourceTimings()");
            }
        }
    }
    without.sort();
    with.sort();
    let p50 = |v: &[Duration]| percentile(v, 0.5).as_secs_f64() * 1e6;
    let p99 = |v: &[Duration]| percentile(v, 0.99).as_secs_f64() * 1e6;
    let ratio = p50(&with) / p50(&without);

    // What one poll of each kind costs the server, from a plain HTTP client.
    let client = reqwest::Client::new();
    let mut api_rows = String::new();
    for (what, path, samples) in [
        (
            "`/api/nodes` (status + each node's own report)",
            "/api/nodes",
            200,
        ),
        (
            "`/api/nodes/dash/logs?since=…` (nothing new)",
            "/api/nodes/dash/logs?since=1000000",
            200,
        ),
        (
            "`/api/activity?since=…`",
            "/api/activity?since=1000000",
            200,
        ),
        (
            "`/api/nodes/dash/processes` (absolute)",
            "/api/nodes/dash/processes?sort_by=memory",
            100,
        ),
        (
            "`/api/nodes/dash/tree` (includes a 500 ms mailbox sample)",
            "/api/nodes/dash/tree",
            10,
        ),
    ] {
        let mut timings = Vec::new();
        for _ in 0..samples {
            let started = Instant::now();
            let response = client
                .get(format!("http://{http}{path}"))
                .send()
                .await
                .unwrap();
            assert!(
                response.status().is_success(),
                "{path}: {}",
                response.status()
            );
            response.bytes().await.unwrap();
            timings.push(started.elapsed());
        }
        timings.sort();
        api_rows += &format!(
            "| {what} | {samples} | {:.0} µs | {:.0} µs |\n",
            p50(&timings),
            p99(&timings)
        );
    }
    let section = format!(
        "{DASHBOARD_HEADER} (eval with the page open vs without; {DASHBOARD_BLOCKS} alternating \
         blocks of {DASHBOARD_BLOCK_S} s each)\n\n\
         The page was open in a headless Chromium on the same 2 cores, polling as it does for a \
         person and reloaded every 2 s ({reloads} reloads, {requests} requests during the \
         measured blocks; {} evals with the page, {} without).\n\n\
         | measure | without the page | with the page | ratio | target |\n|---|---|---|---|---|\n\
         | MCP `eval \"1 + 1\"` p50 | {:.0} µs | {:.0} µs | {ratio:.2}× | ≤ 1.10× |\n\
         | MCP `eval \"1 + 1\"` p99 | {:.0} µs | {:.0} µs | {:.2}× | |\n\n\
         | dashboard request (plain HTTP client) | samples | p50 | p99 |\n|---|---|---|---|\n{api_rows}",
        with.len(),
        without.len(),
        p50(&without),
        p50(&with),
        p99(&without),
        p99(&with),
        p99(&with) / p99(&without),
    );
    println!("{section}");
    common::write_bench_section(DASHBOARD_HEADER, &section);
}
