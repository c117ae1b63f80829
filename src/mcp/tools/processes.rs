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
    /// The node's name, as given to `start` or `attach`.
    pub name: String,
    /// What to rank by (`auto`: memory; with `group_by`, count).
    #[serde(default)]
    pub sort_by: SortBy,
    /// Count processes in groups instead: by initial call, current function, parent or
    /// registered-name prefix.
    #[serde(default)]
    pub group_by: Option<GroupBy>,
    /// How many processes (default 10, max 100).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Rank by the change over this many ms instead of the absolute value (max 10000), e.g.
    /// reductions over 1000 ms to find what is busy now.
    #[serde(default)]
    pub window_ms: Option<u32>,
    /// Only processes whose registered name, initial call or current module contains this.
    #[serde(default)]
    pub filter: Option<String>,
    /// Term syntax: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.
    #[serde(default)]
    pub format: Lang,
}

#[tool_router(router = processes_router, vis = "pub(crate)")]
impl McpServer {
    /// List the top processes by memory, reductions, message queue length, binary memory or
    /// heap size, optionally over a time window: pid, name or initial call, current function,
    /// the value, and queue length. With `group_by`, groups with count, change over the
    /// window, memory, queue and a sample pid. Pass a pid to `process_info` for more.
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
