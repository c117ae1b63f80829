//! `stop`: stop a node for good (it is not restarted).

use super::status::status_line;
use super::NameInput;
use crate::mcp::output::success;
use crate::mcp::McpServer;
use crate::node::NodeStatus;
use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};

#[tool_router(router = stop_router, vis = "pub(crate)")]
impl McpServer {
    /// Stop a node: graceful shutdown (applications stopped in order), then SIGTERM, then
    /// SIGKILL of its process group if it does not exit. A stopped node is not restarted; its
    /// status and last exit stay visible, and `start` with just the name starts it again.
    #[tool(
        name = "stop",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<NodeStatus>()
    )]
    pub async fn stop(
        &self,
        Parameters(input): Parameters<NameInput>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.registry.stop_node(&input.name).await {
            Ok(status) => success(format!("stopped: {}", status_line(&status)), &status),
            Err(e) => e.into(),
        })
    }
}
