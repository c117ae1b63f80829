//! How to start a node, as a caller writes it: [`StartSpec`] is both the `start` tool's input
//! and one `[[node]]` of the configuration file, so the two never drift apart. It becomes a
//! validated [`NodeConfig`] with [`StartSpec::into_config`].

use super::config::{NodeConfig, RestartLimits, RestartPolicy};
use super::Readiness;
use crate::bounds;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// A readiness condition: `"app"` (the application started), `{"log": "regex"}`,
/// `{"port": 4000}` (accepting TCP connections on 127.0.0.1) or `{"url": "http://…"}`
/// (answering 2xx/3xx).
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(rename = "ReadyInput")]
pub enum ReadySpec {
    #[default]
    App,
    Log(String),
    Port(u16),
    Url(String),
}

impl ReadySpec {
    /// The condition, its regular expression compiled.
    pub fn to_readiness(&self) -> Result<Readiness, String> {
        Ok(match self {
            Self::App => Readiness::App,
            Self::Log(re) => Readiness::LogLine(
                regex::Regex::new(re)
                    .map_err(|e| format!("`log` is not a valid regular expression: {e}"))?,
            ),
            Self::Port(port) => Readiness::Port(*port),
            Self::Url(url) => Readiness::Http(url.clone()),
        })
    }
}

/// How to start a node: the `start` tool's arguments and one `[[node]]` of the configuration
/// file. Its `///` docs are the tool's JSON schema.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartSpec {
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
    pub ready: ReadySpec,
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

impl StartSpec {
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
            start_timeout: Duration::from_millis(
                bounds::START_TIMEOUT_MS.clamp(self.start_timeout_ms),
            ),
            restart: RestartLimits {
                max_restarts: self.max_restarts,
                period: Duration::from_millis(
                    bounds::RESTART_PERIOD_MS.clamp(self.restart_period_ms),
                ),
                policy: self.restart,
                backoff: Duration::from_millis(bounds::BACKOFF_MS.clamp(self.backoff_ms)),
                max_backoff: Duration::from_millis(
                    bounds::MAX_BACKOFF_MS.clamp(self.max_backoff_ms),
                ),
                on_app_exit: self.restart_on_app_exit,
            },
        })
    }
}
