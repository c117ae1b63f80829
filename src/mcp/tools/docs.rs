//! `docs`: signatures, specs and doc text of a function, macro, callback or type, or a
//! module's summary and members, read on the node from the BEAM's docs chunk and debug info
//! (`os_sup_code`). Nothing is loaded or compiled.

use super::TargetInput as Input;
use crate::mcp::McpServer;
use crate::node::ToolCall;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};

#[tool_router(router = docs_router, vis = "pub(crate)")]
impl McpServer {
    /// Docs and specs of a module, function, callback or type.
    #[tool(
        name = "docs",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn docs(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let call = ToolCall::new("docs")
            .text("target", input.target.as_str())
            .format(input.format);
        Ok(self.call_tool(&input.name, call).await)
    }
}
