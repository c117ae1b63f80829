//! `recompile`: recompile a running Mix project and hot-load what changed into its node.
//! The work happens in the helper (`erlang/os_sup_dev.erl`); this file only types the input
//! and turns a reply whose `status` is `error` (compile error, or the application crashed or
//! stopped around the reload) into a tool error.

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
    /// Milliseconds the whole recompile may take: compile, load and watch (default 60000,
    /// max 120000).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Milliseconds to watch the node after loading the new code for crashes, supervisors
    /// giving up and applications stopping (default 500, max 10000; longer by itself once a
    /// process crashed, to see whether its supervisor gives up).
    #[serde(default = "default_watch_ms")]
    pub watch_ms: u64,
}

fn default_timeout_ms() -> u64 {
    60_000
}

fn default_watch_ms() -> u64 {
    500
}

#[tool_router(router = recompile_router, vis = "pub(crate)")]
impl McpServer {
    /// Recompile the project after editing source files and hot-load the changed modules into
    /// its running node. The compile runs in a separate OS process (Mix's own `compile`), so
    /// no module of the running application is ever unloaded; changed modules are then loaded
    /// as new versions (processes finish in the previous one). Returns the status (ok, noop,
    /// error), the modules reloaded, added, changed, removed and unchanged, the compiler's
    /// diagnostics (severity, file, line, message), and what the node did after the load: an
    /// application that stopped, a supervisor that gave up or a process that crashed makes
    /// the result an error with the log lines. A compile error leaves the node running its
    /// previous code.
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
            watch_ms: Some(input.watch_ms),
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
