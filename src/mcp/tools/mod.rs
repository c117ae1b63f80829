//! One file per tool. Each declares a documented `Input` (its `///` docs become the JSON schema
//! the agent sees), and one `#[tool]` method on [`McpServer`] in a router of its own.
//!
//! A tool that runs inside the node is one slice: its file holds its `Input`, builds the one
//! [`ToolCall`] it sends (the tool's name in the helper's table, its arguments held to
//! [`crate::bounds`], its time limit) and shapes the reply; the helper's data becomes the
//! result's `structuredContent` as it came (its shape is checked by `tests/tool_data.rs`).
//! Adding one: its file here, its `mod` line and its line in `McpServer::routers_by_set`
//! below, its function on the node (an Erlang module) and its line in `os_sup_helper`'s
//! `TOOLS`, and its test (`docs/ARCHITECTURE.md`, "Adding a tool").

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
pub mod partition;
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
use super::toolsets::Toolset;
use super::McpServer;
use crate::node::ToolCall;
use rmcp::handler::server::router::tool::ToolRouter;
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

/// The tools that take a cluster's name themselves (`start` starts its members, `status`
/// shows who sees whom, `partition` splits it); other tools given one ask every member
/// ([`super::fanout`]) or refuse.
pub(super) const TAKE_CLUSTERS: [&str; 3] = ["start", "status", "partition"];

impl McpServer {
    /// Every tool's router (the `#[tool_router]` of one file above) with the set its tools
    /// belong to: the one table of tools on this side. A tool that is not here is not served.
    pub(super) fn routers_by_set() -> Vec<(Toolset, ToolRouter<Self>)> {
        use Toolset::*;
        vec![
            (Core, Self::status_router()),
            (Core, Self::start_router()),
            (Core, Self::stop_router()),
            (Core, Self::restart_router()),
            (Core, Self::wait_ready_router()),
            (Core, Self::eval_router()),
            (Core, Self::logs_router()),
            (Core, Self::attach_router()),
            (Core, Self::remove_router()),
            (Introspect, Self::supervision_tree_router()),
            (Introspect, Self::processes_router()),
            (Introspect, Self::process_info_router()),
            (Introspect, Self::get_state_router()),
            (Introspect, Self::applications_router()),
            (Introspect, Self::system_info_router()),
            (Introspect, Self::ets_router()),
            (Introspect, Self::waits_router()),
            (Introspect, Self::diagnose_router()),
            (Trace, Self::trace_router()),
            (Dev, Self::mix_router()),
            (Dev, Self::recompile_router()),
            (Dev, Self::partition_router()),
            (Code, Self::docs_router()),
            (Code, Self::source_router()),
            (Code, Self::callers_router()),
            (Code, Self::find_router()),
        ]
    }

    /// Runs one tool inside node `name` and turns the answer (or the failure) into a result.
    async fn call_tool(&self, name: &str, call: ToolCall) -> CallToolResult {
        match self.registry.call_tool(name, &call).await {
            Ok(found) => success(found.text, &found.data),
            Err(e) => e.into(),
        }
    }
}
