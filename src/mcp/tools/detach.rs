//! `detach`: let go of an attached node, leaving it as it was.

use super::status::status_line;
use super::NameInput;
use crate::mcp::output::success;
use crate::mcp::McpServer;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};

#[tool_router(router = detach_router, vis = "pub(crate)")]
impl McpServer {
    /// Undo `attach`; the node runs on untouched.
    #[tool(
        name = "detach",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = true
        )
    )]
    pub async fn detach(
        &self,
        Parameters(input): Parameters<NameInput>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.registry.detach_node(&input.name).await {
            Ok(status) => success(format!("detached: {}", status_line(&status)), &status),
            Err(e) => e.into(),
        })
    }
}
