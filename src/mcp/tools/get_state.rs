//! `get_state`: the state of a gen_server, gen_statem or supervisor (`sys:get_state`).

use crate::bounds::{GET_STATE_TIMEOUT_DEFAULT_MS, GET_STATE_TIMEOUT_MS};
use crate::mcp::McpServer;
use crate::node::{Lang, ToolCall};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Pid or name.
    pub pid: String,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default)]
    pub format: Lang,
}

fn default_timeout_ms() -> u64 {
    GET_STATE_TIMEOUT_DEFAULT_MS
}

#[tool_router(router = get_state_router, vis = "pub(crate)")]
impl McpServer {
    /// `sys:get_state` of an OTP process; others are refused unsent.
    #[tool(
        name = "get_state",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn get_state(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        // The process gets `timeout_ms` to answer; the tool 2 s more to read and render it.
        let answer = GET_STATE_TIMEOUT_MS.clamp(input.timeout_ms);
        let call = ToolCall::new("get_state")
            .text("pid", input.pid.as_str())
            .int("timeout_ms", Some(answer))
            .format(input.format)
            .with_timeout(Duration::from_millis(answer) + Duration::from_secs(2));
        Ok(self.call_tool(&input.name, call).await)
    }
}
