//! `process_info`: everything about one process.

use crate::mcp::McpServer;
use crate::node::{Lang, ProcessInfoQuery};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// The node's name, as given to `start` or `attach`.
    pub name: String,
    /// A pid (`<0.123.0>`, `#PID<0.123.0>` or `0.123.0`) or a registered name
    /// (`DemoApp.Counter`, `logger`).
    pub pid: String,
    /// How many queued messages to show (default 5, max 20).
    #[serde(default)]
    pub messages: Option<u32>,
    /// Count the mailbox by message shape (`$gen_cast {:post, _, _} × 16000`) when at most
    /// this many messages are queued (default 10000, max 100000). Reading the queue copies
    /// it, so a longer queue is only counted, with a note giving the value to pass.
    #[serde(default = "default_max_messages")]
    pub max_messages: u32,
    /// Term syntax: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.
    #[serde(default)]
    pub format: Lang,
}

fn default_max_messages() -> u32 {
    10_000
}

#[tool_router(router = process_info_router, vis = "pub(crate)")]
impl McpServer {
    /// Inspect one process: status, current stacktrace, initial call, ancestors, links,
    /// monitors, memory, reductions, message queue length with its messages counted by shape
    /// and a sample of them, and its process dictionary keys.
    #[tool(
        name = "process_info",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn process_info(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = ProcessInfoQuery {
            pid: input.pid,
            messages: input.messages,
            max_messages: Some(input.max_messages),
            format: input.format,
        };
        Ok(self.introspect(&input.name, query).await)
    }
}
