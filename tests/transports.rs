//! Transports and access: Streamable HTTP with auth and Origin checks, `/health`, the Unix
//! socket listener, `--read-only`, and refusing to expose code execution without auth.

mod common;

use common::{wait_until, Server};
use serde_json::{json, Value};
use std::process::Command;

const TOKEN: &str = "s3cret-token-for-tests";

/// One JSON-RPC request over Streamable HTTP; returns (status, session id, message).
async fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, Option<String>, Option<Value>) {
    let mut request = http
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("MCP-Protocol-Version", "2025-06-18")
        .json(&body);
    if let Some(session) = session {
        request = request.header("Mcp-Session-Id", session);
    }
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.expect("HTTP request");
    let status = response.status().as_u16();
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let text = response.text().await.unwrap_or_default();
    // The answer is JSON or a server-sent event stream carrying it.
    let message = serde_json::from_str(&text).ok().or_else(|| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("id").is_some())
    });
    (status, session, message)
}

/// The JSON body of a GET of `url`.
async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    let response = http.get(url).send().await.unwrap();
    response.json().await.unwrap()
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "tests", "version": "0"}}})
}

#[tokio::test]
async fn streamable_http_with_token_origin_checks_and_health() {
    let server = Server::start_with(&["--http", "127.0.0.1:0", "--token", TOKEN]);
    let base = format!("http://{}", server.logged("http"));
    let http = reqwest::Client::new();
    let url = format!("{base}/mcp");
    let bearer = format!("Bearer {TOKEN}");

    let health = get_json(&http, &format!("{base}/health")).await;
    assert_eq!(health["status"], "ok");
    assert!(health["uptime_ms"].is_number());
    assert!(!health.to_string().contains(TOKEN));

    let (status, _, _) = post(&http, &url, None, &[], initialize()).await;
    assert_eq!(status, 401, "no token");
    let (status, _, _) = post(
        &http,
        &url,
        None,
        &[("Authorization", "Bearer wrong")],
        initialize(),
    )
    .await;
    assert_eq!(status, 401, "wrong token");
    let evil = [
        ("Authorization", bearer.as_str()),
        ("Origin", "http://evil.example"),
    ];
    let (status, _, _) = post(&http, &url, None, &evil, initialize()).await;
    assert_eq!(status, 403, "foreign Origin");

    let auth = [("Authorization", bearer.as_str())];
    let (status, session, init) = post(&http, &url, None, &auth, initialize()).await;
    assert_eq!(status, 200);
    assert_eq!(init.unwrap()["result"]["serverInfo"]["name"], "os_sup_mcp");
    let session = session.expect("a session id");
    let notified = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(&http, &url, Some(&session), &auth, notified).await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "status", "arguments": {}}});
    let (status, _, reply) = post(&http, &url, Some(&session), &auth, call).await;
    assert_eq!(status, 200);
    let reply = reply.unwrap();
    assert!(
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("no nodes"),
        "{reply}"
    );
    let local = [
        ("Authorization", bearer.as_str()),
        ("Origin", "http://localhost:3000"),
    ];
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let (status, _, tools) = post(&http, &url, Some(&session), &local, list).await;
    assert_eq!(status, 200, "a local Origin is fine");
    assert!(tools.unwrap()["result"]["tools"].as_array().unwrap().len() > 20);

    let health = get_json(&http, &format!("{base}/health")).await;
    assert!(
        health["sessions"]["http"].as_u64().unwrap() >= 1,
        "{health}"
    );
}

#[tokio::test]
async fn unix_socket_listener_is_private() {
    use std::os::unix::fs::PermissionsExt;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("os_sup.sock");
    let listen = format!("unix:{}", path.display());
    let server = Server::start_with(&["--listen", &listen]);
    assert_eq!(server.addr, listen);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let stream = tokio::net::UnixStream::connect(&path).await.unwrap();
    let (read, mut write) = stream.into_split();
    let mut lines = tokio::io::BufReader::new(read).lines();
    let requests = format!(
        "{}\n{}\n{}\n",
        initialize(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "status", "arguments": {}}})
    );
    write.write_all(requests.as_bytes()).await.unwrap();
    let mut answered = 0;
    while answered < 2 {
        let line = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message.get("id").is_some() {
            answered += 1;
            assert!(message.get("result").is_some(), "{message}");
        }
    }
    drop(server);
    assert!(!path.exists(), "the socket is removed on shutdown");
}

