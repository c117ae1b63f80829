//! The command-line client (`os_sup_mcp status`, `os_sup_mcp eval web '1 + 1'`…): one MCP
//! session over TCP to a running server, one tool call, its text printed. Like
//! `supervisorctl`: the exit code is non-zero when the call fails.

use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Largest response line accepted from the server.
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// Calls `tool` with `arguments` on the server at `addr`; returns (text, is_error).
pub async fn call(
    addr: &str,
    tool: &str,
    arguments: Value,
    timeout: Duration,
) -> anyhow::Result<(String, bool)> {
    tokio::time::timeout(timeout, call_inner(addr, tool, arguments))
        .await
        .map_err(|_| anyhow!("no answer from {addr} within {} s", timeout.as_secs()))?
}

async fn call_inner(addr: &str, tool: &str, arguments: Value) -> anyhow::Result<(String, bool)> {
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
    Ok((text, result["isError"] == json!(true)))
}

/// The server's tools, or one tool's arguments, in a few lines each (`os_sup_mcp tools`).
pub async fn describe_tools(
    addr: &str,
    tool: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<String> {
    let list = tokio::time::timeout(timeout, request(addr, "tools/list", json!({})))
        .await
        .map_err(|_| anyhow!("no answer from {addr} within {} s", timeout.as_secs()))??;
    let tools = list["tools"].as_array().cloned().unwrap_or_default();
    let first_line = |t: &Value| {
        t["description"]
            .as_str()
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    };
    let Some(name) = tool else {
        let lines: Vec<String> = tools
            .iter()
            .map(|t| {
                format!(
                    "{:<18} {}",
                    t["name"].as_str().unwrap_or("?"),
                    first_line(t)
                )
            })
            .collect();
        return Ok(lines.join("\n"));
    };
    let found = tools
        .iter()
        .find(|t| t["name"] == json!(name))
        .ok_or_else(|| {
            let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
            anyhow!("no tool `{name}`; tools: {}", names.join(", "))
        })?;
    let schema = &found["inputSchema"];
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = format!("{name}: {}\n", found["description"].as_str().unwrap_or(""));
    if let Some(properties) = schema["properties"].as_object() {
        for (arg, spec) in properties {
            let kind = spec["type"]
                .as_str()
                .map(String::from)
                .or_else(|| spec["type"].as_array().map(|t| format!("{t:?}")))
                .unwrap_or_else(|| "object".into());
            let need = if required.contains(&arg.as_str()) {
                ", required"
            } else {
                ""
            };
            let about = spec["description"]
                .as_str()
                .unwrap_or("")
                .replace('\n', " ");
            out += &format!("  {arg} ({kind}{need}): {about}\n");
        }
    }
    Ok(out.trim_end().to_string())
}

/// One request in a fresh session; returns its `result`.
async fn request(addr: &str, method: &str, params: Value) -> anyhow::Result<Value> {
    let stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("cannot connect to os_sup_mcp at {addr}; is the server running (`os_sup_mcp --listen {addr}`)?"))?;
    stream.set_nodelay(true).ok();
    let (read, mut write) = stream.into_split();
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

async fn response(
    lines: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
    id: u64,
) -> anyhow::Result<Value> {
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
    }
}
