//! Bad input: more than 10 000 malformed or hostile JSON-RPC messages over TCP (seeded, so a
//! failure replays), hostile tool arguments and timeouts. The server never crashes, answers
//! every well-formed request (or closes only that connection), and a well-behaved session on
//! a real fixture node keeps getting correct answers throughout.

mod common;
mod hardening;

use common::{demo_app, text, Client, Server};
use hardening::{server_alive, Raw, Seen};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SEED: u64 = 0x05_5C_0F_F3;
const WORKERS: u64 = 6;
const PER_WORKER: usize = 1800;
const CHUNK: usize = 150;
const PRE_INIT_CONNECTIONS: usize = 60;
const NODE: &str = "fz";

/// Node names and strings nobody should trust; never the fixture node's name.
fn hostile_string(rng: &mut StdRng) -> String {
    let pool = [
        "../../etc/passwd".to_string(),
        "a/b".into(),
        "..".into(),
        ".".into(),
        "a b".into(),
        "".into(),
        "\u{0}".into(),
        "ü✓\u{202e}".into(),
        "fz/..".into(),
        "-rf".into(),
        "$(id)".into(),
        "name\nnewline".into(),
        "x".repeat(10 * 1024),
        "ghost".into(),
    ];
    pool[rng.gen_range(0..pool.len())].clone()
}

/// A JSON value whose type is none of `allowed` (JSON-schema type names).
fn wrong_value(rng: &mut StdRng, allowed: &[&str]) -> Value {
    let candidates = [
        ("string", json!("wrong")),
        ("integer", json!(-1)),
        ("number", json!(1.5)),
        ("boolean", json!(true)),
        ("array", json!([1, {"a": null}])),
        ("object", json!({"nested": {"x": [1]}})),
    ];
    let fits: Vec<&Value> = candidates
        .iter()
        .filter(|(t, _)| !(allowed.contains(t) || *t == "integer" && allowed.contains(&"number")))
        .map(|(_, v)| v)
        .collect();
    fits[rng.gen_range(0..fits.len())].clone()
}

fn schema_types(prop: &Value) -> Vec<&str> {
    match &prop["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(|t| t.as_str()).collect(),
        // `$ref` / `anyOf` (enums): treat as a string.
        _ => vec!["string"],
    }
}

/// A valid-typed (but hostile) value for a property.
fn typed_value(rng: &mut StdRng, prop: &Value) -> Value {
    match schema_types(prop).first().copied() {
        Some("integer") | Some("number") => json!(rng.gen_range(0..5)),
        Some("boolean") => json!(false),
        Some("array") => json!([hostile_string(rng)]),
        Some("object") => json!({}),
        _ => json!(hostile_string(rng)),
    }
}

/// `arguments` for a tools/call of `tool` that must be refused: not an object, a required
/// argument missing, or one argument of the wrong type (hostile numbers included).
fn bad_arguments(rng: &mut StdRng, tool: &Value) -> Value {
    let name = tool["name"].as_str().unwrap();
    let schema = &tool["inputSchema"];
    let props = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let required: Vec<String> = schema["required"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let mut args = serde_json::Map::new();
    for r in &required {
        args.insert(r.clone(), typed_value(rng, &props[r]));
    }
    match rng.gen_range(0..4) {
        0 => [json!("args"), json!(5), json!([1, 2]), json!(true)][rng.gen_range(0..4)].clone(),
        1 if !required.is_empty() => {
            let drop = &required[rng.gen_range(0..required.len())];
            args.remove(drop);
            Value::Object(args)
        }
        _ if !props.is_empty() => {
            // `mix` runs a task: always break the task itself.
            let keys: Vec<&String> = props.keys().collect();
            let key = if name == "mix" {
                "task".to_string()
            } else {
                keys[rng.gen_range(0..keys.len())].clone()
            };
            let types = schema_types(&props[&key]);
            let value = if types.contains(&"integer") && rng.gen_bool(0.5) {
                [json!(-1), json!(1.5), json!("12"), big(), json!(-9.9e300)][rng.gen_range(0..5)]
                    .clone()
            } else {
                wrong_value(rng, &types)
            };
            args.insert(key, value);
            Value::Object(args)
        }
        _ => json!("no properties to break"),
    }
}

fn garbage(rng: &mut StdRng, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| rng.gen::<u8>())
        .map(|b| if b == b'\n' { b' ' } else { b })
        .collect()
}

