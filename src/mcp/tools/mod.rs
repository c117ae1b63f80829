//! One file per tool. Each declares a documented `Input` (its `///` docs become the JSON schema
//! the agent sees), and one `#[tool]` method on [`McpServer`] in a router of its own.
//!
//! A tool that runs inside the node is one slice: its file holds its `Input`, builds the one
//! [`ToolCall`] it sends (the tool's name in the helper's table, its arguments held to
//! [`crate::bounds`], its time limit) and shapes the reply; the helper's data becomes the
//! result's `structuredContent` as it came (its shape is checked by the tool's own test).
//! Its line in the table below (`McpServer::routers_by_set`) says everything else the server
//! knows of it: its toolset, what it does given a cluster's name, whether it attaches.
//! Adding one takes the six places `CONTRIBUTING.md` lists ("Adding a tool"), which
//! `tests/tool_homes.rs` keeps true; the server's instructions and the README's tool table are
//! derived from this table.

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
pub mod ports;
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

use super::fanout::FanOut;
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

/// What a tool does given a cluster's name (the `name` of members `NAME-1…N` this server
/// started or attached): said on the tool's line of the table below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::mcp) enum OnCluster {
    /// It takes the cluster itself: `start` starts its members, `status` shows who sees
    /// whom, `partition` splits it.
    Itself,
    /// It asks every member at once and merges the answers ([`super::fanout`]): on every
    /// call (a tool that only looks, or only stops), or on calls that say `all: true`.
    Asks(FanOut),
    /// It acts on one node: it refuses, naming the members.
    Refuses,
}

/// One line of the table of tools: a router (the `#[tool_router]` of one file above), the set
/// its tools belong to, and what the server does with their calls besides routing them.
pub(in crate::mcp) struct Line {
    pub set: Toolset,
    pub router: ToolRouter<McpServer>,
    pub on_cluster: OnCluster,
    /// It attaches to a node or lets go of one (`attach`, `remove`): it loads or unloads code,
    /// yet a `--read-only` server offers it when `--allow-attach` says so, as attaching is
    /// how such a server reaches a production node.
    pub attaches: bool,
}

fn line(set: Toolset, router: ToolRouter<McpServer>, on_cluster: OnCluster) -> Line {
    Line {
        set,
        router,
        on_cluster,
        attaches: false,
    }
}

impl Line {
    fn attaches(self) -> Self {
        Self {
            attaches: true,
            ..self
        }
    }
}

impl McpServer {
    /// The one table of tools on this side: every tool's router, with its set and what the
    /// server does with its calls. A tool that is not here is not served.
    pub(super) fn routers_by_set() -> Vec<Line> {
        use FanOut::*;
        use OnCluster::*;
        use Toolset::*;
        vec![
            line(Core, Self::status_router(), Itself),
            line(Core, Self::start_router(), Itself),
            line(Core, Self::stop_router(), Asks(Always)),
            line(Core, Self::restart_router(), Refuses),
            line(Core, Self::wait_ready_router(), Asks(Always)),
            line(Core, Self::eval_router(), Asks(OptIn)),
            line(Core, Self::logs_router(), Asks(Always)),
            line(Core, Self::attach_router(), Refuses).attaches(),
            line(Core, Self::remove_router(), Refuses).attaches(),
            line(Introspect, Self::diagnose_router(), Asks(Always)),
            line(Introspect, Self::supervision_tree_router(), Asks(Always)),
            line(Introspect, Self::processes_router(), Asks(Always)),
            line(Introspect, Self::process_info_router(), Asks(Always)),
            line(Introspect, Self::get_state_router(), Asks(Always)),
            line(Introspect, Self::applications_router(), Asks(Always)),
            line(Introspect, Self::system_info_router(), Asks(Always)),
            line(Introspect, Self::ets_router(), Asks(Always)),
            line(Introspect, Self::ports_router(), Asks(Always)),
            line(Introspect, Self::waits_router(), Asks(Always)),
            line(Trace, Self::trace_router(), Refuses),
            line(Dev, Self::mix_router(), Refuses),
            line(Dev, Self::recompile_router(), Refuses),
            line(Dev, Self::partition_router(), Itself),
            line(Code, Self::docs_router(), Refuses),
            line(Code, Self::source_router(), Refuses),
            line(Code, Self::callers_router(), Refuses),
            line(Code, Self::find_router(), Refuses),
        ]
    }

    /// Runs one tool inside node `name` and turns the answer (or the failure) into a result.
    /// A tool that only looks asks a node still starting as soon as its helper answers
    /// (`Registry::look`); the others wait for it to be ready.
    async fn call_tool(&self, name: &str, call: ToolCall) -> CallToolResult {
        let answer = if self.only_looks(call.tool()) {
            self.registry.look(name, &call).await
        } else {
            self.registry.call_tool(name, &call).await
        };
        match answer {
            Ok(found) => success(found.text, &found.data),
            Err(e) => e.into(),
        }
    }
}
