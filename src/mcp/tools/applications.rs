//! `applications`: running applications, or one application's environment.

use crate::mcp::McpServer;
use crate::node::{ApplicationsQuery, Lang};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// The node's name, as given to `start` or `attach`.
    pub name: String,
    /// One application (e.g. `demo_app`) to show its environment (config); omit to list all.
    #[serde(default)]
    pub app: Option<String>,
    /// Term syntax: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.
    #[serde(default)]
    pub format: Lang,
}

#[tool_router(router = applications_router, vis = "pub(crate)")]
impl McpServer {
    /// List the running applications with versions and descriptions, or, with `app`, that
    /// application's environment (its configuration).
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
