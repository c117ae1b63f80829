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
        })
    }
}