/// One hostile message (without the newline).
fn hostile(rng: &mut StdRng, tools: &[Value], id: u64) -> Vec<u8> {
    let valid = |method: &str, params: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
    };
    let s = match rng.gen_range(0..22) {
        0 => {
            let len = rng.gen_range(1..300);
            return garbage(rng, len);
        }
        1 => {
            // truncated JSON
            let full = valid("tools/call", json!({"name": "status", "arguments": {}}));
            let cut = rng.gen_range(1..full.len());
            full[..cut].to_string()
        }
        2 => [
            "{", "}", "[", "]", "nul", "tru", "\"open", "{\"a\":}", "{,}", "{'a':1}", "NaN", "-",
            "01",
        ][rng.gen_range(0..13)]
        .to_string(),
        3 => {
            // id of a wrong type
            let bad_id = [
                json!({"a": 1}),
                json!([1]),
                json!(true),
                json!(1.5),
                json!(null),
            ][rng.gen_range(0..5)]
            .clone();
            json!({"jsonrpc": "2.0", "id": bad_id, "method": "ping"}).to_string()
        }
        4 => {
            let method = [json!(5), json!(null), json!(["ping"]), json!({"m": 1})]
                [rng.gen_range(0..4)]
            .clone();
            json!({"jsonrpc": "2.0", "id": id, "method": method}).to_string()
        }
        5 => {
            let params = [json!("params"), json!(7), json!([1, 2]), json!(true)]
                [rng.gen_range(0..4)]
            .clone();
            let method = ["tools/call", "tools/list", "ping", "initialize"][rng.gen_range(0..4)];
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
        }
        6 => {
            // missing or wrong envelope fields
            [
                json!({"id": id, "method": "ping"}),
                json!({"jsonrpc": "2.0", "id": id}),
                json!({"jsonrpc": "1.0", "id": id, "method": "ping"}),
                json!({"jsonrpc": 2, "id": id, "method": "ping"}),
                json!({"jsonrpc": "2.0", "id": id, "result": {}}),
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": "x"}}),
                json!({}),
                json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "eval"}}),
            ][rng.gen_range(0..8)]
            .to_string()
        }
        7 => {
            let method: String = (0..rng.gen_range(1..40))
                .map(|_| rng.gen_range('!'..'~'))
                .collect();
            valid(&method, json!({}))
        }
        8 => valid(
            "tools/call",
            json!({"name": hostile_string(rng), "arguments": {"name": NODE}}),
        ),
        9..=14 => {
            let tool = &tools[rng.gen_range(0..tools.len())];
            valid(
                "tools/call",
                json!({"name": tool["name"], "arguments": bad_arguments(rng, tool)}),
            )
        }
        15 => {
            // huge numbers
            [
                r#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#.to_string(),
                r#"{"jsonrpc":"2.0","id":1180591620717411303424,"method":"ping"}"#.to_string(),
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"eval","arguments":{{"name":"ghost","code":"1","timeout_ms":1e400}}}}}}"#),
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"eval","arguments":{{"name":"ghost","code":"1","timeout_ms":1180591620717411303424}}}}}}"#),
                r#"{"jsonrpc":"2.0","id":-1e308,"method":"ping"}"#.to_string(),
            ][rng.gen_range(0..5)]
            .clone()
        }
        16 => {
            // deep nesting, bare or inside a well-formed envelope
            let depth = [1000, 10_000, 100_000][rng.gen_range(0..3)];
            if rng.gen_bool(0.5) {
                "[".repeat(depth)
            } else {
                let open = "{\"a\":".repeat(depth);
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{open}1"#)
            }
        }
        17 => {
            // invalid UTF-8 and NUL bytes inside otherwise valid JSON
            let mut bytes = valid(
                "tools/call",
                json!({"name": "eval", "arguments": {"name": "ghost", "code": "XX"}}),
            )
            .into_bytes();
            let at = bytes.windows(2).position(|w| w == b"XX").unwrap();
            let bad: &[u8] =
                [&b"\xff\xfe"[..], b"\xc3\x28", b"\x00\x00", b"\xed\xa0\x80"][rng.gen_range(0..4)];
            bytes.splice(at..at + 2, bad.iter().copied());
            return bytes;
        }
        18 => {
            // batches (not part of MCP 2025-06-18)
            let n = rng.gen_range(0..4);
            let items: Vec<Value> = (0..n)
                .map(|i| json!({"jsonrpc": "2.0", "id": format!("b{id}-{i}"), "method": "ping"}))
                .collect();
            Value::Array(items).to_string()
        }
        19 => {
            // string ids and other well-formed requests
            let method = [
                "ping",
                "tools/list",
                "resources/list",
                "prompts/list",
                "logging/setLevel",
                "initialize",
                "completion/complete",
            ][rng.gen_range(0..7)];
            json!({"jsonrpc": "2.0", "id": format!("s{id}"), "method": method, "params": {}})
                .to_string()
        }
        20 => {
            // hostile notifications
            let method = [
                "notifications/cancelled",
                "notifications/initialized",
                "notifications/progress",
                "notifications/x",
            ][rng.gen_range(0..4)];
            json!({"jsonrpc": "2.0", "method": method, "params": {"requestId": id, "progress": "x"}}).to_string()
        }
        _ => {
            let mut b = b"\x00".repeat(rng.gen_range(1..50));
            b.extend(garbage(rng, 10));
            return b;
        }
    };
    s.into_bytes()
}

