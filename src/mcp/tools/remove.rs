//! `remove`: forget a stopped, failed or attached node and its logs, freeing its name and slot.

use super::status::status_line;
use super::NameInput;
use crate::mcp::output::success;
use crate::mcp::McpServer;
use crate::node::NodeStatus;
use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};

#[tool_router(router = remove_router, vis = "pub(crate)")]
impl McpServer {
    /// Forget a node: a stopped or failed one (with its kept logs), or an attached one (which
    /// is detached first, left running). A running node must be stopped first.
    #[tool(
        name = "remove",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false),
        output_schema = schema_for_output::<NodeStatus>()
    )]
    pub async fn remove(
        &self,
        Parameters(input): Parameters<NameInput>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.registry.remove_node(&input.name).await {
            Ok(status) => success(format!("removed: {}", status_line(&status)), &status),
            Err(e) => e.into(),
        })
    }
}
