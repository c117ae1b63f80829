//! The helper's `status` reply: what a node says about itself.

use super::{ok_or_error, HelperError};
use crate::term;
use eetf::Term;
use serde::Serialize;

/// A node's own view of itself, as reported by the helper.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NodeInfo {
    pub node: String,
    pub otp_release: String,
    pub elixir_version: Option<String>,
    pub uptime_ms: i64,
    pub process_count: i64,
    pub memory_total: i64,
    /// The project's application (Mix projects) once known.
    pub app: Option<String>,
    /// Booted and, for Mix projects, the project's application started.
    pub ready: bool,
    /// Restarts the node's own supervisors made (read from their reports in its log).
    pub app_restarts: AppRestarts,
    /// The applications running when it answered (`None`: the controller did not answer).
    #[serde(skip)]
    pub started: Option<Vec<String>>,
}

/// The child restarts a node's supervisors made since its helper started: the application
/// restarting its own processes, which the OS-level `restarts` does not see.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct AppRestarts {
    pub total: i64,
    pub last_5m: i64,
    /// The latest one.
    pub last: Option<AppRestart>,
}

/// One child restart: its supervisor, the child and why it ended.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AppRestart {
    pub supervisor: String,
    pub child: String,
    pub reason: String,
    /// When, in ms since the Unix epoch (the node's clock).
    pub at_ms: i64,
}

impl AppRestarts {
    fn from_term(term: Option<&Term>) -> Self {
        let Some(map) = term else {
            return Self::default();
        };
        let int = |key: &str| term::get(map, key).and_then(term::as_i64).unwrap_or(0);
        let last = term::get(map, "last")
            .filter(|last| term::as_atom(last).is_none())
            .map(|last| {
                let text = |key: &str| {
                    term::get(last, key)
                        .and_then(term::as_text)
                        .unwrap_or_default()
                };
                AppRestart {
                    supervisor: text("supervisor"),
                    child: text("child"),
                    reason: text("reason"),
                    at_ms: term::get(last, "at_ms").and_then(term::as_i64).unwrap_or(0),
                }
            });
        Self {
            total: int("total"),
            last_5m: int("last_5m"),
            last,
        }
    }
}

impl NodeInfo {
    pub(super) fn from_reply(reply: Term) -> Result<Self, HelperError> {
        let map = ok_or_error(reply)?.map_err(|e| HelperError::Refused(term::brief(&e)))?;
        let text = |key: &str| term::get(&map, key).and_then(term::as_text);
        let atom = |key: &str| {
            term::get(&map, key)
                .and_then(term::as_atom)
                .filter(|a| *a != "undefined" && *a != "nil")
                .map(str::to_string)
        };
        let int = |key: &str| term::get(&map, key).and_then(term::as_i64).unwrap_or(0);
        Ok(Self {
            node: atom("node").unwrap_or_default(),
            otp_release: text("otp_release").unwrap_or_default(),
            elixir_version: text("elixir_version"),
            uptime_ms: int("uptime_ms"),
            process_count: int("process_count"),
            memory_total: int("memory_total"),
            app: atom("app"),
            ready: term::get(&map, "ready").and_then(term::as_bool) == Some(true),
            app_restarts: AppRestarts::from_term(term::get(&map, "app_restarts")),
            started: match term::get(&map, "started") {
                Some(Term::List(list)) => Some(
                    list.elements
                        .iter()
                        .filter_map(term::as_atom)
                        .map(str::to_string)
                        .collect(),
                ),
                _ => None,
            },
        })
    }
}