/// The id a correct server must answer, if `msg` is a well-formed request.
fn expected_id(msg: &[u8]) -> Option<Value> {
    let v: Value = serde_json::from_slice(msg).ok()?;
    let obj = v.as_object()?;
    let id = obj.get("id")?;
    let method = obj.get("method")?.as_str()?;
    let params_ok = obj.get("params").is_none_or(|p| p.is_object());
    let id_ok = id.is_string() || id.as_u64().is_some();
    (obj.get("jsonrpc")? == "2.0" && id_ok && params_ok && !method.starts_with("notifications/"))
        .then(|| id.clone())
}

async fn tool_list(addr: &str) -> Vec<Value> {
    let mut c = Client::connect(addr).await;
    let tools = c.request("tools/list", json!({})).await;
    tools["result"]["tools"].as_array().cloned().expect("tools")
}

struct Counts {
    answered: AtomicUsize,
    closed: AtomicUsize,
}

/// One connection's worth of hostile messages, checked chunk by chunk with a sentinel ping.
async fn fuzz_worker(addr: String, tools: Arc<Vec<Value>>, worker: u64, counts: Arc<Counts>) {
    let mut rng = StdRng::seed_from_u64(SEED ^ worker);
    let mut conn = Raw::connect(&addr).await;
    let mut sent = 0;
    let mut chunk_no = 0u64;
    while sent < PER_WORKER {
        let mut expected = Vec::new();
        let mut wire = Vec::new();
        for _ in 0..CHUNK.min(PER_WORKER - sent) {
            let id = worker * 1_000_000 + sent as u64;
            let msg = hostile(&mut rng, &tools, id);
            if let Some(id) = expected_id(&msg) {
                expected.push(id);
            }
            wire.extend_from_slice(&msg);
            wire.push(b'\n');
            sent += 1;
        }
        chunk_no += 1;
        let sentinel = json!(format!("sentinel-{worker}-{chunk_no}"));
        wire.extend(
            json!({"jsonrpc": "2.0", "id": sentinel, "method": "ping"})
                .to_string()
                .bytes(),
        );
        wire.push(b'\n');
        let start = conn.received.len();
        let ok = conn.send(&wire).await
            && matches!(
                conn.wait_for(&sentinel, Duration::from_secs(60)).await,
                Seen::Reply(_)
            );
        if ok {
            // Every well-formed request of the chunk is answered (replies may pass the ping).
            for id in &expected {
                let got = conn.received[start..]
                    .iter()
                    .any(|m| m.get("id") == Some(id));
                if !got {
                    match conn.wait_for(id, Duration::from_secs(30)).await {
                        Seen::Reply(_) => {}
                        Seen::Closed => break,
                    }
                }
            }
            counts.answered.fetch_add(expected.len(), Ordering::Relaxed);
        } else {
            counts.closed.fetch_add(1, Ordering::Relaxed);
            conn = Raw::connect(&addr).await;
        }
    }
}

