//! `attach`: take a node this server did not start under a name, so every tool works on it.

use super::status::status_line;
use crate::mcp::output::success;
use crate::mcp::McpServer;
use crate::node::NodeStatus;
use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// A name for the node in this server (letters, digits, `_`, `-`).
    pub name: String,
    /// The Erlang node name, short (`app@myhost`) or long (`app@127.0.0.1`).
    pub node: String,
    /// The node's cookie.
    pub cookie: String,
    /// Host or IP to reach the node at, when the host part of `node` does not resolve here.
    #[serde(default)]
    pub host: Option<String>,
}

#[tool_router(router = attach_router, vis = "pub(crate)")]
impl McpServer {
    /// Attach to a running Erlang/Elixir node this server did not start (on this host or
    /// another): connects as a hidden node, loads the helper over distribution (nothing is
    /// written to that node's disk), and makes `eval`, `status` and the introspection tools
    /// work on it under `name`. Works on plain Erlang nodes too.
    #[tool(
        name = "attach",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true),
        output_schema = schema_for_output::<NodeStatus>()
    )]
    pub async fn attach(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(
            match self
                .registry
                .attach_node(&input.name, &input.node, &input.cookie, input.host)
                .await
            {
                Ok(status) => success(format!("attached: {}", status_line(&status)), &status),
                Err(e) => e.into(),
            },
        )
    }
}
