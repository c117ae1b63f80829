//! Where one `eval "1 + 1"` spends its time (run by `scripts/bench.sh eval`, ignored by
//! `cargo test`): each stage of our path timed on its own, beside the floor, all in one run
//! against one demo-fixture node started by a release server.
//!
//! - The floor: a plain second BEAM (`erl -name`, hidden) doing `erpc:call` to the child in a
//!   loop, timed inside that BEAM.
//! - From the same BEAM: the helper's `ping` and `eval` requests over distribution (the helper's
//!   protocol, no Rust on the path).
//! - Inside the child (a module the peer loads into it): `Code.eval_string("1 + 1")` alone, and
//!   the helper's `ping` and `eval` requests from a local process (the helper with no
//!   distribution).
//! - From Rust (this process, a hidden node like the server): `helper::Client::ping` and
//!   `helper::Client::eval` (term encoding, the connection's writer and reader tasks, decoding).
//! - Through the server over TCP with a plain socket client: MCP `ping` (the JSON-RPC line, the
//!   session's loop, the reply), `eval` on a node name nobody has (decode, argument check,
//!   dispatch, the error's encoding; no node), and the whole `eval "1 + 1"`.
//! - The JSON of one `tools/call` request and its reply, decoded and encoded here with rmcp's
//!   types.
//!
//! Writes its own section of `scripts/bench_results.md`.

mod common;

use os_sup_mcp::helper::{Client, EvalRequest};
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const HEADER: &str = "## Where `eval` spends its time";
const WARMUP: usize = 300;
/// Samples of each stage per round; the rounds alternate the stages, so that what else the
/// shared machine does meanwhile falls on all of them alike.
const SAMPLES: usize = 1000;
const ROUNDS: usize = 3;

/// The floor and the node-side stages, compiled and run in a plain `erl` peer; `in_node/1`
/// runs inside the child (loaded there by the peer). Prints one line per stage: its name, then
/// each sample in ns.
const PEER_MODULE: &str = r#"
-module(os_sup_bench_eval).
-export([main/0, in_node/2]).

main() ->
    Child = list_to_atom(os:getenv("BENCH_CHILD")),
    Samples = list_to_integer(os:getenv("BENCH_SAMPLES")),
    Warmup = list_to_integer(os:getenv("BENCH_WARMUP")),
    true = net_kernel:connect_node(Child),
    {Mod, Bin, File} = code:get_object_code(?MODULE),
    {module, Mod} = erpc:call(Child, code, load_binary, [Mod, File, Bin]),
    Helper = {os_sup_helper, Child},
    Eval = eval_request(),
    Rows = [{erpc, time(fun() -> 2 = erpc:call(Child, erlang, '+', [1, 1]) end, Warmup, Samples)},
            {erpc_eval_string,
             time(fun() -> {2, _} = erpc:call(Child, 'Elixir.Code', eval_string, [<<"1 + 1">>])
                  end, Warmup, Samples)},
            {peer_ping, time(fun() -> pong = request(Helper, ping) end, Warmup, Samples)},
            {peer_eval, time(fun() -> {ok, _} = request(Helper, Eval) end, Warmup, Samples)}]
        ++ erpc:call(Child, ?MODULE, in_node, [Warmup, Samples]),
    [io:format("~s~s~n", [Name, [[$\s, integer_to_list(T)] || T <- Ts]]) || {Name, Ts} <- Rows],
    erlang:halt(0).

in_node(Warmup, Samples) ->
    Helper = whereis(os_sup_helper),
    Eval = eval_request(),
    Opts = [{file, <<"eval">>}],
    [{node_eval_string,
      time(fun() -> {2, _} = 'Elixir.Code':eval_string(<<"1 + 1">>, [], Opts) end,
           Warmup, Samples)},
     {node_ping, time(fun() -> pong = request(Helper, ping) end, Warmup, Samples)},
     {node_eval, time(fun() -> {ok, _} = request(Helper, Eval) end, Warmup, Samples)}].

eval_request() ->
    {eval, auto, <<"1 + 1">>, #{timeout_ms => 5000, max_result_bytes => 65536}}.

request(To, Request) ->
    Ref = make_ref(),
    To ! {Ref, self(), Request},
    receive {Ref, Reply} -> Reply after 5000 -> exit(timeout) end.

time(F, Warmup, Samples) ->
    _ = [F() || _ <- lists:seq(1, Warmup)],
    [begin
         T0 = erlang:monotonic_time(nanosecond),
         F(),
         erlang:monotonic_time(nanosecond) - T0
     end || _ <- lists:seq(1, Samples)].
"#;

/// p50 and p99, in µs.
#[derive(Clone, Copy)]
struct Stage {
    p50: f64,
    p99: f64,
}

fn stage(samples: &[Duration]) -> Stage {
    let mut samples = samples.to_vec();
    samples.sort();
    let at = |p: f64| {
        samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)].as_secs_f64() * 1e6
    };
    Stage {
        p50: at(0.5),
        p99: at(0.99),
    }
}