/// A well-behaved session that must get correct answers the whole time.
async fn good_session(addr: String, stop: Arc<AtomicBool>) -> usize {
    let mut c = Client::connect(&addr).await;
    let mut rounds = 0;
    let mut rng = StdRng::seed_from_u64(SEED);
    while !stop.load(Ordering::Relaxed) || rounds < 5 {
        let (a, b) = (
            rng.gen_range(0..1_000_000i64),
            rng.gen_range(0..1_000_000i64),
        );
        let answer = tokio::time::timeout(Duration::from_secs(30), async {
            let status = c.node_status(NODE).await;
            assert_eq!(status["state"], "running", "{status}");
            c.eval(NODE, &format!("{a} + {b}")).await
        })
        .await
        .expect("the good session is answered within 30 s");
        assert_eq!(answer["value"], (a + b).to_string(), "{answer}");
        rounds += 1;
    }
    rounds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_hostile_messages() {
    let started = Instant::now();
    let mut server = Server::start().reaping();
    let mut c = server.client().await;
    c.start_demo(NODE).await;
    let tools = Arc::new(tool_list(&server.addr).await);
    assert!(tools.len() >= 5, "{tools:?}");

    let stop = Arc::new(AtomicBool::new(false));
    let good = tokio::spawn(good_session(server.addr.clone(), stop.clone()));
    let counts = Arc::new(Counts {
        answered: AtomicUsize::new(0),
        closed: AtomicUsize::new(0),
    });

    // Hostile messages before `initialize`: answered, ignored or closed, never a hang.
    let addr = server.addr.clone();
    let pre_init = tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(SEED ^ 0xdead);
        let no_tools = vec![
            json!({"name": "status", "inputSchema": {"properties": {"name": {"type": "string"}}}}),
        ];
        for i in 0..PRE_INIT_CONNECTIONS {
            let mut raw = Raw::connect_bare(&addr).await;
            let mut wire = hostile(&mut rng, &no_tools, i as u64);
            wire.push(b'\n');
            wire.extend(
                json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "pre", "version": "0"}}})
                .to_string()
                .bytes(),
            );
            wire.push(b'\n');
            if raw.send(&wire).await {
                let _ = raw.wait_for(&json!("init"), Duration::from_secs(30)).await;
            }
        }
    });

    // A 20 MB line (the cap is 4 MB): dropped, or only that connection closed.
    let addr = server.addr.clone();
    let huge = tokio::spawn(async move {
        let mut raw = Raw::connect(&addr).await;
        let mut line =
            br#"{"jsonrpc":"2.0","id":"huge","method":"ping","params":{"pad":""#.to_vec();
        line.extend(std::iter::repeat_n(b'x', 20 * 1024 * 1024));
        line.extend(b"\"}}\n{\"jsonrpc\":\"2.0\",\"id\":\"after\",\"method\":\"ping\"}\n");
        let outcome = if raw.send(&line).await {
            raw.wait_for(&json!("after"), Duration::from_secs(60)).await
        } else {
            Seen::Closed
        };
        assert!(
            !raw.received
                .iter()
                .any(|m| m["id"] == "huge" && m.get("result").is_some()),
            "a 20 MB line was accepted"
        );
        outcome
    });

    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            tokio::spawn(fuzz_worker(
                server.addr.clone(),
                tools.clone(),
                w,
                counts.clone(),
            ))
        })
        .collect();
    for w in workers {
        tokio::time::timeout(Duration::from_secs(240), w)
            .await
            .expect("fuzz worker within 240 s")
            .expect("fuzz worker");
    }
    tokio::time::timeout(Duration::from_secs(120), pre_init)
        .await
        .expect("pre-init bounded")
        .unwrap();
    let huge_outcome = tokio::time::timeout(Duration::from_secs(120), huge)
        .await
        .expect("huge bounded")
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let rounds = tokio::time::timeout(Duration::from_secs(120), good)
        .await
        .expect("good session bounded")
        .unwrap();

    let total = WORKERS as usize * PER_WORKER + PRE_INIT_CONNECTIONS + 1;
    assert!(total >= 10_000);
    assert!(
        server_alive(&mut server),
        "the server died under hostile input"
    );
    let mut fresh = server.client().await;
    assert_eq!(fresh.node_status(NODE).await["state"], "running");
    assert_eq!(fresh.eval(NODE, "1 + 1").await["value"], "2");
    eprintln!(
        "fuzz: {total} hostile messages, {} well-formed requests answered, {} connections closed by the server, \
         20 MB line: {huge_outcome:?}, good-session rounds: {rounds}, crashes: 0, took {:?}",
        counts.answered.load(Ordering::Relaxed),
        counts.closed.load(Ordering::Relaxed),
        started.elapsed()
    );
}

