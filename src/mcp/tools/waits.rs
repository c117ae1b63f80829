//! `waits`: who waits on whom. Processes blocked in a call (GenServer/gen_statem calls,
//! `Task.await`, `:erpc`, IO requests, `proc_lib` start-up) are followed hop by hop to the
//! process that holds everything up, with queue growth and call rates over a short window;
//! cycles are reported as deadlocks. The node does the work (`os_sup_waits`), from
//! `process_info` only: no process is sent anything.

use crate::mcp::McpServer;
use crate::node::{Lang, WaitsQuery};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Else scan the node.
    #[serde(default)]
    pub pid: Option<String>,
    #[serde(default = "default_window_ms")]
    pub window_ms: u32,
    #[serde(default = "default_limit")]
    pub limit: u32,
    #[serde(default)]
    pub format: Lang,
}

fn default_window_ms() -> u32 {
    500
}

fn default_limit() -> u32 {
    5
}

#[tool_router(router = waits_router, vis = "pub(crate)")]
impl McpServer {
    /// Who waits on whom: blocked calls followed to the bottleneck, with rates; deadlocks flagged.
    #[tool(
        name = "waits",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn waits(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = WaitsQuery {
            pid: input.pid,
            window_ms: Some(input.window_ms),
            limit: Some(input.limit),
            format: input.format,
        };
        Ok(self.introspect(&input.name, query).await)
    }
}
