//! `wait_ready`: wait until a running node meets a readiness condition.

use super::status::status_line;
use crate::mcp::output::{failure, success};
use crate::mcp::McpServer;
use crate::node::{NodeStatus, ReadySpec};
use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// The node's name, as given to `start`.
    pub name: String,
    /// What to wait for (default: the application started).
    #[serde(default)]
    pub ready: ReadySpec,
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
        let limit = Duration::from_millis(input.timeout_ms);
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
