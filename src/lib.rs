//! os_sup_mcp: run, supervise and look inside Erlang/Elixir nodes for AI agents, over MCP.
//!
//! # Layout
//! Dependencies point one way: `mcp → node → helper → dist`, with `term` shared below them.
//! - [`dist`]: Erlang distribution client (EPMD, handshake, one multiplexed connection per node).
//! - [`helper`]: the Erlang helper module injected into every node, and typed requests to it.
//! - [`node`]: spawning, supervising and naming child nodes; the library API ([`node::Registry`]).
//! - [`mcp`]: the MCP server, its transports and one file per tool.
//! - [`term`]: building and reading Erlang terms.
//!
//! Beside the layers: [`serve`] (what the binary does without a client command: transports,
//! exposure policy, shutdown), [`config`] (the `--config` file) and [`client`] (the
//! command-line client of a running server). `main.rs` is the command line only.

pub mod bounds;
pub mod client;
pub mod config;
pub mod dist;
pub mod helper;
pub mod mcp;
pub mod node;
pub mod serve;
pub mod term;
