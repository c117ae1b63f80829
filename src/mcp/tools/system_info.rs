//! `system_info`: memory, limits, schedulers and versions of a node.

use super::NameInput;
use crate::mcp::McpServer;
use crate::node::ToolCall;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};

#[tool_router(router = system_info_router, vis = "pub(crate)")]
impl McpServer {
    /// Memory, counts vs limits, schedulers, run queue, versions.
    #[tool(
        name = "system_info",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn system_info(
        &self,
        Parameters(input): Parameters<NameInput>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self
            .call_tool(&input.name, ToolCall::new("system_info"))
            .await)
    }
}
