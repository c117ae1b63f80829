//! `start`: launch a Mix project (or any BEAM command) with the helper injected, and wait until
//! it is ready.

use super::status::status_line;
use crate::mcp::output::success;
use crate::mcp::McpServer;
use crate::node::{NodeConfig, NodeStatus, RestartLimits};
use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// A unique name for the node (letters, digits, `_`, `-`; starts with a letter).
    pub name: String,
    /// Directory of the Mix project (containing mix.exs). Also the working directory for
    /// `command`. Omit to start a known, stopped node again with its previous settings.
    #[serde(default)]
    pub path: Option<String>,
    /// Full command instead of `elixir -S mix run --no-halt`, e.g. ["erl", "-noshell"],
    /// ["iex", "-S", "mix"], ["elixir", "-S", "mix", "phx.server"] or a release's start script.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// MIX_ENV (default: the project's default, usually dev).
    #[serde(default)]
    pub mix_env: Option<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Extra arguments appended to `mix run --no-halt`.
    #[serde(default)]
    pub args: Vec<String>,
    /// How long to wait for the application to start, in ms (default 120000; a first compile
    /// can be slow).
    #[serde(default = "default_start_timeout_ms")]
    pub start_timeout_ms: u64,
    /// Automatic restarts allowed within `restart_period_ms` before the node is `failed`
    /// (default 3).
    #[serde(default = "default_max_restarts")]
    pub max_restarts: u32,
    /// The window for `max_restarts`, in ms (default 60000).
    #[serde(default = "default_restart_period_ms")]
    pub restart_period_ms: u64,
}

fn default_start_timeout_ms() -> u64 {
    120_000
}
fn default_max_restarts() -> u32 {
    3
}
fn default_restart_period_ms() -> u64 {
    60_000
}

impl Input {
    fn into_config(self) -> NodeConfig {
        NodeConfig {
            name: self.name,
            path: self.path.map(PathBuf::from),
            command: self.command,
            mix_env: self.mix_env,
            env: self.env,
            args: self.args,
            start_timeout: Duration::from_millis(self.start_timeout_ms.clamp(1, 3_600_000)),
            restart: RestartLimits {
                max_restarts: self.max_restarts,
                period: Duration::from_millis(self.restart_period_ms.max(1)),
                ..RestartLimits::default()
            },
        }
    }
}

#[tool_router(router = start_router, vis = "pub(crate)")]
impl McpServer {
    /// Start an Erlang/Elixir node: by default `mix run --no-halt` in the Mix project at `path`
    /// (unchanged: a helper is injected at boot). Returns once the project's application has
    /// started, or an error with the exit status and the last 30 lines of output (compile
    /// errors, crashes on boot, timeouts). A crashed node is restarted automatically.
    #[tool(
        name = "start",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema_for_output::<NodeStatus>()
    )]
    pub async fn start(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let result = if input.path.is_none() && input.command.is_none() {
            self.registry.start_existing(&input.name).await
        } else {
            self.registry.start_node(input.into_config()).await
        };
        Ok(match result {
            Ok(status) => success(format!("started: {}", status_line(&status)), &status),
            Err(e) => e.into(),
        })
    }
}
