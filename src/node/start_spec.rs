//! How to start a node, as a caller writes it: [`StartSpec`] is both the `start` tool's input
//! and one `[[node]]` of the configuration file, so the two never drift apart. It becomes a
//! validated [`NodeConfig`] with [`StartSpec::into_config`].

use super::child_config::{NodeConfig, RestartLimits, RestartPolicy};
use super::Readiness;
use crate::bounds;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// A readiness condition: `"app"` (the application started), `{"log": "regex"}`,
/// `{"port": 4000}` (accepting TCP connections on 127.0.0.1) or `{"url": "http://…"}`
/// (answering 2xx/3xx).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadySpec {
    #[default]
    App,
    Log(String),
    Port(u16),
    Url(String),
}

/// Written by hand: the derived schema has one branch per variant, each an object with one
/// required key, twice the size of this one for the same information.
impl schemars::JsonSchema for ReadySpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ReadySpec".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"anyOf": [
            {"type": "string", "enum": ["app"]},
            {"type": "object", "maxProperties": 1, "properties": {
                "log": {"type": "string"},
                "port": {"type": "integer"},
                "url": {"type": "string"}
            }}
        ]})
    }
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
    pub name: String,
    /// Mix project.
    #[serde(default)]
    pub path: Option<String>,
    /// Instead of mix.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    #[serde(default)]
    pub mix_env: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// For `mix run`.
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default = "default_start_timeout_ms")]
    pub start_timeout_ms: u64,
    #[serde(default)]
    pub ready: ReadySpec,
    /// Default transient.
    #[serde(default)]
    pub restart: RestartPolicy,
    #[serde(default = "default_backoff_ms")]
    pub backoff_ms: u64,
    #[serde(default = "default_max_backoff_ms")]
    pub max_backoff_ms: u64,
    /// In `restart_period_ms`.
    #[serde(default = "default_max_restarts")]
    pub max_restarts: u32,
    #[serde(default = "default_restart_period_ms")]
    pub restart_period_ms: u64,
    #[serde(default = "default_true")]
    pub restart_on_app_exit: bool,
    /// A cluster NAME-1..N; `{4000+index}` in env.
    #[serde(default)]
    pub nodes: Option<usize>,
    /// False: the app connects them.
    #[serde(default = "default_true")]
    pub connect: bool,
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
            cookie: None,
        })
    }
}
