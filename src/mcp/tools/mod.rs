//! One file per tool. Each declares a documented `Input` (its `///` docs become the JSON schema
//! the agent sees), and one `#[tool]` method on [`McpServer`] in a router of its own.
//!
//! A tool that runs inside the node is one slice: its file holds its `Input`, builds the one
//! [`ToolCall`] it sends (the tool's name in the helper's table, its arguments held to
//! [`crate::bounds`], its time limit) and shapes the reply; the helper's data becomes the
//! result's `structuredContent` as it came (its shape is checked by `tests/tool_data.rs`).
//! Adding one: its file here, a line in `mod` below and in its toolset's router
//! (`server.rs`), its function on the node and a line in `os_sup_helper`'s `TOOLS`.

pub mod applications;
pub mod attach;
pub mod callers;
pub mod diagnose;
pub mod docs;
pub mod ets;
pub mod eval;
pub mod find;
pub mod get_state;
pub mod logs;
pub mod mix;
pub mod process_info;
pub mod processes;
pub mod recompile;
pub mod remove;
pub mod restart;
pub mod source;
pub mod start;
pub mod status;
pub mod stop;
pub mod supervision_tree;
pub mod system_info;
pub mod trace;
pub mod wait_ready;
pub mod waits;

use super::output::success;
use super::McpServer;
use crate::node::ToolCall;
use rmcp::model::CallToolResult;
use serde::Deserialize;

/// Input of tools that act on one node by name.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct NameInput {
    pub name: String,
}

/// Input of the code tools that take one name on a node (`docs`, `source`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct TargetInput {
    pub name: String,
    /// `Enum.map/2`, `Enum`, `:lists.seq/3`, `t:Enum.t/0`.
    pub target: String,
    /// Term syntax: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.
    #[serde(default)]
    pub format: crate::node::Lang,
}

impl McpServer {
    /// Runs one tool inside node `name` and turns the answer (or the failure) into a result.
    async fn call_tool(&self, name: &str, call: ToolCall) -> CallToolResult {
        match self.registry.call_tool(name, &call).await {
            Ok(found) => success(found.text, &found.data),
            Err(e) => e.into(),
        }
    }
}
