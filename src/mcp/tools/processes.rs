//! `processes`: the top processes by a resource, like `recon:proc_count/proc_window`.

use crate::mcp::McpServer;
use crate::node::{Lang, ProcessesQuery, SortBy};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Default memory.
    #[serde(default)]
    pub sort_by: SortBy,
    /// Max 100.
    #[serde(default)]
    pub limit: Option<u32>,
    /// Rank by change over it.
    #[serde(default)]
    pub window_ms: Option<u32>,
    /// Name or module part.
    #[serde(default)]
    pub filter: Option<String>,
    #[serde(default)]
    pub format: Lang,
}

#[tool_router(router = processes_router, vis = "pub(crate)")]
impl McpServer {
    /// Top processes by memory, reductions, queue…, or by their growth.
    #[tool(
        name = "processes",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn processes(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = ProcessesQuery {
            sort_by: input.sort_by,
            limit: input.limit,
            window_ms: input.window_ms,
            filter: input.filter,
            format: input.format,
        };
        Ok(self.introspect(&input.name, query).await)
    }
}
