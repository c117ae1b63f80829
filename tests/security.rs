//! Safe by default: what a web page, another local user or a read-only client can make the
//! server do. Cross-protocol requests on the stream transports, HTTP Host/Origin/token rules on
//! a wildcard bind, read-only without `attach`, secrets kept out of tool arguments, a private
//! state directory, and the per-node eval cap.

mod common;

use common::erl::ErlNode;

use common::{demo_node, text, wait_until, Client, Server};
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The exact request a web page sends with `fetch(url, {method: "POST", mode: "no-cors",
/// body})`: no preflight, and its body lines arrive after the HTTP header lines.
fn cross_protocol_post(marker: &std::path::Path) -> Vec<u8> {
    let body = format!(
        "{}\n{}\n{}\n",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "evil", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "start",
            "arguments": {"name": "pwn", "command": ["sh", "-c", format!("touch {}", marker.display())]}}}),
    );
    format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1:9100\r\nOrigin: http://evil.example\r\n\
         Content-Type: text/plain;charset=UTF-8\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Writes `bytes` and reads until the server closes; returns what it sent back.
async fn send_and_read_to_close<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    bytes: &[u8],
) -> String {
    stream.write_all(bytes).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("the server closes a connection that does not speak JSON-RPC")
        .ok();
    String::from_utf8_lossy(&answer).into_owned()
}

async fn assert_nothing_started(c: &mut Client, marker: &std::path::Path) {
    // Clock: a started `sh` would have run by now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!marker.exists(), "the page's command ran");
    let status = c.ok("status", json!({})).await;
    assert_eq!(status["nodes"], json!([]), "{status}");
}

#[tokio::test]
async fn cross_protocol_requests_are_closed_unserved_on_tcp_and_unix() {
    let dir = common::private_dir();
    let marker = dir.path().join("pwned");

    let server = Server::start();
    let mut c = server.client().await;
    let probes: [&[u8]; 4] = [
        &cross_protocol_post(&marker),
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"OPTIONS * HTTP/1.1\r\n\r\n",
        // A TLS ClientHello starts with 0x16 0x03 and has no newline.
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    ];
    for probe in probes {
        let stream = tokio::net::TcpStream::connect(&server.addr).await.unwrap();
        let answer = send_and_read_to_close(stream, probe).await;
        assert!(!answer.contains("\"result\""), "served: {answer}");
    }
    assert_nothing_started(&mut c, &marker).await;
    assert!(
        server
            .log_line("first line is not JSON-RPC")
            .contains("peer=127.0.0.1"),
        "a WARN names the peer"
    );
    // The valid session opened before is unaffected, and new ones work.
    let mut fresh = server.client().await;
    fresh.ok("status", json!({})).await;
    c.ok("status", json!({})).await;
    drop(server);

    let path = dir.path().join("os_sup.sock");
    let _server = Server::start_with(&["--listen", &format!("unix:{}", path.display())]);
    let stream = tokio::net::UnixStream::connect(&path).await.unwrap();
    let answer = send_and_read_to_close(stream, &cross_protocol_post(&marker)).await;
    assert!(!answer.contains("\"result\""), "served: {answer}");
    // Clock: a started `sh` would have run by now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!marker.exists(), "the command ran through the unix socket");
    // A real client on the same socket still works.
    let stream = tokio::net::UnixStream::connect(&path).await.unwrap();
    let lines = format!(
        "{}\n{}\n",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "tests", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    let (read, mut write) = stream.into_split();
    write.write_all(lines.as_bytes()).await.unwrap();
    let mut first = String::new();
    let mut reader = tokio::io::BufReader::new(read);
    tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::AsyncBufReadExt::read_line(&mut reader, &mut first),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(first.contains("\"result\""), "{first}");
}

#[tokio::test]
async fn a_bad_line_after_the_first_still_gets_a_parse_error() {
    let server = Server::start();
    let mut c = server.client().await;
    c.send_line("POST / HTTP/1.1").await;
    let status = c.ok("status", json!({})).await;
    assert_eq!(status["nodes"], json!([]));
}

/// A non-loopback address of this machine, if it has one.
fn machine_ip() -> Option<String> {
    let out = Command::new("hostname").arg("-I").output().ok()?;
    String::from_utf8(out.stdout)
        .ok()?
        .split_whitespace()
        .find(|ip| !ip.starts_with("127.") && !ip.contains(':'))
        .map(String::from)
}

/// The port of the HTTP address `server` logged.
fn http_port(server: &Server) -> u16 {
    let addr = server.logged("http");
    addr.rsplit(':').next().unwrap().parse().unwrap()
}

/// `initialize` over HTTP to `port` with the given Host header; returns the status code.
async fn initialize_as(port: u16, host: &str, headers: &[(&str, &str)]) -> u16 {
    let mut request = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/mcp"))
        .header("Host", host)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "tests", "version": "0"}}}),
        );
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    request.send().await.unwrap().status().as_u16()
}

