//! A web page must not be able to drive the TCP server. Any page can send a cross-origin
//! `fetch(…, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body})`
//! to 127.0.0.1 without a CORS preflight; if the server skipped the HTTP header lines and served
//! the JSON-RPC lines of the body, the page could `start` any command. These tests send exactly
//! that request, once from a real headless Chromium and once as raw bytes, and check that the
//! connection is cut off and nothing runs.

mod common;

use common::chromium::{chromium_installed, Browser};
use common::Server;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

/// How long the command the attack asks for gets to show up before we call it "not run": the
/// spawn takes milliseconds when it happens.
const SETTLE: Duration = Duration::from_secs(3);

/// The body a page can smuggle: `initialize`, `notifications/initialized`, and a `tools/call`
/// of `start` whose command creates `target`. One JSON message per line, each ending in `\n`.
fn attack_body(target: &Path) -> String {
    let command = format!("touch '{}'", target.display());
    [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "evil-page", "version": "0"}
        }}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "start",
            "arguments": {"name": "pwn", "command": ["sh", "-c", command]}
        }}),
    ]
    .iter()
    .map(|line| format!("{line}\n"))
    .collect()
}

/// A fresh directory and, inside it, the path the attack's command would create.
fn touch_target() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("os_sup_browser_")
        .tempdir()
        .expect("tempdir");
    let target = dir.path().join("pwned-by-web-page");
    (dir, target)
}

/// The command never ran, the server has no node `pwn`, and a well-behaved client on the same
/// server still gets answers.
async fn assert_nothing_started(server: &Server, target: &Path) {
    let deadline = Instant::now() + SETTLE;
    loop {
        assert!(
            !target.exists(),
            "the smuggled `start` ran its command: {} was created",
            target.display()
        );
        if Instant::now() > deadline {
            break;
        }
        // Clock: nothing may appear for all of SETTLE; this paces the looks.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut client = server.client().await;
    let status = client.ok("status", json!({})).await;
    let nodes = status["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("status lists nodes: {status}"));
    assert!(
        !nodes.iter().any(|node| node["name"] == json!("pwn")),
        "the smuggled `start` created node `pwn`: {status}"
    );
    let tools = client.request("tools/list", json!({})).await;
    assert!(
        tools["result"]["tools"]
            .as_array()
            .is_some_and(|tools| !tools.is_empty()),
        "a valid client still works after the attack: {tools}"
    );
}

/// The JSON-RPC success answers (`result`) among the lines the server sent.
fn successes(received: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(received)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|msg| msg.get("result").is_some())
        .collect()
}

#[tokio::test]
async fn raw_http_post_is_cut_off() {
    let server = Server::start();
    let (_dir, target) = touch_target();
    let body = attack_body(&target);
    let request = format!(
        "POST / HTTP/1.1\r\n\
         Host: {addr}\r\n\
         Origin: http://evil.example\r\n\
         Content-Type: text/plain\r\n\
         Content-Length: {len}\r\n\
         \r\n\
         {body}",
        addr = server.addr,
        len = body.len(),
    );

    let mut stream = TcpStream::connect(&server.addr).await.expect("connect");
    let sent = Instant::now();
    // The server may cut the connection while the request is still going out.
    let _ = stream.write_all(request.as_bytes()).await;
    let mut received = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        let mut chunk = [0u8; 4096];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) => return "EOF".to_string(),
                Ok(n) => received.extend_from_slice(&chunk[..n]),
                Err(e) => return format!("error {e}"),
            }
        }
    })
    .await;
    let answered = String::from_utf8_lossy(&received).into_owned();
    eprintln!(
        "raw POST: connection ended after {:?} with {ended:?}; the server sent {} bytes: {answered:?}",
        sent.elapsed(),
        received.len()
    );
    let succeeded = successes(&received);
    assert!(
        succeeded.is_empty(),
        "the server answered JSON-RPC smuggled in an HTTP request body: {succeeded:?}"
    );
    assert!(
        ended.is_ok(),
        "the server kept an HTTP connection open for 5 s (it sent {answered:?})"
    );
    assert_nothing_started(&server, &target).await;
}

/// Reads one HTTP request head (up to the blank line), or `None` if the peer sends none.
async fn read_head(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut data = Vec::new();
    let mut chunk = [0u8; 4096];
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&data[..end]).into_owned();
                let rest = data[end + 4..].to_vec();
                return Some((head, rest));
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => data.extend_from_slice(&chunk[..n]),
            }
            if data.len() > 1 << 20 {
                return None;
            }
        }
    })
    .await
    .ok()
    .flatten()
}

