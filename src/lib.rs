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
//! One tool call, `processes {"name": "web", "limit": 5}`, file by file (a tool is one slice:
//! its file in `mcp/tools/`, its function on the node, a line in each side's table; see
//! `docs/ARCHITECTURE.md`):
//! 1. `mcp/transport.rs` (or `mcp/http.rs`) reads the JSON-RPC line; `mcp/server.rs` checks the
//!    arguments (`mcp/arguments.rs`) and routes the call to its tool through the table of tools
//!    (`McpServer::routers_by_set`, `mcp/tools/mod.rs`).
//! 2. `mcp/tools/processes.rs` builds from its `Input` one [`node::ToolCall`] (`"processes"`,
//!    `limit` held to [`bounds::PROCESSES_LIMIT`], its time limit) and calls
//!    [`node::Registry::call_tool`].
//! 3. `node/registry.rs` (the node table) finds `web`; `node/calls.rs` checks it is running and
//!    hands the call to that node's [`helper::Client`].
//! 4. `helper/tool.rs` encodes `{tool, processes, Args, TimeoutMs}`; `helper/mod.rs` sends
//!    it with a deadline (recovering a lost connection or helper).
//! 5. `dist/connection.rs` sends it to the registered `os_sup_helper` and `dist/wire.rs` routes
//!    the reply back by reference; on the node, `os_sup_helper`'s table `TOOLS` names the function
//!    (`os_sup_proc_top:processes/1`), run in a worker under one guard (deadline, heap, reply cap).
//! 6. Back up: `helper/tool.rs` reads the reply into a [`node::ToolReply`] (text + the data as
//!    JSON), `node` turns a failure into a [`node::NodeError`] that says what to do next, and
//!    `mcp/output.rs` makes the tool result (`isError` on failure). Rust types a reply only
//!    where it reads it (the dashboard's `processes` rows, in `processes.rs`).
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
