//! What one line of a node's log is (its number, time, source, level and text) and how raw
//! output becomes one.
//!
//! ANSI escapes stripped, long lines cut, and the level of a console
//! logger line (`12:00:00.000 [error] …`) read from its text.

use regex::Regex;
use serde::Serialize;
use std::sync::OnceLock;
use std::time::SystemTime;

/// Most bytes of a line kept; a longer one is cut with a marker.
pub const MAX_LINE_BYTES: usize = 4096;

/// Where a line came from.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Stdout,
    Stderr,
    /// A structured event from the node's OTP `logger`.
    Logger,
}

/// OTP logger levels, most severe first (syslog order).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Emergency,
    Alert,
    Critical,
    Error,
    Warning,
    Notice,
    Info,
    Debug,
}

impl Level {
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "emergency" => Self::Emergency,
            "alert" => Self::Alert,
            "critical" => Self::Critical,
            "error" => Self::Error,
            "warning" | "warn" => Self::Warning,
            "notice" => Self::Notice,
            "info" => Self::Info,
            "debug" => Self::Debug,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Emergency => "emergency",
            Self::Alert => "alert",
            Self::Critical => "critical",
            Self::Error => "error",
            Self::Warning => "warning",
            Self::Notice => "notice",
            Self::Info => "info",
            Self::Debug => "debug",
        }
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LogLine {
    pub seq: u64,
    /// RFC 3339 UTC with milliseconds.
    #[serde(rename = "time", serialize_with = "rfc3339")]
    #[schemars(with = "String")]
    pub at: SystemTime,
    pub source: Source,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<Level>,
    pub text: String,
    /// Caused by an `eval` of this tool, not by the application.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub eval: bool,
    /// The helper's line naming the process whose exit started a cascade of crash reports
    /// (`os_sup_log_cascade`), as the helper marked it: the lead of the burst it follows.
    #[serde(skip)]
    #[schemars(skip)]
    pub first_to_die: bool,
}

/// Who logged a line, as the helper says it: the application, or one of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Origin {
    #[default]
    Application,
    /// A process running one of our `eval`s.
    Eval,
    /// The helper, naming the process whose exit started a cascade of crash reports.
    FirstToDie,
}

impl Origin {
    /// `eval` (true) or the application.
    pub fn of_eval(eval: bool) -> Self {
        if eval {
            Origin::Eval
        } else {
            Origin::Application
        }
    }
}

pub(super) fn rfc3339<S: serde::Serializer>(
    at: &SystemTime,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&humantime::format_rfc3339_millis(*at))
}

/// Lines longer than `MAX_LINE_BYTES` are cut with a marker.
pub(super) fn bounded(text: &str) -> String {
    let text = text.trim_end_matches('\r');
    if text.len() <= MAX_LINE_BYTES {
        return text.to_string();
    }
    let cut = (0..=MAX_LINE_BYTES)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}... (line truncated)", &text[..cut])
}

pub(super) fn strip_ansi(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('\x1b') {
        return text.into();
    }
    static ANSI: OnceLock<Regex> = OnceLock::new();
    let re = ANSI.get_or_init(|| {
        Regex::new(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]").expect("valid regex")
    });
    re.replace_all(text, "")
}

/// The level of a console logger line (`12:00:00.000 [error] …`, `[warning] …`).
pub(super) fn console_level(text: &str) -> Option<Level> {
    // Cheap test first: most lines have no `[level]` near their start.
    if !text.bytes().take(32).any(|b| b == b'[') {
        return None;
    }
    static PREFIX: OnceLock<Regex> = OnceLock::new();
    let re = PREFIX.get_or_init(|| {
        Regex::new(
            r"^(?:[\d:.\- ]+)?\[(emergency|alert|critical|error|warning|warn|notice|info|debug)\]",
        )
        .expect("valid regex")
    });
    re.captures(text).and_then(|c| Level::parse(&c[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_console_line_gives_its_level_and_other_brackets_do_not() {
        assert_eq!(
            console_level("12:00:00.000 [error] boom"),
            Some(Level::Error)
        );
        assert_eq!(console_level("[warn] careful"), Some(Level::Warning));
        assert_eq!(
            console_level("2026-11-22 10:00:00.000 [info] up"),
            Some(Level::Info)
        );
        assert_eq!(console_level("got [error] in the middle"), None);
        assert_eq!(console_level("[loud] not a level"), None);
        assert_eq!(console_level("plain"), None);
    }

    #[test]
    fn raw_output_is_cleaned_and_cut_on_a_character_boundary() {
        assert_eq!(strip_ansi("\x1b[1;31mred\x1b[0m plain"), "red plain");
        assert_eq!(
            bounded("ends with a carriage return\r"),
            "ends with a carriage return"
        );
        let long = format!("a{}", "é".repeat(MAX_LINE_BYTES));
        let cut = bounded(&long);
        assert!(cut.ends_with("... (line truncated)"), "{cut}");
        assert!(cut.len() <= MAX_LINE_BYTES + "... (line truncated)".len());
    }
}