/// Serves `html` at `/`; `GET /done?…` reports its query string on `done`.
async fn serve_page(listener: TcpListener, html: String, done: UnboundedSender<String>) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let (html, done) = (html.clone(), done.clone());
        tokio::spawn(async move {
            let Some((head, _)) = read_head(&mut stream).await else {
                return;
            };
            let target = head.split_whitespace().nth(1).unwrap_or("").to_string();
            let (status, body) = if target == "/" {
                ("200 OK", html)
            } else if let Some(query) = target.strip_prefix("/done") {
                let _ = done.send(query.to_string());
                ("200 OK", String::new())
            } else {
                ("404 Not Found", String::new())
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n\
                 Cache-Control: no-store\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

/// A stand-in for the fixed server on another port: it takes the page's POST (head and body) and
/// closes without answering. What it received shows what the browser really sends.
async fn serve_decoy(listener: TcpListener, seen: UnboundedSender<String>) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let seen = seen.clone();
        tokio::spawn(async move {
            let Some((head, mut body)) = read_head(&mut stream).await else {
                return;
            };
            let length = head
                .lines()
                .filter_map(|line| line.split_once(':'))
                .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
                .and_then(|(_, value)| value.trim().parse::<usize>().ok())
                .unwrap_or(0);
            let mut chunk = [0u8; 4096];
            while body.len() < length {
                match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk)).await {
                    Ok(Ok(n)) if n > 0 => body.extend_from_slice(&chunk[..n]),
                    _ => break,
                }
            }
            let _ = seen.send(format!("{head}\r\n\r\n{}", String::from_utf8_lossy(&body)));
        });
    }
}

/// The attacker's page: the smuggling POST to the server, the same POST to the decoy, then
/// `document.title = "done"` and `GET /done` with how each fetch ended.
fn attack_page(server: &str, decoy: &str, body: &str) -> String {
    let body = serde_json::to_string(body).expect("JSON string");
    format!(
        r#"<!doctype html>
<html><head><meta charset="utf-8"><title>pending</title></head><body>
<script>
const body = {body};
function attempt(url) {{
  return fetch(url, {{
    method: "POST",
    mode: "no-cors",
    headers: {{"Content-Type": "text/plain"}},
    body,
    signal: AbortSignal.timeout(10000),
  }}).then((r) => "response " + r.type, (e) => "rejected " + e);
}}
(async () => {{
  const server = await attempt("http://{server}/");
  const decoy = await attempt("http://{decoy}/");
  document.title = "done";
  await fetch("/done?server=" + encodeURIComponent(server) + "&decoy=" + encodeURIComponent(decoy));
}})();
</script>
</body></html>
"#
    )
}

#[tokio::test]
async fn web_page_cannot_start_a_command() {
    if !chromium_installed() {
        return;
    }
    let began = Instant::now();
    let server = Server::start();
    let (_dir, target) = touch_target();
    let body = attack_body(&target);

    let decoy = TcpListener::bind("127.0.0.1:0").await.expect("bind decoy");
    let decoy_addr = decoy.local_addr().expect("decoy addr").to_string();
    let (seen_tx, mut seen_rx) = unbounded_channel();
    let decoy_task = tokio::spawn(serve_decoy(decoy, seen_tx));

    let pages = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind page server");
    let page_url = format!("http://{}/", pages.local_addr().expect("page addr"));
    let (done_tx, mut done_rx) = unbounded_channel();
    let page_task = tokio::spawn(serve_page(
        pages,
        attack_page(&server.addr, &decoy_addr, &body),
        done_tx,
    ));

    let browser = Browser::launch(&page_url);
    let launched = Instant::now();
    let done = tokio::time::timeout(Duration::from_secs(60), done_rx.recv()).await;
    let Ok(Some(outcome)) = done else {
        panic!(
            "the page's script never reported back (GET /done) within 60 s; chromium said:\n{}",
            browser.log()
        );
    };
    eprintln!(
        "page script ran {:?} after chromium started: {outcome}",
        launched.elapsed()
    );
    drop(browser);
    page_task.abort();
    decoy_task.abort();

    // The browser really sends the smuggling request, body and all, to a local port.
    let decoy_saw = seen_rx
        .try_recv()
        .expect("the page's POST reached the decoy");
    assert!(decoy_saw.starts_with("POST / HTTP/1.1\r\n"), "{decoy_saw}");
    assert!(
        decoy_saw
            .to_ascii_lowercase()
            .contains("content-type: text/plain"),
        "{decoy_saw}"
    );
    assert!(
        decoy_saw.ends_with(&body),
        "the body arrived whole: {decoy_saw}"
    );

    assert_nothing_started(&server, &target).await;
    eprintln!("browser test took {:?}", began.elapsed());
}
