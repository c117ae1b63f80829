//! One node's record in the state dir: how to start it again (its spec, without a secret),
//! the cluster it belongs to, and whether it was up. Plain data with its conversions from and
//! to a [`NodeConfig`]; reading and writing files is [`super`]'s job.

use crate::node::child_config::{NodeConfig, RestartLimits, RestartPolicy};
use crate::node::{Readiness, ReadySpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The format of a record; a file of another version is set aside, not guessed at.
pub const VERSION: u32 = 1;

/// Only the version, read first: a record of another version fails its full read for a
/// reason that says nothing useful.
#[derive(Deserialize)]
pub(super) struct Versioned {
    pub(super) version: u32,
}

/// What the state dir keeps of one node started by this server.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeRecord {
    pub version: u32,
    pub name: String,
    pub spec: SavedSpec,
    /// The cluster it is a member of (`start` with `nodes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<Membership>,
    /// Running, starting or restarting when last written: what `--resume` starts again.
    pub up: bool,
}

/// A node this server attached to: its name and where it is, never its cookie.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AttachedRecord {
    pub version: u32,
    pub name: String,
    /// Its Erlang node name (`name@host`).
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

/// A cluster member's place in it: what its environment is made from again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Membership {
    pub name: String,
    /// From 1.
    pub index: usize,
    /// Whether this server connects the members (`OS_SUP_CLUSTER`).
    pub connect: bool,
}

/// A [`NodeConfig`] without its secrets: the environment's names only (values may be
/// tokens), no cookie (a new one is made at each start by a new server).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SavedSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix_env: Option<String>,
    /// Names of the variables it was given; their values are not kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    pub start_timeout_ms: u64,
    pub ready: ReadySpec,
    pub restart: RestartPolicy,
    pub max_restarts: u32,
    pub restart_period_ms: u64,
    pub backoff_ms: u64,
    pub max_backoff_ms: u64,
    pub restart_on_app_exit: bool,
}

/// Variables this server sets on cluster members itself: made again, never reported missing.
pub const MEMBER_VARIABLES: [&str; 2] = ["OS_SUP_NODE_INDEX", "OS_SUP_CLUSTER"];

impl SavedSpec {
    pub fn of(config: &NodeConfig) -> Self {
        let ms = |d: Duration| d.as_millis().min(u64::MAX as u128) as u64;
        Self {
            path: config.path.clone(),
            command: config.command.clone(),
            mix_env: config.mix_env.clone(),
            env_names: config.env.keys().cloned().collect(),
            args: config.args.clone(),
            start_timeout_ms: ms(config.start_timeout),
            ready: match &config.readiness {
                Readiness::App => ReadySpec::App,
                Readiness::LogLine(re) => ReadySpec::Log(re.as_str().to_string()),
                Readiness::Port(port) => ReadySpec::Port(*port),
                Readiness::Http(url) => ReadySpec::Url(url.clone()),
            },
            restart: config.restart.policy,
            max_restarts: config.restart.max_restarts,
            restart_period_ms: ms(config.restart.period),
            backoff_ms: ms(config.restart.backoff),
            max_backoff_ms: ms(config.restart.max_backoff),
            restart_on_app_exit: config.restart.on_app_exit,
        }
    }

    /// The config of node `name` this spec describes, without the values of its environment
    /// (see [`Self::env_missing`]).
    pub fn to_config(&self, name: &str) -> Result<NodeConfig, String> {
        Ok(NodeConfig {
            name: name.to_string(),
            path: self.path.clone(),
            command: self.command.clone(),
            mix_env: self.mix_env.clone(),
            env: BTreeMap::new(),
            args: self.args.clone(),
            start_timeout: Duration::from_millis(self.start_timeout_ms),
            readiness: self.ready.to_readiness()?,
            restart: RestartLimits {
                policy: self.restart,
                max_restarts: self.max_restarts,
                period: Duration::from_millis(self.restart_period_ms),
                backoff: Duration::from_millis(self.backoff_ms),
                max_backoff: Duration::from_millis(self.max_backoff_ms),
                on_app_exit: self.restart_on_app_exit,
            },
            cookie: None,
        })
    }

    /// The variables it had whose values were not kept (this server's own set aside).
    pub fn env_missing(&self) -> Vec<&str> {
        self.env_names
            .iter()
            .map(String::as_str)
            .filter(|n| !MEMBER_VARIABLES.contains(n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_keeps_everything_but_secrets_and_comes_back_the_same() {
        let mut config = NodeConfig::mix("web", "/srv/web");
        config
            .env
            .insert("DATABASE_PASSWORD".into(), "hunter2".into());
        config.cookie = Some("secret-cookie".into());
        config.readiness = Readiness::LogLine(regex::Regex::new("up on \\d+").unwrap());
        config.restart.policy = RestartPolicy::Permanent;
        config.args = vec!["--no-compile".into()];
        let spec = SavedSpec::of(&config);
        let json = serde_json::to_string(&spec).unwrap();
        assert!(
            !json.contains("hunter2") && !json.contains("secret-cookie"),
            "{json}"
        );
        assert!(json.contains("DATABASE_PASSWORD"), "{json}");
        let back: SavedSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, spec);
        let again = back.to_config("web").unwrap();
        assert_eq!(again.path, config.path);
        assert_eq!(again.args, config.args);
        assert_eq!(again.restart.policy, RestartPolicy::Permanent);
        assert!(again.env.is_empty() && again.cookie.is_none());
        assert!(matches!(again.readiness, Readiness::LogLine(re) if re.as_str() == "up on \\d+"));
        assert_eq!(back.env_missing(), ["DATABASE_PASSWORD"]);
    }
}
