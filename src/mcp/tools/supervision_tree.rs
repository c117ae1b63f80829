//! `supervision_tree`: the OTP supervision tree, walked safely inside the node.

use crate::mcp::McpServer;
use crate::node::{Lang, SupervisionTreeQuery};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// The node's name, as given to `start` or `attach`.
    pub name: String,
    /// Where to start: an application (`demo_app`, `kernel`), a registered name
    /// (`DemoApp.Supervisor`) or a pid (`<0.123.0>`). Default: the project's own applications.
    #[serde(default)]
    pub root: Option<String>,
    /// Levels below the root (default 5, max 20).
    #[serde(default)]
    pub depth: Option<u32>,
    /// Children listed per supervisor (default 50, max 1000); larger supervisors are summarised
    /// with counts.
    #[serde(default)]
    pub max_children: Option<u32>,
    /// Term syntax: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.
    #[serde(default)]
    pub format: Lang,
}

#[tool_router(router = supervision_tree_router, vis = "pub(crate)")]
impl McpServer {
    /// Show the supervision tree: each supervisor with its strategy and restart intensity, each
    /// child with pid, kind (supervisor, dynamic_supervisor, worker), restart type, modules and
    /// registered name. Safe on production nodes: supervisors are identified before being
    /// asked anything, every call has a timeout, huge supervisors are summarised.
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
