//! `ports`: the node's open ports by kind, owner and name (`os_sup_node_ports`), each with
//! its owner, the bytes it read and wrote, and the bytes queued in its driver.

use crate::bounds::{PORTS_LIMIT, PORTS_LIMIT_DEFAULT};
use crate::mcp::McpServer;
use crate::node::{Lang, ToolCall};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Ports listed per kind (max 50).
    #[serde(default = "default_limit")]
    pub limit: u32,
    #[serde(default)]
    pub format: Lang,
}

fn default_limit() -> u32 {
    PORTS_LIMIT_DEFAULT as u32
}

#[tool_router(router = ports_router, vis = "pub(crate)")]
impl McpServer {
    /// Open ports by kind (`tcp_inet`, a spawned command…): owner, I/O bytes, queue.
    #[tool(
        name = "ports",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn ports(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let call = ToolCall::new("ports")
            .bounded("limit", Some(input.limit.into()), PORTS_LIMIT)
            .format(input.format);
        Ok(self.call_tool(&input.name, call).await)
    }
}
