//! One file per tool. Each declares a documented `Input` (its `///` docs become the JSON schema
//! the agent sees), and one `#[tool]` method on [`McpServer`] in a router of its own.
//!
//! Introspection tools all take the node's `name` and an optional `format`, and make exactly one
//! round trip to the helper, which walks the node and answers with compact text and plain data;
//! the query names the tool's typed output ([`crate::node::Introspect`], structs in
//! [`crate::node::reports`]), which becomes the result's `structuredContent`.

pub mod applications;
pub mod attach;
pub mod detach;
pub mod ets;
pub mod eval;
pub mod get_state;
pub mod logs;
pub mod mix;
pub mod module_info;
pub mod process_info;
pub mod processes;
pub mod recompile;
pub mod remove;
pub mod restart;
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
use crate::node::Introspect;
use rmcp::model::CallToolResult;
use serde::Deserialize;

/// Input of tools that act on one node by name.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct NameInput {
    pub name: String,
}

impl McpServer {
    /// Runs one introspection tool inside node `name` and turns the answer (or the failure)
    /// into a result.
    async fn introspect<Q: Introspect>(&self, name: &str, query: Q) -> CallToolResult {
        match self.registry.introspect(name, query).await {
            Ok(found) => success(found.text, &found.data),
            Err(e) => e.into(),
        }
    }
}