/// Times `$work` (an expression, awaited as it says) [`SAMPLES`] times after [`WARMUP`]; the
/// samples.
macro_rules! timed {
    ($work:expr) => {{
        for _ in 0..WARMUP {
            $work;
        }
        let mut samples = Vec::with_capacity(SAMPLES);
        for _ in 0..SAMPLES {
            let started = Instant::now();
            $work;
            samples.push(started.elapsed());
        }
        samples
    }};
}

/// Compiles [`PEER_MODULE`], runs it in a hidden `erl` peer against `child`, and returns its
/// samples by stage name.
fn peer_stages(child: &str, cookie: &str) -> Vec<(String, Vec<Duration>)> {
    let dir = common::private_dir();
    let src = dir.path().join("os_sup_bench_eval.erl");
    std::fs::write(&src, PEER_MODULE).unwrap();
    let compiled = Command::new("erlc")
        .arg("-o")
        .arg(dir.path())
        .arg(&src)
        .status()
        .expect("erlc is installed");
    assert!(compiled.success(), "the peer's module compiles");
    let name = format!("bench_floor_{}@127.0.0.1", std::process::id());
    let mut cmd = Command::new("erl");
    cmd.args(["-name", &name, "-setcookie", cookie, "-hidden", "-noshell"])
        .arg("-pa")
        .arg(dir.path())
        .args(["-eval", "os_sup_bench_eval:main()"])
        .env("BENCH_CHILD", child)
        .env("BENCH_SAMPLES", SAMPLES.to_string())
        .env("BENCH_WARMUP", WARMUP.to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    common::dies_with_test(&mut cmd);
    let out = cmd.output().expect("erl is installed");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the peer ran: {text}");
    text.lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let name = parts.next()?.to_string();
            let samples = parts
                .map(|ns| Duration::from_nanos(ns.parse().unwrap()))
                .collect();
            Some((name, samples))
        })
        .collect()
}

/// A plain socket client: one pre-written request line per call, the reply line read back
/// whole (its id checked, nothing parsed).
struct Socket {
    read: BufReader<tokio::net::tcp::OwnedReadHalf>,
    write: tokio::net::tcp::OwnedWriteHalf,
    next_id: u64,
    line: String,
}

