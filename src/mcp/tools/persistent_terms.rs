//! `persistent_terms`: the node's persistent terms largest first (`os_sup_node_persistent_terms`),
//! each key with the memory its value takes, and the count and memory of all of them.

use crate::bounds::{PERSISTENT_TERMS_LIMIT, PERSISTENT_TERMS_LIMIT_DEFAULT};
use crate::mcp::McpServer;
use crate::node::{Lang, ToolCall};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Terms listed (max 50).
    #[serde(default = "default_limit")]
    pub limit: u32,
    #[serde(default)]
    pub format: Lang,
}

fn default_limit() -> u32 {
    PERSISTENT_TERMS_LIMIT_DEFAULT as u32
}

#[tool_router(router = persistent_terms_router, vis = "pub(crate)")]
impl McpServer {
    /// Persistent terms, largest first: key and bytes; their count and memory.
    #[tool(
        name = "persistent_terms",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn persistent_terms(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let call = ToolCall::new("persistent_terms")
            .bounded("limit", Some(input.limit.into()), PERSISTENT_TERMS_LIMIT)
            .format(input.format);
        Ok(self.call_tool(&input.name, call).await)
    }
}
