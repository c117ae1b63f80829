//! `start`: launch a Mix project (or any BEAM command) with the helper injected, and wait until
//! it is ready.

use super::status::status_line;
use crate::mcp::output::success;
use crate::mcp::McpServer;
use crate::node::{NodeConfig, NodeError, NodeStatus, Query, RestartLimits, RestartPolicy};
use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ProgressNotificationParam, RequestMetaObject};
use rmcp::{tool, tool_router, ErrorData, Peer, RoleServer};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
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
    /// What "ready" means: `"app"` (default: the application started), `{"log": "regex"}`,
    /// `{"port": 4000}` or `{"url": "http://127.0.0.1:4000/health"}`.
    #[serde(default)]
    pub ready: super::wait_ready::ReadyInput,
    /// When to restart after an exit that was not asked for: `transient` (default: after a
    /// crash), `permanent` (after any exit) or `temporary` (never).
    #[serde(default)]
    pub restart: RestartPolicy,
    /// Delay before the first automatic restart in ms (default 250); doubles with each restart
    /// within the period.
    #[serde(default = "default_backoff_ms")]
    pub backoff_ms: u64,
    /// Cap on the restart delay in ms (default 5000).
    #[serde(default = "default_max_backoff_ms")]
    pub max_backoff_ms: u64,
    /// Automatic restarts allowed within `restart_period_ms` before the node is `failed`
    /// (default 3).
    #[serde(default = "default_max_restarts")]
    pub max_restarts: u32,
    /// The window for `max_restarts`, in ms (default 60000).
    #[serde(default = "default_restart_period_ms")]
    pub restart_period_ms: u64,
    /// For Mix projects: when the project's application exits while the VM stays up, treat
    /// it as a crash of the node (restarted per `restart`). Default true.
    #[serde(default = "default_true")]
    pub restart_on_app_exit: bool,
}

/// How often a long start reports progress (when the client asked for it).
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

fn default_start_timeout_ms() -> u64 {
    120_000
}
fn default_true() -> bool {
    true
}

fn default_backoff_ms() -> u64 {
    250
}
fn default_max_backoff_ms() -> u64 {
    5000
}
fn default_max_restarts() -> u32 {
    3
}
fn default_restart_period_ms() -> u64 {
    60_000
}

impl Input {
    /// The node configuration these options describe.
    pub fn into_config(self) -> Result<NodeConfig, String> {
        Ok(NodeConfig {
            readiness: self.ready.to_readiness()?,
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
                policy: self.restart,
                backoff: Duration::from_millis(self.backoff_ms.min(600_000)),
                max_backoff: Duration::from_millis(self.max_backoff_ms.min(3_600_000)),
                on_app_exit: self.restart_on_app_exit,
            },
        })
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
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let name = input.name.clone();
        let starting = async {
            if input.path.is_none() && input.command.is_none() {
                self.registry.start_existing(&input.name).await
            } else {
                match input.into_config() {
                    Ok(config) => self.registry.start_node(config).await,
                    Err(e) => Err(NodeError::BadConfig(e)),
                }
            }
        };
        let result = match meta.get_progress_token() {
            None => starting.await,
            Some(token) => {
                // A first compile can take minutes: tell the client what the node prints.
                tokio::pin!(starting);
                let mut ticks = tokio::time::interval(PROGRESS_EVERY);
                let mut step = 0.0;
                loop {
                    tokio::select! {
                        result = &mut starting => break result,
                        _ = ticks.tick() => {
                            step += 1.0;
                            let message = self.latest_line(&name).unwrap_or_else(|| "starting".into());
                            let progress = ProgressNotificationParam::new(token.clone(), step).with_message(message);
                            let _ = peer.notify_progress(progress).await;
                        }
                    }
                }
            }
        };
        Ok(match result {
            Ok(status) => success(format!("started: {}", status_line(&status)), &status),
            Err(e) => e.into(),
        })
    }
}

impl McpServer {
    /// The node's newest log line, for progress messages.
    fn latest_line(&self, name: &str) -> Option<String> {
        let query = Query {
            tail: 1,
            ..Query::default()
        };
        let page = self.registry.logs(name, &query).ok()?;
        page.lines.last().map(|l| l.text.clone())
    }
}
