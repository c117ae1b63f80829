//! `remove`: forget a stopped, failed or attached node and its logs, freeing its name and slot.

use super::status::status_result;
use super::NameInput;
use crate::mcp::McpServer;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};

#[tool_router(router = remove_router, vis = "pub(crate)")]
impl McpServer {
    /// Forget a stopped node and its logs, or detach one.
    #[tool(
        name = "remove",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    pub async fn remove(
        &self,
        Parameters(input): Parameters<NameInput>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(status_result(
            "removed",
            self.registry.remove_node(&input.name).await,
        ))
    }
}
