//! `process_info`: everything about one process.

use crate::bounds::{
    PROCESS_MAX_MESSAGES, PROCESS_MAX_MESSAGES_DEFAULT, PROCESS_MESSAGES, PROCESS_PROFILE_MS,
};
use crate::mcp::McpServer;
use crate::node::{Lang, ToolCall};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Pid or name.
    pub pid: String,
    /// Shown (default one per shape; max 20).
    pub messages: Option<u32>,
    /// Longest queue read.
    #[serde(default = "default_max_messages")]
    pub max_messages: u32,
    /// Stack samples for this long.
    #[serde(default)]
    pub profile_ms: u32,
    #[serde(default)]
    pub format: Lang,
}

fn default_max_messages() -> u32 {
    PROCESS_MAX_MESSAGES_DEFAULT as u32
}

#[tool_router(router = process_info_router, vis = "pub(crate)")]
impl McpServer {
    /// One process: origin, stack, links, memory, queue by shape; where it runs.
    #[tool(
        name = "process_info",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn process_info(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let call = ToolCall::new("process_info")
            .text("pid", input.pid.as_str())
            .bounded("messages", input.messages.map(u64::from), PROCESS_MESSAGES)
            .bounded(
                "max_messages",
                Some(input.max_messages.into()),
                PROCESS_MAX_MESSAGES,
            )
            .bounded(
                "profile_ms",
                Some(input.profile_ms.into()),
                PROCESS_PROFILE_MS,
            )
            .format(input.format)
            .with_window(Duration::from_millis(input.profile_ms.min(5000).into()));
        Ok(self.call_tool(&input.name, call).await)
    }
}

/// `process_info` of `pid` with a profile of `ms`, its mailbox left unread: what the
/// dashboard's flame graph and the `beam://{name}/profile/{pid}` resource draw from.
pub(crate) fn profile_call(pid: &str, ms: u32) -> ToolCall {
    ToolCall::new("process_info")
        .text("pid", pid)
        .bounded("messages", Some(0), PROCESS_MESSAGES)
        .bounded("max_messages", Some(1), PROCESS_MAX_MESSAGES)
        .bounded("profile_ms", Some(ms.into()), PROCESS_PROFILE_MS)
        .format(Lang::default())
        .with_window(Duration::from_millis(ms.min(5000).into()))
}
