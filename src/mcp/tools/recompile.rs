//! `recompile`: recompile a running Mix project and hot-load what changed into its node.
//! The work happens in the helper (`erlang/os_sup_dev.erl`); this file only types the input
//! and turns a reply whose `status` is `error` (compile error, or the application crashed or
//! stopped around the reload) into a tool error.

use crate::bounds::{
    RECOMPILE_TIMEOUT_DEFAULT_MS, RECOMPILE_TIMEOUT_MS, RECOMPILE_WATCH_DEFAULT_MS,
    RECOMPILE_WATCH_MS,
};
use crate::mcp::McpServer;
use crate::node::ToolCall;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Everything.
    #[serde(default)]
    pub force: bool,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Crash watch after load.
    #[serde(default = "default_watch_ms")]
    pub watch_ms: u64,
}

fn default_timeout_ms() -> u64 {
    RECOMPILE_TIMEOUT_DEFAULT_MS
}

fn default_watch_ms() -> u64 {
    RECOMPILE_WATCH_DEFAULT_MS
}

#[tool_router(router = recompile_router, vis = "pub(crate)")]
impl McpServer {
    /// Compile apart and hot-load what changed; diagnostics and crashes.
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
        // One limit for compile, load and watch together, on the node and for the call.
        let timeout = RECOMPILE_TIMEOUT_MS.clamp(input.timeout_ms);
        let call = ToolCall::new("recompile")
            .flag("force", input.force)
            .int("timeout_ms", Some(timeout))
            .bounded("watch_ms", Some(input.watch_ms), RECOMPILE_WATCH_MS)
            .with_timeout(Duration::from_millis(timeout));
        let mut result = self.call_tool(&input.name, call).await;
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
