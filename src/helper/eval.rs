//! The `eval` request: code in, rendered value and captured output (or a structured error) out.

use super::{ok_or_error, HelperError};
use crate::bounds;
use crate::term;
use eetf::Term;
use serde::{Deserialize, Serialize};
use std::time::Duration;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Cap on the rendered value and on the captured output, each.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// The language code is written in.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    // Elixir when the node runs Elixir, Erlang otherwise. (A `///` doc here would list this
    // value apart from the others in the tool schemas.)
    #[default]
    Auto,
    Elixir,
    Erlang,
}

impl Lang {
    /// The name the helper knows it by.
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Auto => "auto",
            Lang::Elixir => "elixir",
            Lang::Erlang => "erlang",
        }
    }
}

#[derive(Debug, Clone)]
pub struct EvalRequest {
    pub code: String,
    pub lang: Lang,
    /// Clamped to 1 ms ..= 60 s ([`bounds::EVAL_TIMEOUT_MS`]).
    pub timeout: Duration,
}

impl EvalRequest {
    pub fn new(code: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            lang: Lang::Auto,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// How long the code may run: [`EvalRequest::timeout`] held to [`bounds::EVAL_TIMEOUT_MS`].
    pub fn timeout(&self) -> Duration {
        bounds::EVAL_TIMEOUT_MS.clamp_ms(self.timeout)
    }

    pub(super) fn to_term(&self) -> Term {
        term::tuple(vec![
            term::atom("eval"),
            term::atom(self.lang.as_str()),
            term::binary(&self.code),
            term::map(vec![
                ("timeout_ms", term::int(self.timeout().as_millis() as i64)),
                ("max_result_bytes", term::int(MAX_RESULT_BYTES as i64)),
            ]),
        ])
    }
}

/// A successful evaluation.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct EvalOutput {
    /// The value, rendered like IEx (Elixir) or the shell (Erlang) would.
    pub value: String,
    /// What the code printed.
    pub output: String,
    pub lang: String,
    /// The value or output was cut to the size limit (a marker shows where).
    pub truncated: bool,
    pub duration_us: i64,
}

/// Code that did not evaluate: the node is fine.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct EvalError {
    /// syntax | compile | error | throw | exit | timeout | killed
    pub kind: String,
    /// For a raised exception, as the language prints it (`** (KeyError) key :a not found…`,
    /// `error:badarith` and the shell's explanation); otherwise what went wrong.
    pub message: String,
    /// The exception's name, when code raised one: `KeyError` (Elixir), `error:badarith`
    /// (Erlang `Class:Tag`), `throw`, `exit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exception: Option<String>,
    pub stacktrace: String,
    /// What the code printed before it failed.
    pub output: String,
}

impl EvalError {
    /// The first line of the error as an agent reads it: a raised exception speaks for
    /// itself (`** (RuntimeError) boom`); other failures (syntax, compile, timeout, killed)
    /// are named by their kind.
    pub fn headline(&self) -> String {
        let raised = matches!(self.kind.as_str(), "error" | "throw" | "exit");
        if raised && self.exception.is_some() {
            self.message.clone()
        } else {
            format!("{} error: {}", self.kind, self.message)
        }
    }
}

pub(super) fn decode_reply(reply: Term) -> Result<Result<EvalOutput, EvalError>, HelperError> {
    let text = |map: &Term, key: &str| {
        term::get(map, key)
            .and_then(term::as_text)
            .unwrap_or_default()
    };
    Ok(match ok_or_error(reply)? {
        Ok(map) => Ok(EvalOutput {
            value: text(&map, "value"),
            output: text(&map, "output"),
            lang: term::get(&map, "lang")
                .and_then(term::as_atom)
                .unwrap_or("")
                .to_string(),
            truncated: term::get(&map, "truncated")
                .and_then(term::as_bool)
                .unwrap_or(false),
            duration_us: term::get(&map, "duration_us")
                .and_then(term::as_i64)
                .unwrap_or(0),
        }),
        Err(map) if term::get(&map, "kind").is_some() => Err(EvalError {
            kind: term::get(&map, "kind")
                .and_then(term::as_atom)
                .unwrap_or("error")
                .to_string(),
            message: text(&map, "message"),
            exception: term::get(&map, "exception").and_then(term::as_text),
            stacktrace: text(&map, "stacktrace"),
            output: text(&map, "output"),
        }),
        Err(other) => return Err(HelperError::Refused(term::brief(&other))),
    })
}
