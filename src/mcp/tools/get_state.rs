//! `get_state`: the state of a gen_server, gen_statem or supervisor (`sys:get_state`).

use crate::mcp::McpServer;
use crate::node::{GetStateQuery, Lang};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

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
    2000
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
        let query = GetStateQuery {
            pid: input.pid,
            timeout_ms: Some(input.timeout_ms),
            format: input.format,
        };
        Ok(self.introspect(&input.name, query).await)
    }
}
