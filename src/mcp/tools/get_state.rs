//! `get_state`: the state of a gen_server, gen_statem or supervisor (`sys:get_state`).

use crate::mcp::McpServer;
use crate::node::{GetStateQuery, Lang};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// The node's name, as given to `start` or `attach`.
    pub name: String,
    /// A pid (`<0.123.0>`, `#PID<0.123.0>` or `0.123.0`) or a registered name.
    pub pid: String,
    /// How long the process gets to answer, in ms (default 2000, max 10000).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Term syntax: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.
    #[serde(default)]
    pub format: Lang,
}

fn default_timeout_ms() -> u64 {
    2000
}

#[tool_router(router = get_state_router, vis = "pub(crate)")]
impl McpServer {
    /// Show the internal state of an OTP process (GenServer, gen_statem, gen_event,
    /// supervisor, Agent) via `sys:get_state`, bounded in size. Tasks and plain processes do
    /// not answer system messages: they are refused at once and sent nothing (use
    /// `process_info`); a busy or suspended process gives a timeout error.
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
