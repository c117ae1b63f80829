//! One generic request for every tool that runs inside the node. [`ToolCall`] names the tool,
//! carries its arguments (built from typed values, numbers held to [`crate::bounds`] as they
//! are added) and how long it may run there, and is sent as `{tool, Tool, Args, TimeoutMs}`;
//! the helper looks the tool up in its one table (`os_sup_helper_tools:table/0`) and answers
//! `{ok, #{text, data}}`, read here as a [`ToolReply`] (text, and the data as plain JSON).
//!
//! This file knows no tool: each tool's slice (`src/mcp/tools/<tool>.rs`) builds its own call,
//! so adding a tool adds no variant, match arm or re-export here. Replies stay JSON; a slice
//! that reads fields types them itself (the dashboard's `processes` rows).

use super::{ok_or_error, HelperError, Lang};
use crate::bounds::Bound;
use crate::term;
use eetf::Term;
use std::time::Duration;

/// Time a tool may run inside the node unless its call says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// One call of a tool on the node: its name, its argument map and its time limit there.
#[derive(Debug, Clone)]
pub struct ToolCall {
    tool: &'static str,
    args: Vec<(&'static str, Term)>,
    timeout: Duration,
    /// The first argument refused while building (a required bound out of range): the call
    /// is then refused before anything is sent.
    invalid: Option<String>,
}

impl ToolCall {
    /// A call of `tool` (its name in the helper's table) with no arguments yet, allowed
    /// `DEFAULT_TIMEOUT` (5 s) on the node.
    pub fn new(tool: &'static str) -> Self {
        Self {
            tool,
            args: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            invalid: None,
        }
    }

    pub fn tool(&self) -> &'static str {
        self.tool
    }

    /// How long the tool may run inside the node (it is killed there after that).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sets how long the tool may run inside the node.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Lets the tool run `extra` longer than `DEFAULT_TIMEOUT` (its sampling window).
    pub fn with_window(self, extra: Duration) -> Self {
        self.with_timeout(DEFAULT_TIMEOUT + extra)
    }

    /// Text, sent as a binary; `None` is left out.
    pub fn text<'a>(mut self, key: &'static str, value: impl Into<Option<&'a str>>) -> Self {
        if let Some(value) = value.into() {
            self.args.push((key, term::binary(value)));
        }
        self
    }

    /// A number passed as given (it identifies rather than bounds: an arity, a sequence
    /// number); `None` is left out.
    pub fn int(mut self, key: &'static str, value: Option<u64>) -> Self {
        if let Some(value) = value {
            self.args
                .push((key, term::int(value.min(i64::MAX as u64) as i64)));
        }
        self
    }

    /// A number held to `bound` (the clamping rule of [`crate::bounds`]); `None` is left out.
    pub fn bounded(self, key: &'static str, value: Option<u64>, bound: Bound) -> Self {
        self.int(key, value.map(|v| bound.clamp(v)))
    }

    /// A number that must be in `bound` (the refusing rule of [`crate::bounds`]): out of
    /// range, the call is refused before anything is sent, naming `key` and the range.
    pub fn required(mut self, key: &'static str, value: u64, bound: Bound) -> Self {
        match bound.check(key, value) {
            Ok(value) => self.int(key, Some(value)),
            Err(refused) => {
                self.invalid.get_or_insert(refused);
                self
            }
        }
    }

    pub fn flag(self, key: &'static str, value: bool) -> Self {
        self.choice(key, Some(if value { "true" } else { "false" }))
    }

    /// A choice from a fixed set (sort keys and the like), sent as an atom.
    pub fn choice(mut self, key: &'static str, value: Option<&'static str>) -> Self {
        if let Some(value) = value {
            self.args.push((key, term::atom(value)));
        }
        self
    }

    /// Choices from a fixed set, sent as a list of atoms.
    pub fn choices(mut self, key: &'static str, values: &[&'static str]) -> Self {
        let atoms = values.iter().map(|v| term::atom(v)).collect();
        self.args.push((key, term::list(atoms)));
        self
    }

    /// Rendering syntax for terms in the reply.
    pub fn format(self, format: Lang) -> Self {
        self.choice("format", Some(format.as_str()))
    }

    /// `{tool, Tool, Args, TimeoutMs}`, or the refusal of an argument.
    pub(super) fn to_term(&self) -> Result<Term, HelperError> {
        if let Some(refused) = &self.invalid {
            return Err(HelperError::Invalid(refused.clone()));
        }
        Ok(term::tuple(vec![
            term::atom("tool"),
            term::atom(self.tool),
            term::map(self.args.clone()),
            term::int(self.timeout.as_millis() as i64),
        ]))
    }
}

/// What a tool answered: compact text for reading, and the same as plain JSON
/// ([`crate::term::to_json`] of the helper's `data`).
#[derive(Debug, Clone)]
pub struct ToolReply {
    pub text: String,
    pub data: serde_json::Value,
}

/// What a tool answered, its data read straight into the type `T` that owns it
/// ([`crate::term::decode`]): a pid stays a pid, nothing passes through JSON.
#[derive(Debug, Clone)]
pub struct TypedReply<T> {
    pub text: String,
    pub data: T,
}

pub(super) fn decode_typed<T: serde::de::DeserializeOwned>(
    tool: &str,
    reply: Term,
) -> Result<TypedReply<T>, HelperError> {
    match ok_or_error(reply)? {
        Ok(result) => {
            let data = term::get(&result, "data").ok_or_else(|| {
                HelperError::BadReply(format!("{tool} answered no data: {}", term::brief(&result)))
            })?;
            Ok(TypedReply {
                text: term::get(&result, "text")
                    .and_then(term::as_text)
                    .unwrap_or_default(),
                data: term::decode(data).map_err(|e| {
                    HelperError::BadReply(format!(
                        "{tool} answered data this server cannot read ({e}); is the node's \
                         helper from another os_sup_mcp version? `restart` the node"
                    ))
                })?,
            })
        }
        Err(error) => Err(failure(&error)),
    }
}

pub(super) fn decode_reply(reply: Term) -> Result<ToolReply, HelperError> {
    match ok_or_error(reply)? {
        Ok(result) => Ok(ToolReply {
            text: term::get(&result, "text")
                .and_then(term::as_text)
                .unwrap_or_default(),
            data: term::get(&result, "data")
                .map(term::to_json)
                .unwrap_or_default(),
        }),
        Err(error) => Err(failure(&error)),
    }
}

/// `{error, #{kind, message}}` as a [`HelperError::Failed`].
fn failure(error: &Term) -> HelperError {
    match term::get(error, "message").and_then(term::as_text) {
        Some(message) => HelperError::Failed {
            kind: term::get(error, "kind")
                .and_then(term::as_atom)
                .unwrap_or("error")
                .to_string(),
            message,
        },
        None => HelperError::Refused(term::brief(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds;

    #[test]
    fn numbers_are_clamped_and_required_ones_refused() {
        let call = ToolCall::new("processes").bounded("limit", Some(500), bounds::PROCESSES_LIMIT);
        let wire = call.to_term().unwrap();
        let Term::Tuple(parts) = wire else {
            panic!("not a tuple")
        };
        assert_eq!(
            term::get(&parts.elements[2], "limit").and_then(term::as_i64),
            Some(100)
        );
        let refused = ToolCall::new("trace")
            .required("max_events", 0, bounds::TRACE_MAX_EVENTS)
            .to_term()
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("max_events must be 1..=10000"),
            "{refused}"
        );
    }
}
