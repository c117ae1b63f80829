//! The `introspect` request: one round trip runs one introspection tool inside the node
//! (`os_sup_introspect:run/2`), which answers with a compact text and plain data.

use super::{ok_or_error, HelperError, Lang};
use crate::term;
use eetf::Term;
use std::time::Duration;

/// Arguments of one introspection tool, typed so callers never build terms.
#[derive(Debug, Default, Clone)]
pub struct Args(Vec<(&'static str, Term)>);

impl Args {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn text(mut self, key: &'static str, value: Option<&str>) -> Self {
        if let Some(value) = value {
            self.0.push((key, term::binary(value)));
        }
        self
    }

    pub fn int(mut self, key: &'static str, value: Option<u64>) -> Self {
        if let Some(value) = value {
            self.0
                .push((key, term::int(value.min(i64::MAX as u64) as i64)));
        }
        self
    }

    pub fn flag(self, key: &'static str, value: bool) -> Self {
        self.choice(key, Some(if value { "true" } else { "false" }))
    }

    /// A choice from a fixed set (sort keys and the like), sent as an atom.
    pub fn choice(mut self, key: &'static str, value: Option<&str>) -> Self {
        if let Some(value) = value {
            self.0.push((key, term::atom(value)));
        }
        self
    }

    /// Rendering syntax for terms in the reply.
    pub fn format(self, format: Lang) -> Self {
        let name = match format {
            Lang::Auto => "auto",
            Lang::Elixir => "elixir",
            Lang::Erlang => "erlang",
        };
        self.choice("format", Some(name))
    }

    fn to_term(&self) -> Term {
        term::map(self.0.clone())
    }
}

/// What an introspection tool found: compact text for reading, the same as JSON data.
#[derive(Debug, Clone)]
pub struct Introspection {
    pub text: String,
    pub data: serde_json::Value,
}

pub(super) fn request(tool: &str, args: &Args, timeout: Duration) -> Term {
    term::tuple(vec![
        term::atom("introspect"),
        term::atom(tool),
        args.to_term(),
        term::int(timeout.as_millis() as i64),
    ])
}

pub(super) fn decode_reply(reply: Term) -> Result<Introspection, HelperError> {
    match ok_or_error(reply)? {
        Ok(result) => Ok(Introspection {
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
pub(super) fn failure(error: &Term) -> HelperError {
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
