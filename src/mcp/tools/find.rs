//! `find`: modules and functions by name across the node's loaded and loadable modules, the
//! project's first, each with its arity and the first line of its doc (`os_sup_code_find`).

use crate::bounds::{FIND_LIMIT, FIND_LIMIT_DEFAULT};
use crate::mcp::McpServer;
use crate::node::{Lang, ToolCall};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Substring (`Ledger.post`) or `/regex/`.
    pub query: String,
    #[serde(default = "default_limit")]
    pub limit: u32,
    /// Term syntax: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.
    #[serde(default)]
    pub format: Lang,
}

fn default_limit() -> u32 {
    FIND_LIMIT_DEFAULT as u32
}

#[tool_router(router = find_router, vis = "pub(crate)")]
impl McpServer {
    /// Modules and functions by name, the project's first, with each doc's first line.
    #[tool(
        name = "find",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn find(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let call = ToolCall::new("find")
            .text("query", input.query.as_str())
            .bounded("limit", Some(input.limit.into()), FIND_LIMIT)
            .format(input.format);
        Ok(self.call_tool(&input.name, call).await)
    }
}