/// JSON-RPC 2.0: a line that is not JSON gets `-32700 Parse error` with `id: null`, and an
/// invalid request gets `-32600` with `id: null`.
#[tokio::test]
async fn parse_errors_are_answered_per_json_rpc() {
    let server = Server::start();
    let mut raw = Raw::connect(&server.addr).await;
    for bad in [&b"{"[..], b"not json", b"\xff\xfe", b"[[[["] {
        let mut wire = bad.to_vec();
        wire.extend(b"\n{\"jsonrpc\":\"2.0\",\"id\":\"probe\",\"method\":\"ping\"}\n");
        let start = raw.received.len();
        assert!(raw.send(&wire).await);
        assert!(matches!(
            raw.wait_for(&json!("probe"), Duration::from_secs(10)).await,
            Seen::Reply(_)
        ));
        let parse_error = raw.received[start..]
            .iter()
            .find(|m| m["error"]["code"] == -32700);
        assert!(
            parse_error.is_some_and(|m| m.get("id") == Some(&Value::Null)),
            "no -32700 parse error (with id null) for {:?}; got {:?}",
            String::from_utf8_lossy(bad),
            &raw.received[start..]
        );
    }
    assert!(raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":\"probe2\",\"method\":\"ping\"}\n").await);
    let start = raw.received.len();
    assert!(matches!(
        raw.wait_for(&json!("probe2"), Duration::from_secs(10))
            .await,
        Seen::Reply(_)
    ));
    let invalid = raw.received[start..]
        .iter()
        .find(|m| m["error"]["code"] == -32600);
    assert!(
        invalid.is_some_and(|m| m.get("id") == Some(&Value::Null)),
        "an invalid request needs -32600 with id null: {:?}",
        &raw.received[start..]
    );
}