impl Socket {
    async fn open(addr: &str) -> Self {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (read, write) = stream.into_split();
        let mut socket = Self {
            read: BufReader::new(read),
            write,
            next_id: 0,
            line: String::new(),
        };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "bench", "version": "0"}});
        socket.request("initialize", &init.to_string()).await;
        socket
            .write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await
            .unwrap();
        socket
    }

    /// Sends one request and returns its reply line.
    async fn request(&mut self, method: &str, params: &str) -> &str {
        self.next_id += 1;
        let id = self.next_id;
        let request = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":{params}}}\n"
        );
        self.write.write_all(request.as_bytes()).await.unwrap();
        let want = format!("\"id\":{id}");
        loop {
            self.line.clear();
            let n = self.read.read_line(&mut self.line).await.unwrap();
            assert!(n > 0, "the server closed the connection");
            if self.line.contains(&want) {
                return &self.line;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench.sh eval"]
async fn eval_stages() {
    let server = common::Server::start();
    let mut c = server.client().await;
    c.start_demo("bench").await;
    let who = c
        .eval(
            "bench",
            "Atom.to_string(node()) <> \" \" <> Atom.to_string(:erlang.get_cookie())",
        )
        .await;
    let who = who["value"].as_str().unwrap().trim_matches('"').to_string();
    let (child, cookie) = who.split_once(' ').unwrap();

    // MCP over TCP through the server, a plain socket client.
    let mut socket = Socket::open(&server.addr).await;
    let eval_args = r#"{"name":"eval","arguments":{"name":"bench","code":"1 + 1"}}"#;
    let reply = socket.request("tools/call", eval_args).await.to_string();
    assert!(reply.contains(r#""value":"2""#), "{reply}");
    let unknown = r#"{"name":"eval","arguments":{"name":"nobody","code":"1 + 1"}}"#;
    let refused = socket.request("tools/call", unknown).await.to_string();
    assert!(refused.contains("isError"), "{refused}");
    let client = Client::new(child, cookie);
    client.ping(Duration::from_secs(5)).await.unwrap();
    let request = EvalRequest::new("1 + 1");
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{eval_args}}}"
    );
    let answer: rmcp::model::ServerJsonRpcMessage = serde_json::from_str(&reply).unwrap();
    let mut ours: std::collections::HashMap<&str, Vec<Duration>> = Default::default();
    let mut peer: Vec<(String, Vec<Duration>)> = Vec::new();
    for _ in 0..ROUNDS {
        // MCP over TCP through the server, a plain socket client.
        let mut add = |name, samples: Vec<Duration>| ours.entry(name).or_default().extend(samples);
        add(
            "mcp_eval",
            timed!(socket.request("tools/call", eval_args).await),
        );
        add("mcp_ping", timed!(socket.request("ping", "{}").await));
        add(
            "mcp_unknown",
            timed!(socket.request("tools/call", unknown).await),
        );
        // The helper from Rust, as the server reaches it.
        add(
            "rust_ping",
            timed!(client.ping(Duration::from_secs(5)).await.unwrap()),
        );
        add(
            "rust_eval",
            timed!(assert_eq!(
                client.eval(&request).await.unwrap().unwrap().value,
                "2"
            )),
        );
        // The JSON of one call, with rmcp's types.
        add(
            "decode",
            timed!(serde_json::from_str::<rmcp::model::ClientJsonRpcMessage>(&line).unwrap()),
        );
        add("encode", timed!(serde_json::to_string(&answer).unwrap()));
        // The floor and the node's side, timed inside BEAMs (blocking: its own thread).
        let (child, cookie) = (child.to_string(), cookie.to_string());
        let round = tokio::task::spawn_blocking(move || peer_stages(&child, &cookie))
            .await
            .unwrap();
        for (name, samples) in round {
            match peer.iter_mut().find(|(n, _)| *n == name) {
                Some((_, all)) => all.extend(samples),
                None => peer.push((name, samples)),
            }
        }
    }
    let ours = |name: &str| stage(&ours[name]);
    let (mcp_eval, mcp_ping, mcp_unknown) =
        (ours("mcp_eval"), ours("mcp_ping"), ours("mcp_unknown"));
    let (rust_ping, rust_eval) = (ours("rust_ping"), ours("rust_eval"));
    let (decode, encode) = (ours("decode"), ours("encode"));
    let get = |name: &str| {
        peer.iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| stage(s))
            .unwrap_or_else(|| panic!("the peer measured {name}: {}", peer.len()))
    };
    let floor = get("erpc");
    let rows: Vec<(String, Stage)> = vec![
        (
            "floor: `erpc:call(Child, erlang, '+', [1, 1])` from a plain BEAM".into(),
            floor,
        ),
        (
            "`erpc:call(Child, 'Elixir.Code', eval_string, [<<\"1 + 1\">>])` from the BEAM".into(),
            get("erpc_eval_string"),
        ),
        (
            "in the child: `Code.eval_string(\"1 + 1\")` alone (evaluation)".into(),
            get("node_eval_string"),
        ),
        (
            "in the child: helper `ping` from a local process".into(),
            get("node_ping"),
        ),
        (
            "in the child: helper `eval` from a local process (helper queue, eval, render, reply)"
                .into(),
            get("node_eval"),
        ),
        (
            "from the BEAM: helper `ping` over distribution".into(),
            get("peer_ping"),
        ),
        (
            "from the BEAM: helper `eval` over distribution".into(),
            get("peer_eval"),
        ),
        (
            "from Rust: `helper::Client::ping` (dist send, reply)".into(),
            rust_ping,
        ),
        (
            "from Rust: `helper::Client::eval` (encode, dist send, helper, reply, decode)".into(),
            rust_eval,
        ),
        (
            "JSON: decode one `tools/call` request (rmcp types)".into(),
            decode,
        ),
        ("JSON: encode its `eval` result (rmcp types)".into(), encode),
        (
            "MCP `ping` over TCP (line, session loop, reply)".into(),
            mcp_ping,
        ),
        (
            "MCP `eval` of a node nobody has over TCP (decode, dispatch, error reply)".into(),
            mcp_unknown,
        ),
        ("MCP `eval \"1 + 1\"` over TCP (whole)".into(), mcp_eval),
    ];
    let mut table = String::from("| stage | p50 | p99 | p50 / floor |\n|---|---|---|---|\n");
    for (label, s) in &rows {
        table += &format!(
            "| {label} | {:.1} µs | {:.1} µs | {:.2}× |\n",
            s.p50,
            s.p99,
            s.p50 / floor.p50
        );
    }
    let section = format!(
        "{HEADER} (demo fixture, Elixir; {} samples of each stage in {ROUNDS} alternating \
         rounds, one run; release build)\n\n\
         Each stage timed on its own in the same run: the BEAM rows inside BEAMs \
         (`erlang:monotonic_time`), the Rust rows in the bench process, the MCP rows with a \
         plain socket client.\n\n{table}\n\
         MCP `eval \"1 + 1\"` over TCP is {:.2}× the floor (target ≤ 2×).\n",
        SAMPLES * ROUNDS,
        mcp_eval.p50 / floor.p50
    );
    println!("{section}");
    common::write_bench_section(HEADER, &section);
}
