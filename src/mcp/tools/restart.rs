//! `restart`: stop a node and start it again with the same settings.

use super::status::status_result;
use super::NameInput;
use crate::mcp::McpServer;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};

#[tool_router(router = restart_router, vis = "pub(crate)")]
impl McpServer {
    /// Stop, then start with the same settings.
    #[tool(
        name = "restart",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    pub async fn restart(
        &self,
        Parameters(input): Parameters<NameInput>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(status_result(
            "restarted",
            self.registry.restart_node(&input.name).await,
        ))
    }
}
