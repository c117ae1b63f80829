//! `applications`: running applications, or one application's environment.

use crate::mcp::McpServer;
use crate::node::{ApplicationsQuery, Lang};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Show its environment.
    #[serde(default)]
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
        let query = ApplicationsQuery {
            app: input.app,
            format: input.format,
        };
        Ok(self.introspect(&input.name, query).await)
    }
}
