//! Shared by the hardening tests (fuzz, eval bombs, chaos, load): a raw (tolerant) MCP
//! connection for hostile input, a guard that resumes a frozen process, and /proc readings.
//! (Their servers are `Server::reaping`: every BEAM they leave is killed, even when a test
//! fails.)
#![allow(dead_code)]

use crate::common::{kill, Server};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bound on a single read in these tests.
pub const STEP: Duration = Duration::from_secs(30);

/// Resumes a stopped process when dropped (a SIGSTOPped BEAM ignores everything but SIGKILL).
pub struct Resume(pub u32);

impl Drop for Resume {
    fn drop(&mut self) {
        kill(self.0, libc::SIGCONT);
    }
}

pub fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// True if the server process has not exited (reaps it if it has).
pub fn server_alive(server: &mut Server) -> bool {
    matches!(server.child.try_wait(), Ok(None))
}

/// What a raw connection saw when waiting for a reply.
#[derive(Debug)]
pub enum Seen {
    Reply(Value),
    Closed,
}

/// An MCP connection that tolerates the server closing it and checks every line it gets.
pub struct Raw {
    reader: tokio::io::BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
    /// Every message received, in order.
    pub received: Vec<Value>,
}

impl Raw {
    /// Connects without initializing.
    pub async fn connect_bare(addr: &str) -> Self {
        let stream = tokio::time::timeout(STEP, TcpStream::connect(addr))
            .await
            .expect("connect within the bound")
            .expect("connect");
        stream.set_nodelay(true).ok();
        let (read, writer) = stream.into_split();
        Self {
            reader: tokio::io::BufReader::new(read),
            writer,
            received: Vec::new(),
        }
    }

    /// Connects and runs the MCP handshake.
    pub async fn connect(addr: &str) -> Self {
        let mut raw = Self::connect_bare(addr).await;
        let init = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "hardening", "version": "0"}}});
        assert!(
            raw.send(format!("{init}\n").as_bytes()).await,
            "send initialize"
        );
        match raw.wait_for(&json!("init"), STEP).await {
            Seen::Reply(r) => assert!(r.get("result").is_some(), "initialize: {r}"),
            Seen::Closed => panic!("server closed a fresh connection during initialize"),
        }
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert!(raw.send(format!("{note}\n").as_bytes()).await);
        raw
    }

    /// Writes bytes; false if the server closed the connection.
    pub async fn send(&mut self, bytes: &[u8]) -> bool {
        matches!(
            tokio::time::timeout(STEP, self.writer.write_all(bytes)).await,
            Ok(Ok(()))
        )
    }

    /// Reads messages until one has `id` (returned) or the connection closes; every line must
    /// be a JSON-RPC 2.0 message. Panics when `limit` passes.
    pub async fn wait_for(&mut self, id: &Value, limit: Duration) -> Seen {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let mut line = Vec::new();
            let read = tokio::time::timeout_at(deadline, self.reader.read_until(b'\n', &mut line))
                .await
                .unwrap_or_else(|_| panic!("no reply with id {id} within {limit:?}"));
            match read {
                Ok(0) | Err(_) => return Seen::Closed,
                Ok(_) => {}
            }
            let msg: Value = serde_json::from_slice(&line).unwrap_or_else(|e| {
                panic!(
                    "server sent a line that is not JSON ({e}): {:?}",
                    String::from_utf8_lossy(&line[..line.len().min(500)])
                )
            });
            assert_eq!(msg["jsonrpc"], "2.0", "not JSON-RPC 2.0: {msg}");
            assert!(
                msg.get("result").is_some()
                    || msg.get("error").is_some()
                    || msg.get("method").is_some(),
                "neither result, error nor notification: {msg}"
            );
            self.received.push(msg.clone());
            if msg.get("id") == Some(id) {
                return Seen::Reply(msg);
            }
        }
    }
}
