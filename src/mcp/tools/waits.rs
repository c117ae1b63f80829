//! `waits`: who waits on whom. Processes blocked in a call (GenServer/gen_statem calls,
//! `Task.await`, `:erpc`, IO requests, `proc_lib` start-up) are followed hop by hop to the
//! process that holds everything up, with queue growth and call rates over a short window;
//! cycles are reported as deadlocks. The node does the work (`os_sup_waits`), from
//! `process_info` only: no process is sent anything.

use crate::bounds::{WAITS_LIMIT, WAITS_LIMIT_DEFAULT, WAITS_WINDOW_DEFAULT_MS, WAITS_WINDOW_MS};
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
    /// Else scan the node.
    pub pid: Option<String>,
    #[serde(default = "default_window_ms")]
    pub window_ms: u32,
    #[serde(default = "default_limit")]
    pub limit: u32,
    #[serde(default)]
    pub format: Lang,
}

fn default_window_ms() -> u32 {
    WAITS_WINDOW_DEFAULT_MS as u32
}

fn default_limit() -> u32 {
    WAITS_LIMIT_DEFAULT as u32
}

#[tool_router(router = waits_router, vis = "pub(crate)")]
impl McpServer {
    /// Who waits on whom: blocked calls to the bottleneck, rates, deadlocks.
    #[tool(
        name = "waits",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn waits(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let window = WAITS_WINDOW_MS.clamp(input.window_ms.into());
        let call = ToolCall::new("waits")
            .text("pid", input.pid.as_deref())
            .int("window_ms", Some(window))
            .bounded("limit", Some(input.limit.into()), WAITS_LIMIT)
            .format(input.format)
            .with_window(Duration::from_millis(window));
        Ok(self.call_tool(&input.name, call).await)
    }
}
