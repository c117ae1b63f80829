//! The command-line client (`os_sup_mcp status`, `os_sup_mcp eval web '1 + 1'`…): one MCP
//! session over TCP or a Unix socket (`unix:PATH`, as `--listen` takes it) to a running
//! server, one tool call, its text printed. Like `supervisorctl`: the exit code is non-zero
//! when the call fails. The verbs and their flags are in [`command`], `tools NAME`'s text in
//! [`describe`].

pub mod command;
mod describe;

pub use command::Command;

use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// Largest response line accepted from the server.
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// What a tool answered: its text, its structured data (`Null` when it sent none), and
/// whether it is an error.
pub struct Answer {
    pub text: String,
    pub data: Value,
    pub is_error: bool,
}

/// Calls `tool` with `arguments` on the server at `addr`.
pub async fn call(
    addr: &str,
    tool: &str,
    arguments: Value,
    timeout: Duration,
) -> anyhow::Result<Answer> {
    tokio::time::timeout(timeout, call_inner(addr, tool, arguments))
        .await
        .map_err(|_| anyhow!("no answer from {addr} within {} s", timeout.as_secs()))?
}

async fn call_inner(addr: &str, tool: &str, arguments: Value) -> anyhow::Result<Answer> {
    let params = json!({"name": tool, "arguments": arguments});
    let result = request(addr, "tools/call", params).await?;
    let text = result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    Ok(Answer {
        text,
        data: result["structuredContent"].clone(),
        is_error: result["isError"] == json!(true),
    })
}

/// The server's tools, one line each, or one tool's arguments with their types, allowed values
/// and forms, and an example (`os_sup_mcp tools [NAME]`).
pub async fn describe_tools(
    addr: &str,
    tool: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<String> {
    let list = tokio::time::timeout(timeout, request(addr, "tools/list", json!({})))
        .await
        .map_err(|_| anyhow!("no answer from {addr} within {} s", timeout.as_secs()))??;
    let tools = list["tools"].as_array().cloned().unwrap_or_default();
    match tool {
        None => Ok(describe::list(&tools)),
        Some(name) => describe::one(&tools, name),
    }
}

/// A byte stream to the server, whichever transport it listens on.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// Connects to `addr`: `unix:PATH` (a Unix socket) or `HOST:PORT` (TCP).
async fn connect(addr: &str) -> anyhow::Result<Box<dyn Stream>> {
    let hint = || {
        format!(
            "cannot connect to os_sup_mcp at {addr}; is the server running (`os_sup_mcp \
             --listen {addr}`)? Client commands take the server's address with --connect \
             HOST:PORT or --connect unix:PATH"
        )
    };
    if let Some(path) = addr.strip_prefix("unix:") {
        let stream = tokio::net::UnixStream::connect(path)
            .await
            .with_context(hint)?;
        return Ok(Box::new(stream));
    }
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(hint)?;
    stream.set_nodelay(true).ok();
    Ok(Box::new(stream))
}

/// One request in a fresh session; returns its `result`.
async fn request(addr: &str, method: &str, params: Value) -> anyhow::Result<Value> {
    let stream = connect(addr).await?;
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = BufReader::new(read);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "os_sup_mcp-cli", "version": env!("CARGO_PKG_VERSION")}}});
    write.write_all(format!("{init}\n").as_bytes()).await?;
    response(&mut lines, 1).await?;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let request = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params});
    write
        .write_all(format!("{initialized}\n{request}\n").as_bytes())
        .await?;
    let mut reply = response(&mut lines, 2).await?;
    if let Some(error) = reply.get("error") {
        bail!("{}", error["message"].as_str().unwrap_or("request failed"));
    }
    Ok(reply["result"].take())
}

async fn response(lines: &mut BufReader<impl AsyncRead + Unpin>, id: u64) -> anyhow::Result<Value> {
    loop {
        let mut line = Vec::new();
        let n = (&mut *lines)
            .take(MAX_RESPONSE_BYTES as u64)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            bail!("the server closed the connection");
        }
        let message: Value =
            serde_json::from_slice(&line).context("the server sent invalid JSON")?;
        if message["id"] == json!(id) {
            return Ok(message);
        }
        // An error that answers no request is the server's refusal (`server busy: …`).
        if message["id"].is_null() {
            if let Some(error) = message["error"]["message"].as_str() {
                bail!("{error}");
            }
        }
    }
}