async fn health_as(port: u16, host: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/health"))
        .header("Host", host)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn http_on_a_wildcard_bind_answers_this_machines_names_only() {
    const TOKEN: &str = "t0ken-from-the-environment";
    let server = Server::start_with_env(
        &["--http", "0.0.0.0:0", "--allowed-host", "proxy.example"],
        &[("OS_SUP_MCP_TOKEN", TOKEN)],
    );
    let port = http_port(&server);
    let bearer = format!("bearer {TOKEN}"); // the scheme is case-insensitive
    let auth = [("Authorization", bearer.as_str())];
    let hostname = String::from_utf8(Command::new("hostname").output().unwrap().stdout).unwrap();
    let mut names = vec![
        format!("{}:{port}", hostname.trim()),
        format!("proxy.example:{port}"),
    ];
    names.extend(machine_ip().map(|ip| format!("{ip}:{port}")));
    for host in &names {
        assert_eq!(initialize_as(port, host, &auth).await, 200, "Host {host}");
        assert_eq!(health_as(port, host).await, 200, "/health for Host {host}");
    }
    assert_eq!(initialize_as(port, &names[0], &[]).await, 401, "no token");
    let foreign = format!("evil.example:{port}");
    assert_eq!(initialize_as(port, &foreign, &auth).await, 403);
    assert_eq!(
        health_as(port, &foreign).await,
        403,
        "/health checks Host too"
    );
    let origin = [
        ("Authorization", bearer.as_str()),
        ("Origin", "http://evil.example"),
    ];
    assert_eq!(initialize_as(port, &names[0], &origin).await, 403);
    assert!(
        server.logged_line("visible to every local user").is_none(),
        "a token from the environment is not warned about"
    );
    drop(server);

    let server = Server::start_with(&["--http", "127.0.0.1:0", "--token", TOKEN]);
    assert!(
        server
            .log_line("visible to every local user")
            .contains("OS_SUP_MCP_TOKEN"),
        "a token on the command line is warned about"
    );
}

#[tokio::test]
async fn http_sessions_are_capped() {
    let server = Server::start_with(&["--http", "127.0.0.1:0", "--max-sessions", "2"]);
    let port = http_port(&server);
    let host = format!("127.0.0.1:{port}");
    assert_eq!(initialize_as(port, &host, &[]).await, 200);
    assert_eq!(initialize_as(port, &host, &[]).await, 200);
    assert_eq!(initialize_as(port, &host, &[]).await, 503, "third session");
}

#[tokio::test]
async fn read_only_loads_no_code_unless_attach_is_allowed() {
    let server = Server::start_with(&["--read-only"]);
    let mut c = server.client().await;
    let names = c.tool_names().await;
    assert!(
        !names.iter().any(|n| n == "attach" || n == "remove"),
        "{names:?}"
    );
    let call = c
        .request(
            "tools/call",
            json!({"name": "attach", "arguments": {"name": "x", "node": "a@127.0.0.1", "cookie": "c"}}),
        )
        .await;
    assert!(call.get("error").is_some(), "attach callable: {call}");
    drop(server);

    let server = Server::start_with(&["--read-only", "--allow-attach"]);
    let mut c = server.client().await;
    let names = c.tool_names().await;
    assert!(names.iter().any(|n| n == "attach"), "{names:?}");
    assert!(!names.iter().any(|n| n == "eval"), "{names:?}");

    let refused = Command::new(env!("CARGO_BIN_EXE_os_sup_mcp"))
        .arg("--allow-attach")
        .output()
        .unwrap();
    assert_eq!(
        refused.status.code(),
        Some(2),
        "--allow-attach needs --read-only"
    );
}

#[tokio::test]
async fn attach_reads_the_cookie_from_a_file_or_the_environment() {
    let node = ErlNode::build("cookiejar").start();
    let (name, cookie) = (node.name.clone(), node.cookie.clone());
    let dir = common::private_dir();
    let file = dir.path().join("COOKIE");
    std::fs::write(&file, format!("{cookie}\n")).unwrap();
    let server = Server::start_with_env(&[], &[("NODE_COOKIE", cookie.as_str())]);
    let mut c = server.client().await;

    let by_file = json!({"name": "f", "node": name, "cookie_file": file});
    c.attach(by_file.clone()).await;
    c.ok("remove", json!({"name": "f"})).await;
    c.ok(
        "attach",
        json!({"name": "e", "node": name, "cookie_env": "NODE_COOKIE"}),
    )
    .await;
    let out = c.eval("e", "1 + 1.").await;
    assert_eq!(out["value"], "2");

    let both = c
        .err(
            "attach",
            json!({"name": "b", "node": name, "cookie": "x", "cookie_env": "NODE_COOKIE"}),
        )
        .await;
    assert!(both.contains("exactly one"), "{both}");
    let unset = c
        .err(
            "attach",
            json!({"name": "b", "node": name, "cookie_env": "NO_SUCH_VAR"}),
        )
        .await;
    assert!(unset.contains("NO_SUCH_VAR is not set"), "{unset}");
    c.ok("remove", json!({"name": "e"})).await;
}

#[test]
fn a_state_dir_other_users_can_reach_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_os_sup_mcp"))
        .args(["--listen", "127.0.0.1:0", "--state-dir"])
        .arg(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("mode 0755") && stderr.contains("chmod 700"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_ninth_concurrent_eval_on_a_node_is_busy() {
    let (server, mut c) = demo_node("busy").await;
    let mut running = Vec::new();
    for n in 0..8 {
        let addr = server.addr.clone();
        let code = format!("Process.register(self(), :busy_eval_{n}); Process.sleep(6000); :done");
        running.push(tokio::spawn(async move {
            let mut c = Client::connect(&addr).await;
            c.call(
                "eval",
                json!({"name": "busy", "code": code, "timeout_ms": 20000}),
            )
            .await
        }));
    }
    // Wait (without an eval, which would take a slot) until the node runs all eight.
    let busy_evals = json!({"name": "busy", "filter": "busy_eval_", "limit": 20});
    wait_until(
        Duration::from_secs(30),
        "the eight evals running",
        async || c.ok("processes", busy_evals.clone()).await,
        |found| found["rows"].as_array().map_or(0, Vec::len) == 8,
    )
    .await;
    let started = Instant::now();
    let busy: Value = c.call("eval", json!({"name": "busy", "code": "1"})).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once"
    );
    assert_eq!(busy["isError"], json!(true), "{busy}");
    let message = text(&busy);
    assert!(
        message.contains("busy") && message.contains("--max-evals"),
        "{message}"
    );
    // Other tools still answer meanwhile.
    c.ok("status", json!({"name": "busy"})).await;
    for eval in running {
        let result = eval.await.unwrap();
        assert_ne!(result["isError"], json!(true), "{result}");
    }
    let after = c.eval("busy", "1 + 1").await;
    assert_eq!(after["value"], "2");
}
