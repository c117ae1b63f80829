//! `wait_ready`: wait until a running node meets a readiness condition.

use super::status::status_result;
use crate::mcp::output::failure;
use crate::mcp::McpServer;
use crate::node::ReadySpec;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    #[serde(default)]
    pub ready: ReadySpec,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_timeout_ms() -> u64 {
    30_000
}

#[tool_router(router = wait_ready_router, vis = "pub(crate)")]
impl McpServer {
    /// Wait for app start, a log line, port or URL; fails fast on exit.
    #[tool(
        name = "wait_ready",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
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
        let outcome = self.registry.wait_ready(&input.name, &readiness, limit);
        Ok(status_result("ready", outcome.await))
    }
}
