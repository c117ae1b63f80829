//! `applications`: running applications, or one application's environment.

use crate::mcp::McpServer;
use crate::node::{Lang, ToolCall};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    pub app: Option<String>,
    #[serde(default)]
    pub format: Lang,
}

#[tool_router(router = applications_router, vis = "pub(crate)")]
impl McpServer {
    /// Running applications with versions, or one `app`'s environment.
    #[tool(
        name = "applications",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn applications(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let call = ToolCall::new("applications")
            .text("app", input.app.as_deref())
            .format(input.format);
        Ok(self.call_tool(&input.name, call).await)
    }
}
