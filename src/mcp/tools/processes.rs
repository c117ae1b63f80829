//! `processes`: the top processes by a resource, like `recon:proc_count/proc_window`, or
//! processes counted in groups (`group_by`), where a leak of small processes shows.

use crate::mcp::McpServer;
use crate::node::{GroupBy, Lang, ProcessesQuery, SortBy};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Default memory; count with `group_by`.
    #[serde(default)]
    pub sort_by: SortBy,
    /// Count groups of processes instead.
    #[serde(default)]
    pub group_by: Option<GroupBy>,
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
    /// Top processes by memory, reductions, queue…, or by growth; or counted in groups.
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
            group_by: input.group_by,
            format: input.format,
        };
        Ok(self.introspect(&input.name, query).await)
    }
}
