//! The stdio transport: one session on stdin/stdout, nothing but protocol on stdout, and every
//! node stopped when the client closes stdin.

mod common;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn stdio_session_starts_evals_and_cleans_up() {
    let mut server = Command::new(env!("CARGO_BIN_EXE_os_sup_mcp"))
        .args(["--stdio", "--log-level", "debug"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn server");
    let tag = format!("_{:x}@127.0.0.1", server.id());
    let mut stdin = server.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = server.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut id = 0;
    let mut request = |method: &str, params: Value| -> Value {
        id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{msg}").unwrap();
        if method == "initialize" {
            writeln!(
                stdin,
                r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
            )
            .unwrap();
        }
        loop {
            let line = rx.recv_timeout(Duration::from_secs(180)).expect("a reply");
            // Every stdout line must be JSON-RPC: logs go to stderr.
            let msg: Value = serde_json::from_str(&line)
                .unwrap_or_else(|_| panic!("non-JSON on stdout: {line}"));
            if msg["id"] == json!(id) {
                return msg;
            }
        }
    };
    let init = request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "os_sup_mcp");
    let tools = request("tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for tool in ["eval", "restart", "start", "status", "stop"] {
        assert!(names.contains(&tool), "{tool} missing from {names:?}");
    }
    let started = request(
        "tools/call",
        json!({"name": "start", "arguments": {"name": "io", "path": common::demo_app()}}),
    );
    assert_eq!(
        started["result"]["structuredContent"]["state"], "running",
        "{started}"
    );
    let out = request(
        "tools/call",
        json!({"name": "eval", "arguments": {"name": "io", "code": "6 * 7"}}),
    );
    assert_eq!(out["result"]["structuredContent"]["value"], "42", "{out}");
    assert_eq!(common::beams_matching(&tag).len(), 1);

    drop(stdin); // end of session: the server stops its nodes and exits
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = server.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = server.kill();
            break None;
        }
        // Clock: paces this poll; the deadline above bounds it.
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.is_some_and(|s| s.success()),
        "server exits cleanly after stdin closes"
    );
    assert!(
        common::beams_matching(&tag).is_empty(),
        "nodes are stopped with the server"
    );
}
