//! `recompile`: recompile a running Mix project inside its node and hot-load what changed.

use crate::mcp::McpServer;
use crate::node::RecompileQuery;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// The node's name, as given to `start`.
    pub name: String,
    /// Recompile everything, not only what changed.
    #[serde(default)]
    pub force: bool,
    /// Milliseconds the compile may take (default 60000, max 120000).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_timeout_ms() -> u64 {
    60_000
}

#[tool_router(router = recompile_router, vis = "pub(crate)")]
impl McpServer {
    /// Recompile the project inside its running node after editing source files, and hot-load
    /// the changed modules (like IEx's `recompile`). Returns the status (ok, noop, error), the
    /// modules reloaded and the compiler's diagnostics (severity, file, line, message). A
    /// compile error leaves the node running its previous code.
    #[tool(
        name = "recompile",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn recompile(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = RecompileQuery {
            force: input.force,
            timeout_ms: Some(input.timeout_ms),
        };
        let mut result = self.introspect(&input.name, query).await;
        let failed = result
            .structured_content
            .as_ref()
            .is_some_and(|data| data["status"] == "error");
        if failed {
            result.is_error = Some(true);
        }
        Ok(result)
    }
}