#[tokio::test]
async fn read_only_offers_only_tools_that_change_nothing() {
    let server = Server::start_with(&["--read-only"]);
    let mut c = server.client().await;
    let names = c.tool_names().await;
    for offered in [
        "status",
        "supervision_tree",
        "processes",
        "get_state",
        "logs",
    ] {
        assert!(
            names.iter().any(|n| n == offered),
            "{offered} missing: {names:?}"
        );
    }
    for refused in [
        "eval",
        "start",
        "stop",
        "restart",
        "mix",
        "recompile",
        "trace",
        "system_monitor",
        "attach",
        "remove",
    ] {
        assert!(
            !names.iter().any(|n| n == refused),
            "{refused} offered: {names:?}"
        );
        let call = c
            .request(
                "tools/call",
                json!({"name": refused, "arguments": {"name": "x"}}),
            )
            .await;
        assert!(call.get("error").is_some(), "{refused} callable: {call}");
    }
}

#[test]
fn exposing_code_execution_without_auth_is_refused() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_os_sup_mcp"))
            .args(args)
            .output()
            .expect("run the server")
    };
    let tcp = run(&["--listen", "0.0.0.0:0"]);
    assert_eq!(tcp.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&tcp.stderr).contains("--allow-insecure"));
    let http = run(&["--listen", "127.0.0.1:0", "--http", "0.0.0.0:0"]);
    assert_eq!(http.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&http.stderr).contains("--token"));
}

#[tokio::test]
async fn caps_are_enforced_with_clear_errors() {
    use tokio::io::AsyncBufReadExt;
    let server = Server::start_with(&["--max-sessions", "1", "--max-nodes", "1"]);
    let mut c = server.client().await;
    // A second session is refused with a reason, not left hanging.
    let stream = tokio::net::TcpStream::connect(&server.addr).await.unwrap();
    let mut lines = tokio::io::BufReader::new(stream).lines();
    let refused = tokio::time::timeout(std::time::Duration::from_secs(10), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(refused.contains("server busy"), "{refused}");

    c.start_erl("only").await;
    let full = c
        .err(
            "start",
            json!({"name": "more", "command": ["erl", "-noshell"]}),
        )
        .await;
    assert!(full.contains("--max-nodes"), "{full}");
    let huge = "1".repeat(2 * 1024 * 1024);
    let big = c.err("eval", json!({"name": "only", "code": huge})).await;
    assert!(big.contains("limit"), "{big}");
}

/// A server whose stderr has no reader any more (a closed terminal, a log pipe that exited)
/// still answers and still stops on SIGTERM: a log line it cannot write is lost, nothing else
/// (the logger's own error report panicked every task that logged, the signal handler too).
#[tokio::test]
async fn a_server_whose_stderr_is_gone_answers_and_stops_on_sigterm() {
    use std::io::BufRead;
    use std::process::Stdio;
    let dir = common::private_dir();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_os_sup_mcp"));
    cmd.args(["--listen", "127.0.0.1:0", "--state-dir"])
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    common::dies_with_test(&mut cmd);
    let mut server = cmd.spawn().expect("spawn server");
    let mut stderr = std::io::BufReader::new(server.stderr.take().expect("stderr"));
    let addr = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).expect("read") > 0,
            "no address logged"
        );
        if let Some(addr) = line.split("addr=").nth(1) {
            break addr.split_whitespace().next().unwrap_or("").to_string();
        }
    };
    drop(stderr);
    for _ in 0..2 {
        let mut c = common::Client::connect(&addr).await;
        let listed = c.ok("status", json!({})).await;
        assert!(listed["nodes"].is_array(), "{listed}");
    }
    common::kill(server.id(), libc::SIGTERM);
    let _ = wait_until(
        std::time::Duration::from_secs(10),
        "the server's exit after SIGTERM",
        async || server.try_wait().expect("wait"),
        Option::is_some,
    )
    .await;
}
