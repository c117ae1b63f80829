//! `stop`: stop a node for good (it is not restarted).

use super::status::status_result;
use super::NameInput;
use crate::mcp::McpServer;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};

#[tool_router(router = stop_router, vis = "pub(crate)")]
impl McpServer {
    /// Stop a node gracefully, then by signals; it stays stopped.
    #[tool(
        name = "stop",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn stop(
        &self,
        Parameters(input): Parameters<NameInput>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(status_result(
            "stopped",
            self.registry.stop_node(&input.name).await,
        ))
    }
}
