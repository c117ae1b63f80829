//! `source`: file and line of a module, function (each clause), callback or type, from the
//! compiled BEAM on the node (`os_sup_code`). A file is named relative to the project when
//! inside it; for one function, its code from that file comes too.

use super::TargetInput as Input;
use crate::mcp::McpServer;
use crate::node::ToolCall;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};

#[tool_router(router = source_router, vis = "pub(crate)")]
impl McpServer {
    /// File:line of a module, function (clauses, code) or type.
    #[tool(
        name = "source",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn source(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let call = ToolCall::new("source")
            .text("target", input.target.as_str())
            .format(input.format);
        Ok(self.call_tool(&input.name, call).await)
    }
}