/// Names with `/`, `..`, spaces, NUL and 10 KB; paths that are files, symlinks and unreadable
/// directories; negative and huge timeouts: each a clear error (or a clamp), never a crash.
#[tokio::test]
async fn hostile_tool_arguments_get_clear_answers() {
    let mut server = Server::start().reaping();
    let mut c = server.client().await;
    c.start_demo(NODE).await;

    let long = "n".repeat(10 * 1024);
    for name in [
        "a/b",
        "..",
        "../x",
        "a b",
        " ",
        "",
        "x\u{0}y",
        long.as_str(),
        "-rf",
        "ü",
    ] {
        let err = c
            .err("start", json!({"name": name, "path": demo_app()}))
            .await;
        assert!(!err.is_empty() && err.len() < 20_000, "{name:?}: {err}");
        for tool in ["eval", "status", "stop", "restart", "supervision_tree"] {
            let result = c.call(tool, json!({"name": name, "code": "1"})).await;
            if tool == "status" && result["isError"] != json!(true) {
                continue;
            }
            assert_eq!(result["isError"], json!(true), "{tool} {name:?}: {result}");
            assert!(!text(&result).is_empty(), "{tool} {name:?}: {result}");
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "not a project").unwrap();
    let link_to_file = dir.path().join("link_to_file");
    std::os::unix::fs::symlink(&file, &link_to_file).unwrap();
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    let looped = dir.path().join("loop");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::write(locked.join("mix.exs"), "raise \"never evaluated\"").unwrap();
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    let long_path = format!("/{}", "d/".repeat(3000));
    let paths = [
        file.clone(),
        link_to_file,
        dangling,
        looped,
        locked.clone(),
        long_path.into(),
        "relative/..".into(),
    ];
    for (i, path) in paths.iter().enumerate() {
        let result = tokio::time::timeout(
            Duration::from_secs(90),
            c.call(
                "start",
                json!({"name": format!("p{i}"), "path": path, "start_timeout_ms": 20000}),
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("start with {path:?} answered within 90 s"));
        // Root may read a chmod 000 directory: then its mix.exs raises and the start fails.
        assert_eq!(result["isError"], json!(true), "{path:?}: {result}");
        assert!(!text(&result).is_empty());
    }
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    // Timeouts: a clear error or a clamp.
    for timeout in [
        json!(-1),
        json!(1e12),
        json!(1.5),
        json!("100"),
        big(),
        json!(null),
    ] {
        let result = c
            .call(
                "eval",
                json!({"name": NODE, "code": "1 + 1", "timeout_ms": timeout}),
            )
            .await;
        assert_eq!(
            result["isError"],
            json!(true),
            "timeout_ms {timeout}: {result}"
        );
        assert!(!text(&result).is_empty());
    }
    for timeout in [0u64, 1, 1_000_000_000_000, u64::MAX] {
        let result = c
            .call(
                "eval",
                json!({"name": NODE, "code": "1 + 1", "timeout_ms": timeout}),
            )
            .await;
        let t = text(&result);
        assert!(
            t == "2" || t.starts_with("timeout error"),
            "timeout_ms {timeout}: {result}"
        );
    }
    for (tool, args) in [
        ("wait_ready", json!({"name": NODE, "timeout_ms": -1})),
        ("wait_ready", json!({"name": NODE, "timeout_ms": 1e12})),
        (
            "get_state",
            json!({"name": NODE, "pid": "DemoApp.Counter", "timeout_ms": -1}),
        ),
        (
            "start",
            json!({"name": "t", "path": demo_app(), "start_timeout_ms": -1}),
        ),
        (
            "start",
            json!({"name": "t", "path": demo_app(), "max_restarts": -1}),
        ),
        (
            "start",
            json!({"name": "t", "path": demo_app(), "restart_period_ms": 1e12}),
        ),
    ] {
        let result = c.call(tool, args.clone()).await;
        assert_eq!(result["isError"], json!(true), "{tool} {args}: {result}");
    }
    for (tool, args) in [
        ("wait_ready", json!({"name": NODE, "timeout_ms": u64::MAX})),
        (
            "get_state",
            json!({"name": NODE, "pid": "DemoApp.Counter", "timeout_ms": u64::MAX}),
        ),
        (
            "get_state",
            json!({"name": NODE, "pid": "DemoApp.Counter", "timeout_ms": 0}),
        ),
    ] {
        let result = tokio::time::timeout(Duration::from_secs(30), c.call(tool, args.clone()))
            .await
            .unwrap_or_else(|_| panic!("{tool} {args} answered within 30 s"));
        assert!(!text(&result).is_empty(), "{tool} {args}: {result}");
    }
    // A 10 KB source of garbage is a syntax error; the node is fine afterwards.
    let junk = ")(".repeat(5 * 1024);
    let err = c.err("eval", json!({"name": NODE, "code": junk})).await;
    assert!(err.contains("error"), "{err}");
    assert!(server_alive(&mut server));
    assert_eq!(c.eval(NODE, "1 + 1").await["value"], "2");
}

/// 2^70 as serde_json reads it (an f64: it does not fit in an u64).
fn big() -> Value {
    serde_json::from_str("1180591620717411303424").unwrap()
}
