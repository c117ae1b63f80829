//! A raw MCP session over TCP that keeps each answer's bytes as the server wrote them, opened
//! with the capabilities a test chooses (the common client parses answers and declares none).

use super::CALL_TIMEOUT;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// What a client of MCP Apps declares (`io.modelcontextprotocol/ui` with the HTML views' type).
pub fn ui_capabilities() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}})
}

/// One session; [`RawSession::line`] is an answer's bytes, [`RawSession::result`] its result.
pub struct RawSession {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
    next_id: u64,
    /// The `initialize` answer's line.
    pub initialized: String,
}

impl RawSession {
    /// A session of the 2026-07-28 revision: no handshake, each request says who asks in its
    /// `_meta` (see [`with_client`]).
    pub async fn connect(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (read, writer) = stream.into_split();
        Self {
            reader: BufReader::new(read),
            writer,
            next_id: 0,
            initialized: String::new(),
        }
    }

    /// A session opened with `initialize` declaring `capabilities`.
    pub async fn open(addr: &str, capabilities: Value) -> Self {
        let mut session = Self::connect(addr).await;
        let params = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": capabilities,
            "clientInfo": {"name": "mcp-apps-test", "version": "0"}
        });
        session.initialized = session.line("initialize", params).await;
        let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        session.send(&done).await;
        session
    }

    pub async fn send(&mut self, message: &Value) {
        let line = format!("{message}\n");
        self.writer.write_all(line.as_bytes()).await.expect("write");
    }

    /// The answer to `method`, as the line the server sent.
    pub async fn line(&mut self, method: &str, params: Value) -> String {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&request).await;
        tokio::time::timeout(CALL_TIMEOUT, async {
            loop {
                let mut line = String::new();
                let read = self.reader.read_line(&mut line).await.expect("read");
                assert!(read > 0, "the server closed the session");
                let message: Value = serde_json::from_str(&line).expect("JSON");
                if message["id"] == json!(id) {
                    return line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no answer to {method}"))
    }

    pub async fn result(&mut self, method: &str, params: Value) -> Value {
        let line = self.line(method, params).await;
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert!(answer.get("result").is_some(), "{method}: {answer}");
        answer["result"].clone()
    }
}

/// `params` of a 2026-07-28 request from a client declaring `capabilities`.
pub fn with_client(mut params: Value, capabilities: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "mcp-apps-test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    params
}
