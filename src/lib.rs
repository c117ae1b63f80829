//! os_sup_mcp: run, supervise and look inside Erlang/Elixir nodes for AI agents, over MCP.
//!
//! # Layout
//! Dependencies point one way: `mcp → node → helper → dist`, with [`term`] and [`bounds`]
//! shared below them.
//! - [`dist`]: Erlang distribution client (EPMD, handshake, one multiplexed connection per node).
//! - [`helper`]: the Erlang helper module injected into every node, and typed requests to it.
//! - [`node`]: spawning, supervising and naming child nodes; the library API ([`node::Registry`]),
//!   which re-exports the few request and reply types its callers need.
//! - [`mcp`]: the MCP server, its transports and one file per tool. Imports only `node`.
//! - [`dashboard`]: the web page for the people watching (on the `--http` listener) and its
//!   JSON API; reads [`node::Registry`] and the feed of tool calls ([`mcp::Activity`]).
//! - [`term`]: building and reading Erlang terms; [`bounds`]: the range of every number a caller
//!   passes, clamped (or, for a trace's `max_events`, refused) in that one place;
//!   [`single_flight`]: work done once for everyone who needs it meanwhile (a connect, a
//!   helper restart).
//!
//! One tool call is walked through these layers file by file in `docs/ARCHITECTURE.md` ("Walk
//! of one call"); CONTRIBUTING.md says where to change what.
//!
//! Beside the layers: [`serve`] (what the binary does without a client command: transports,
//! exposure policy, shutdown), [`config`] (the `--config` file, whose format is
//! [`node::StartSpec`]) and [`client`] (the command-line client of a running server). `main.rs`
//! is the command line only.

pub mod bounds;
pub mod client;
pub mod config;
pub mod dashboard;
pub mod dist;
pub mod helper;
pub mod mcp;
pub mod node;
pub mod serve;
pub mod single_flight;
pub mod term;
