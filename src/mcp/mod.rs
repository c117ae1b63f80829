//! The MCP face of the server. It holds one [`McpServer`] per session over a shared
//! [`crate::node::Registry`], the transports that carry sessions (TCP, Unix socket, stdio,
//! Streamable HTTP), one file per tool, and the resources (`beam://NAME/logs`,
//! `beam://NAME/tree`), prompts and argument completion it serves beside the tools.
//!
//! It reaches nodes only through [`crate::node`] (each tool builds one generic
//! [`crate::node::ToolCall`] from typed values), never the helper, the distribution client or
//! raw terms; `tests/layers.rs` keeps it so.
//!
//! Two error channels (as MCP intends): what the agent can fix (unknown node, bad path, code
//! that raised) comes back as a tool result with `isError: true` and a message saying what to
//! do next; malformed requests are JSON-RPC errors, produced by rmcp.

pub mod activity;
mod apps;
mod arguments;
mod cluster_code;
mod cluster_compare;
mod cluster_diagnose;
mod cluster_finding;
mod cluster_load;
mod completion;
mod fanout;
mod finding_text;
mod http;
mod output;
mod prompts;
mod resources;
mod schema;
mod server;
pub mod tools;
mod toolsets;
mod transport;

pub use activity::Activity;
pub use http::{serve_http, HttpOptions};
pub use server::{McpServer, ToolChoice};
pub use toolsets::Toolset;
pub use transport::{serve_listener, serve_stdio, Listener, MAX_SESSIONS};
