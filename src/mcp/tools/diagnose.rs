//! `diagnose`: what is wrong with a node, in one call. The node samples itself over a short
//! window (`os_sup_health`) and answers with ranked findings (deadlocks, growing process
//! groups, restarts, growing ETS tables, long mailboxes, memory, limits, run queue, errors),
//! each one line of evidence and the next call to make; one line of figures when healthy.

use crate::mcp::McpServer;
use crate::node::{DiagnoseQuery, Lang};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// 100..5000.
    #[serde(default = "default_window_ms")]
    pub window_ms: u32,
    /// Term syntax: `auto`, `elixir` or `erlang`.
    #[serde(default)]
    pub format: Lang,
}

fn default_window_ms() -> u32 {
    1000
}

#[tool_router(router = diagnose_router, vis = "pub(crate)")]
impl McpServer {
    /// What is wrong with a node, ranked (deadlocks, leaks, restarts, growth, limits, errors),
    /// with evidence and the next call. Start here.
    #[tool(
        name = "diagnose",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn diagnose(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = DiagnoseQuery {
            node: input.name.clone(),
            window_ms: Some(input.window_ms),
            format: input.format,
        };
        Ok(self.introspect(&input.name, query).await)
    }
}
