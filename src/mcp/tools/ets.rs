//! `ets`: ETS tables by memory, or one table's info and a sample of rows.

use crate::mcp::McpServer;
use crate::node::{EtsQuery, Lang};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// The node's name, as given to `start` or `attach`.
    pub name: String,
    /// One table (name such as `demo_cache`, or numeric id) to show its info and sample rows;
    /// omit to list tables.
    #[serde(default)]
    pub table: Option<String>,
    /// Tables listed (default 20, max 200) or rows sampled (default 10, max 100).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Term syntax: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.
    #[serde(default)]
    pub format: Lang,
}

#[tool_router(router = ets_router, vis = "pub(crate)")]
impl McpServer {
    /// List ETS tables sorted by memory (name, owner, size, memory, type, protection), or show
    /// one table's info with a bounded sample of its rows.
    #[tool(
        name = "ets",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn ets(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = EtsQuery {
            table: input.table,
            limit: input.limit,
            format: input.format,
        };
        Ok(self.introspect(&input.name, query).await)
    }
}
