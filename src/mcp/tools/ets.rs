//! `ets`: ETS tables by memory, or one table's info and a sample of rows.

use crate::bounds::ETS_LIMIT;
use crate::mcp::McpServer;
use crate::node::{Lang, ToolCall};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Name or id.
    pub table: Option<String>,
    /// Tables or rows (max 200).
    pub limit: Option<u32>,
    #[serde(default)]
    pub format: Lang,
}

#[tool_router(router = ets_router, vis = "pub(crate)")]
impl McpServer {
    /// ETS tables by memory, or one `table`'s info and rows.
    #[tool(
        name = "ets",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn ets(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let call = ToolCall::new("ets")
            .text("table", input.table.as_deref())
            .bounded("limit", input.limit.map(u64::from), ETS_LIMIT)
            .format(input.format);
        Ok(self.call_tool(&input.name, call).await)
    }
}
