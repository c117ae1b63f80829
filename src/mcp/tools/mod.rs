//! One file per tool. Each declares a documented `Input` (its `///` docs become the JSON schema
//! the agent sees), and one `#[tool]` method on [`super::McpServer`] in a router of its own.

pub mod eval;
pub mod restart;
pub mod start;
pub mod status;
pub mod stop;

use serde::Deserialize;

/// Input of tools that act on one node by name.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct NameInput {
    /// The node's name, as given to `start`.
    pub name: String,
}
