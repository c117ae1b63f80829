//! `supervision_tree`: the OTP supervision tree, walked safely inside the node.

use crate::mcp::McpServer;
use crate::node::{Lang, SupervisionTreeQuery};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// App, name or pid.
    #[serde(default)]
    pub root: Option<String>,
    /// Max 20.
    #[serde(default)]
    pub depth: Option<u32>,
    /// Per supervisor.
    #[serde(default)]
    pub max_children: Option<u32>,
    #[serde(default)]
    pub format: Lang,
}

#[tool_router(router = supervision_tree_router, vis = "pub(crate)")]
impl McpServer {
    /// Supervisors and children with strategy, restart type, modules; safe on busy nodes.
    #[tool(
        name = "supervision_tree",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn supervision_tree(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = SupervisionTreeQuery {
            root: input.root,
            depth: input.depth,
            max_children: input.max_children,
            format: input.format,
        };
        Ok(self.introspect(&input.name, query).await)
    }
}
