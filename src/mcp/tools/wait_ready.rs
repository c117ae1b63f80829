//! `wait_ready`: wait until a running node meets a readiness condition.

use super::status::status_line;
use crate::mcp::output::{failure, success};
use crate::mcp::McpServer;
use crate::node::{NodeStatus, Readiness};
use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;
use std::time::Duration;

/// A readiness condition: `"app"` (the application started), `{"log": "regex"}`,
/// `{"port": 4000}` (accepting TCP connections on 127.0.0.1) or `{"url": "http://…"}`
/// (answering 2xx/3xx).
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadyInput {
    #[default]
    App,
    Log(String),
    Port(u16),
    Url(String),
}

impl ReadyInput {
    pub fn to_readiness(&self) -> Result<Readiness, String> {
        Ok(match self {
            Self::App => Readiness::App,
            Self::Log(re) => Readiness::LogLine(
                regex::Regex::new(re)
                    .map_err(|e| format!("`log` is not a valid regular expression: {e}"))?,
            ),
            Self::Port(port) => Readiness::Port(*port),
            Self::Url(url) => Readiness::Http(url.clone()),
        })
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// The node's name, as given to `start`.
    pub name: String,
    /// What to wait for (default: the application started).
    #[serde(default)]
    pub ready: ReadyInput,
    /// Milliseconds to wait at most (default 30000, max 600000).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_timeout_ms() -> u64 {
    30_000
}

#[tool_router(router = wait_ready_router, vis = "pub(crate)")]
impl McpServer {
    /// Wait until a running node is ready: its application started, a log line matches, a port
    /// accepts connections, or a URL answers. Fails fast with the exit status and the last log
    /// lines if the node exits while waiting.
    #[tool(
        name = "wait_ready",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<NodeStatus>()
    )]
    pub async fn wait_ready(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let readiness = match input.ready.to_readiness() {
            Ok(readiness) => readiness,
            Err(e) => return Ok(failure(e)),
        };
        let limit = Duration::from_millis(input.timeout_ms.clamp(1, 600_000));
        Ok(
            match self
                .registry
                .wait_ready(&input.name, &readiness, limit)
                .await
            {
                Ok(status) => success(format!("ready: {}", status_line(&status)), &status),
                Err(e) => e.into(),
            },
        )
    }
}
