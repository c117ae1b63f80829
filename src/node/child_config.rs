//! What a child is: its name, where and how it runs, and its restart limits. Validated here so
//! that the rest of the layer can trust it.

use super::NodeError;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// How to start one child node. Kept for restarts: a restart reuses it unchanged.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Unique name of the child in this server (also the base of its Erlang node name).
    pub name: String,
    /// Project directory (with `mix.exs` unless `command` is given); the working directory.
    pub path: Option<PathBuf>,
    /// Full command line replacing `elixir -S mix run --no-halt` (e.g. `erl -noshell`, a release).
    pub command: Option<Vec<String>>,
    /// `MIX_ENV` for Mix projects.
    pub mix_env: Option<String>,
    /// Extra environment variables.
    pub env: BTreeMap<String, String>,
    /// Extra arguments appended to `mix run --no-halt` (ignored with `command`).
    pub args: Vec<String>,
    /// How long `start` waits for the node to be ready.
    pub start_timeout: Duration,
    /// What "ready" means for `start`.
    pub readiness: super::Readiness,
    pub restart: RestartLimits,
    /// The cookie, shared by the members of a cluster; otherwise each node gets its own.
    pub cookie: Option<String>,
}

/// When a child that exited on its own is started again, as in OTP child specs.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum RestartPolicy {
    /// Restarted after a crash (non-zero exit, signal), not after a clean exit.
    #[default]
    Transient,
    /// Restarted after any exit it did not get from `stop`.
    Permanent,
    /// Never restarted.
    Temporary,
}

impl RestartPolicy {
    /// Whether an exit that was not asked for leads to a restart.
    pub fn restarts_after(self, clean_exit: bool) -> bool {
        match self {
            Self::Transient => !clean_exit,
            Self::Permanent => true,
            Self::Temporary => false,
        }
    }
}

/// OTP-style restart policy and intensity: at most `max_restarts` automatic restarts within
/// `period`, with exponential backoff.
#[derive(Debug, Clone, Copy)]
pub struct RestartLimits {
    pub policy: RestartPolicy,
    pub max_restarts: u32,
    pub period: Duration,
    /// Delay before the first automatic restart; doubles with each restart inside `period`,
    /// up to `max_backoff`.
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// A Mix project's application that exits while its VM lives on (`mix run --no-halt`
    /// keeps it up) counts as a crash of the node.
    pub on_app_exit: bool,
}

impl Default for RestartLimits {
    fn default() -> Self {
        Self {
            policy: RestartPolicy::Transient,
            max_restarts: 3,
            period: Duration::from_secs(60),
            backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(5),
            on_app_exit: true,
        }
    }
}

pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(120);

impl NodeConfig {
    /// A Mix project at `path` with defaults.
    pub fn mix(name: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        Self {
            name: name.into(),
            path: Some(path.into()),
            command: None,
            mix_env: None,
            env: BTreeMap::new(),
            args: Vec::new(),
            start_timeout: DEFAULT_START_TIMEOUT,
            readiness: super::Readiness::default(),
            restart: RestartLimits::default(),
            cookie: None,
        }
    }

    /// True when the child runs a Mix project (readiness = the project's app started).
    pub fn is_mix(&self) -> bool {
        self.command.is_none()
    }

    /// Checks everything that can be checked before spawning.
    pub fn validate(&self) -> Result<(), NodeError> {
        validate_name(&self.name)?;
        if let Some(path) = &self.path {
            let shown = path.display();
            let meta = std::fs::metadata(path)
                .map_err(|e| NodeError::BadConfig(format!("path `{shown}` is not usable: {e}")))?;
            if !meta.is_dir() {
                return Err(NodeError::BadConfig(format!(
                    "path `{shown}` is not a directory; give the Mix project's directory"
                )));
            }
            if self.is_mix() && !path.join("mix.exs").is_file() {
                return Err(NodeError::BadConfig(format!(
                    "no mix.exs in `{shown}`; give a Mix project's directory, or a `command` to run"
                )));
            }
        } else if self.is_mix() {
            return Err(NodeError::BadConfig(
                "give a `path` to a Mix project, or a `command` to run".into(),
            ));
        }
        match &self.command {
            Some(cmd) if cmd.first().is_none_or(|p| p.trim().is_empty()) => {
                return Err(NodeError::BadConfig("`command` is empty".into()))
            }
            _ => {}
        }
        if let Some(env) = &self.mix_env {
            if env.is_empty() || !env.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(NodeError::BadConfig(format!("invalid mix_env `{env}`")));
            }
        }
        for key in self.env.keys() {
            if key.is_empty() || key.contains('=') || key.contains('\0') {
                return Err(NodeError::BadConfig(format!(
                    "invalid environment variable name `{key}`"
                )));
            }
        }
        self.readiness.validate().map_err(NodeError::BadConfig)?;
        if self.start_timeout.is_zero() {
            return Err(NodeError::BadConfig(
                "start timeout must be positive".into(),
            ));
        }
        Ok(())
    }
}

/// Names become part of an Erlang node name and of log lines, so keep them plain.
pub fn validate_name(name: &str) -> Result<(), NodeError> {
    let ok = (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(NodeError::InvalidName(name.chars().take(80).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain() {
        for good in ["web", "a", "my_app-2"] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        for bad in ["", "1web", "a/b", "..", "a b", "é", &"x".repeat(65)] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn mix_projects_need_a_mix_file() {
        let dir = tempfile::tempdir().unwrap();
        let config = NodeConfig::mix("web", dir.path());
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("no mix.exs"), "{err}");
        std::fs::write(dir.path().join("mix.exs"), "").unwrap();
        assert!(config.validate().is_ok());
        let missing = NodeConfig::mix("web", dir.path().join("nope"));
        assert!(missing
            .validate()
            .unwrap_err()
            .to_string()
            .contains("not usable"));
    }
}
