//! `partition`: split a cluster this server started in two, or heal it, to test what the
//! application does on a netsplit.

use crate::mcp::output::{failure, success};
use crate::mcp::McpServer;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;
use std::time::Duration;

/// How long each member may take to block, unblock or answer.
const MEMBER_LIMIT: Duration = Duration::from_secs(3);

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Members cut off.
    #[serde(default)]
    pub side: Vec<String>,
    #[serde(default)]
    pub heal: bool,
}

#[tool_router(router = partition_router, vis = "pub(crate)")]
impl McpServer {
    /// Split a started cluster (`side` vs the rest) until `heal`.
    #[tool(
        name = "partition",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn partition(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let result = match (input.heal, input.side.is_empty()) {
            (true, true) => self.registry.heal(&input.name, MEMBER_LIMIT).await,
            (false, false) => {
                self.registry
                    .partition(&input.name, &input.side, MEMBER_LIMIT)
                    .await
            }
            _ => {
                return Ok(failure(
                    "give either `side` (the members to cut off) or `heal: true`".into(),
                ))
            }
        };
        Ok(match result {
            Ok(view) => {
                let done = if input.heal { "healed" } else { "partitioned" };
                success(format!("{done}: {}", view.text()), &view)
            }
            Err(e) => e.into(),
        })
    }
}
