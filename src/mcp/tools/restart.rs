//! `restart`: stop a node and start it again with the same settings.

use super::status::status_line;
use super::NameInput;
use crate::mcp::output::success;
use crate::mcp::McpServer;
use crate::node::NodeStatus;
use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};

#[tool_router(router = restart_router, vis = "pub(crate)")]
impl McpServer {
    /// Restart a node (graceful stop, then start with the same settings; the OS process is
    /// new). Returns once it is ready again, or the start error with the last output lines.
    #[tool(
        name = "restart",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false),
        output_schema = schema_for_output::<NodeStatus>()
    )]
    pub async fn restart(
        &self,
        Parameters(input): Parameters<NameInput>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.registry.restart_node(&input.name).await {
            Ok(status) => success(format!("restarted: {}", status_line(&status)), &status),
            Err(e) => e.into(),
        })
    }
}
