//! `supervision_tree`: the OTP supervision tree, walked safely inside the node.

use crate::bounds::{TREE_DEPTH, TREE_MAX_CHILDREN};
use crate::mcp::McpServer;
use crate::node::{Lang, ToolCall};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// App, name or pid.
    pub root: Option<String>,
    pub depth: Option<u32>,
    /// Per supervisor.
    pub max_children: Option<u32>,
    #[serde(default)]
    pub format: Lang,
}

#[tool_router(router = supervision_tree_router, vis = "pub(crate)")]
impl McpServer {
    /// Supervisors and children: strategy, restart type, modules, restarts
    #[tool(
        name = "supervision_tree",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn supervision_tree(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.call_tool(&input.name, call(&input)).await)
    }
}

/// The call for `input` (also the dashboard's and the `tree` resource's walk).
pub fn call(input: &Input) -> ToolCall {
    ToolCall::new("supervision_tree")
        .text("root", input.root.as_deref())
        .bounded("depth", input.depth.map(u64::from), TREE_DEPTH)
        .bounded(
            "max_children",
            input.max_children.map(u64::from),
            TREE_MAX_CHILDREN,
        )
        .format(input.format)
}
