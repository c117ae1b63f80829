//! The compact text form of a node's log, what agents read.
//!
//! One short line per entry whatever
//! the entry (line breaks folded, cut at [`MAX_COMPACT_BYTES`] with a marker, and a console line
//! that carries its own `[level]` not tagged a second time), and a page as a header and its
//! lines.
//!
//! The helper renders each logger event as one line in the node's language and quiets the
//! node's console echo of the same events on nodes we start, so an event is read once.

use super::line::console_level;
use super::{Entry, LogLine, Page, Source};

/// Most bytes of a line's text in its compact form (the full text stays in `text`).
pub const MAX_COMPACT_BYTES: usize = 1024;

/// Most bytes of a folded entry's example (its count and span say the rest).
pub const MAX_FOLDED_BYTES: usize = 240;

impl LogLine {
    /// `#12 04:51:56.123 log [error] text`: one line, the text folded and cut at
    /// `MAX_COMPACT_BYTES` (`…[+N bytes]`). A console line (`12:00:00.000 [error] boom`) shows
    /// its own level only once.
    pub fn compact(&self) -> String {
        format!(
            "#{} {} {}",
            self.seq,
            clock(self.at),
            self.tagged(compact_text(&self.text, MAX_COMPACT_BYTES))
        )
    }

    /// `log [error] text`: the source, the level unless the text has it, and `text`.
    fn tagged(&self, text: std::borrow::Cow<'_, str>) -> String {
        let source = match self.source {
            Source::Stdout => "out",
            Source::Stderr => "err",
            Source::Logger => "log",
        };
        let level = match self.level {
            Some(_) if self.source != Source::Logger && console_level(&self.text).is_some() => {
                String::new()
            }
            Some(level) => format!("[{}] ", level.as_str()),
            None => String::new(),
        };
        format!("{source} {level}{text}")
    }
}

impl Entry {
    /// A line's compact form; lines folded into it as `#120 17:07:20.712–.731 log [error]
    /// 55 × example… (#120..#175)`, the example cut at [`MAX_FOLDED_BYTES`].
    pub fn compact(&self) -> String {
        if let Some(block) = &self.block {
            // A compiler diagnostic: its first line and place, and the lines it stands for.
            return format!(
                "{} ({} lines #{}..#{})",
                self.line.compact(),
                block.lines,
                self.seq,
                block.last_seq
            );
        }
        let Some(repeats) = &self.repeats else {
            return self.line.compact();
        };
        let (first, last) = (clock(self.at), clock(repeats.last_at));
        // `17:07:20.712–.731`: the end without what it shares with the start.
        let end = match first.get(..8) {
            _ if first == last => String::new(),
            Some(second) if last.starts_with(second) => format!("–{}", &last[8..]),
            _ => format!("–{last}"),
        };
        let example = compact_text(&self.text, MAX_FOLDED_BYTES);
        format!(
            "#{} {first}{end} {} (#{}..#{})",
            self.seq,
            self.tagged(format!("{} × {example}", repeats.count).into()),
            self.seq,
            repeats.last_seq
        )
    }
}

/// `04:51:56.123`: the time of day (UTC) with milliseconds.
fn clock(at: std::time::SystemTime) -> String {
    let time = humantime::format_rfc3339_millis(at).to_string();
    time.get(11..23).unwrap_or(&time).to_string()
}

impl Page {
    /// A header (`N matched, N shown, N buffered, N dropped; next since=N`), then one compact
    /// line per entry.
    pub fn compact(&self) -> String {
        let shown = if self.oldest_first && self.lines.len() < self.entries {
            format!("the first {}", self.lines.len())
        } else {
            self.lines.len().to_string()
        };
        let folded = if self.entries < self.matched {
            format!(" (folded into {})", self.entries)
        } else {
            String::new()
        };
        let by_level = if self.dropped_by_level.is_empty() {
            String::new()
        } else {
            let levels: Vec<String> = self
                .dropped_by_level
                .iter()
                .map(|(level, n)| format!("{level} {n}"))
                .collect();
            format!(" ({})", levels.join(", "))
        };
        let mut text = format!(
            "{} matched{folded}, {shown} shown, {} buffered, {} dropped{by_level}; next since={}",
            self.matched, self.buffered, self.dropped, self.next_seq
        );
        for entry in &self.lines {
            text.push('\n');
            text.push_str(&entry.compact());
        }
        text
    }
}

/// `text` cut to `max` characters, with `…` when something was left out.
pub(super) fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// `text` on one line (line breaks and the indentation after them folded to one space), cut at
/// `max` bytes with a marker saying how much was left out.
pub(super) fn compact_text(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    let folded: std::borrow::Cow<'_, str> = if text.contains(['\n', '\r']) {
        let mut out = String::with_capacity(text.len());
        for (i, part) in text.split(['\n', '\r']).enumerate() {
            let part = if i == 0 { part } else { part.trim_start() };
            if part.is_empty() {
                continue;
            }
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(part.trim_end());
        }
        out.into()
    } else {
        text.into()
    };
    if folded.len() <= max {
        return folded;
    }
    let cut = (0..=max)
        .rev()
        .find(|i| folded.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}…[+{} bytes]", &folded[..cut], folded.len() - cut).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::logs::{Level, LogBuffer, Query};

    #[test]
    fn the_compact_form_is_one_short_line_with_one_level() {
        let logs = LogBuffer::default();
        logs.push(
            Source::Stdout,
            None,
            "15:36:56.173 [error] GenServer Shop.Ledger terminating",
            false,
        );
        logs.push(
            Source::Logger,
            Some(Level::Error),
            "GenServer Shop.Ledger terminating\n** (RuntimeError) boom\n    lib/shop.ex:49",
            false,
        );
        logs.push(Source::Logger, Some(Level::Info), &"é".repeat(2000), false);
        let page = logs.query(&Query {
            tail: 10,
            ..Query::default()
        });
        let compact: Vec<String> = page.lines.iter().map(|e| e.compact()).collect();
        assert_eq!(page.lines[0].level, Some(Level::Error));
        assert!(
            compact[0].ends_with(" out 15:36:56.173 [error] GenServer Shop.Ledger terminating"),
            "{}",
            compact[0]
        );
        assert!(
            compact[1].ends_with(
                " log [error] GenServer Shop.Ledger terminating ** (RuntimeError) boom lib/shop.ex:49"
            ),
            "{}",
            compact[1]
        );
        assert!(compact[2].ends_with("…[+2976 bytes]"), "{}", compact[2]);
        assert!(compact[2].len() < MAX_COMPACT_BYTES + 64);
        assert_eq!(page.lines[2].text.len(), 4000, "the full text is kept");
    }
}
