//! Events the helper pushes to us: OTP logger events (`{os_sup_log, #{level, text, eval}}`,
//! and `first_to_die` on the helper's line naming what died first in a cascade).
//! The helper's `os_sup_log_handler` keeps them from its own start (the node's boot included) and,
//! once we subscribe, sends what it kept, then each new one; events it had to drop (more than
//! it keeps while nobody listens, or a flood) come as one `warning` event saying how many.

use crate::term;
use eetf::Term;
use tokio::sync::mpsc;

/// One logger event from the node.
#[derive(Debug, Clone)]
pub struct LogEvent {
    pub level: String,
    pub text: String,
    /// Logged by a process running one of our `eval`s.
    pub eval: bool,
    /// The helper's line naming the process whose exit started a cascade of crash reports.
    pub first_to_die: bool,
}

/// The node's pushed events on one connection; ends when that connection does.
pub struct LogEvents {
    pub(super) raw: mpsc::Receiver<Term>,
}

impl LogEvents {
    /// The next log event, skipping messages that are not log events.
    pub async fn next(&mut self) -> Option<LogEvent> {
        loop {
            let message = self.raw.recv().await?;
            let Some((tag, event)) = term::tagged(message) else {
                continue;
            };
            if tag != "os_sup_log" {
                continue;
            }
            return Some(LogEvent {
                level: term::get(&event, "level")
                    .and_then(term::as_atom)
                    .unwrap_or("info")
                    .to_string(),
                text: term::get(&event, "text")
                    .and_then(term::as_text)
                    .unwrap_or_default(),
                eval: term::get(&event, "eval").and_then(term::as_bool) == Some(true),
                first_to_die: term::get(&event, "first_to_die").and_then(term::as_bool)
                    == Some(true),
            });
        }
    }
}
