//! Reading a node's log back.
//!
//! It decides which lines a [`Query`] wants (since a sequence number or a time,
//! at least a level, from a source, matching a pattern, without our own evals), the newest or
//! the oldest of them as a [`Page`] that says where the next one starts, and the error that goes
//! with an exit.

use super::render::cut_chars;
use super::{Level, LogBuffer, LogLine, Source};
use regex::Regex;
use serde::Serialize;
use std::collections::VecDeque;
use std::time::SystemTime;

/// Most characters of the error shown beside an exit (`status`, `stop`, `remove` repeat it;
/// `logs` has the whole line).
pub const EXIT_ERROR_CHARS: usize = 200;
/// An error logged longer than this before an exit is labelled as maybe unrelated to it.
pub const EXIT_ERROR_NEAR: std::time::Duration = std::time::Duration::from_secs(5);

/// Which lines to return.
#[derive(Debug, Default)]
pub struct Query {
    /// At most this many of the newest matching lines (the oldest, with `from_oldest`).
    pub tail: usize,
    /// Page forward from `since`: the oldest matching lines, and `next_seq` the one after
    /// the last shown, so that each page follows the one before.
    pub from_oldest: bool,
    pub since: Option<Since>,
    /// Only lines at least this severe (lines without a level are left out).
    pub min_level: Option<Level>,
    pub grep: Option<Regex>,
    pub source: Option<Source>,
    /// Leave out events caused by this tool's own evals.
    pub skip_eval: bool,
}

#[derive(Debug, Clone, Copy)]
pub enum Since {
    Seq(u64),
    Time(SystemTime),
}

impl Since {
    /// A sequence number (`120`), a time of day as log lines print it (`17:29:04.183`, UTC),
    /// an RFC 3339 time (`2026-11-22T10:00:00Z`) or an age (`30s`, `5m`, `1h`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Ok(seq) = text.parse::<u64>() {
            return Ok(Self::Seq(seq));
        }
        if let Ok(age) = humantime::parse_duration(text) {
            return Ok(Self::Time(SystemTime::now() - age));
        }
        if let Some(at) = clock_time(text, SystemTime::now()) {
            return Ok(Self::Time(at));
        }
        humantime::parse_rfc3339_weak(text)
            .map(Self::Time)
            .map_err(|_| format!("`since` must be a sequence number, a time as log lines print it (17:29:04.183, UTC), an RFC 3339 time or an age like 30s or 5m, not `{text}`"))
    }
}

/// `HH:MM:SS[.fff]` (or `HH:MM`), a time of day in UTC as log lines print it: the last such
/// moment up to `now` (today's, or yesterday's when today's is still ahead by more than a
/// minute: just after midnight, `23:59:58` is a line of a moment ago).
fn clock_time(text: &str, now: SystemTime) -> Option<SystemTime> {
    let well_formed = text.len() >= 5
        && text.as_bytes()[2] == b':'
        && text
            .chars()
            .all(|c| c.is_ascii_digit() || c == ':' || c == '.');
    if !well_formed {
        return None;
    }
    let clock = if text.len() == 5 {
        format!("{text}:00")
    } else {
        text.to_string()
    };
    let today = humantime::format_rfc3339(now).to_string();
    let at = humantime::parse_rfc3339_weak(&format!("{}T{clock}Z", today.get(..10)?)).ok()?;
    let day = std::time::Duration::from_secs(24 * 3600);
    match at.duration_since(now) {
        Ok(ahead) if ahead > std::time::Duration::from_secs(60) => at.checked_sub(day),
        _ => Some(at),
    }
}

/// The answer to a [`Query`].
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Page {
    pub lines: Vec<LogLine>,
    /// Lines that matched (before `tail` cut them).
    pub matched: usize,
    /// Lines in the buffer.
    pub buffered: usize,
    /// Lines dropped from the buffer since the node was started (it is bounded).
    pub dropped: u64,
    /// The next sequence number: pass it as `since` to read only newer lines (the next page).
    pub next_seq: u64,
    /// The lines are the oldest that matched, not the newest.
    pub oldest_first: bool,
}

impl LogBuffer {
    pub fn query(&self, query: &Query) -> Page {
        let ring = self.ring();
        // Lines are in sequence order: skip straight to `since`.
        let first = match query.since {
            Some(Since::Seq(seq)) => ring.lines.partition_point(|l| l.seq < seq),
            Some(Since::Time(t)) => ring.lines.partition_point(|l| l.at < t),
            None => 0,
        };
        let wanted = |l: &&LogLine| {
            query.source.is_none_or(|s| l.source == s)
                && query
                    .min_level
                    .is_none_or(|min| l.level.is_some_and(|lv| lv <= min))
                && !(query.skip_eval && l.eval)
                && query.grep.as_ref().is_none_or(|re| re.is_match(&l.text))
        };
        // Count every match, keep only the newest `tail` of them (or the oldest).
        let mut matched = 0;
        let mut kept: VecDeque<&LogLine> = VecDeque::with_capacity(query.tail.min(1024));
        for line in ring.lines.range(first..).filter(wanted) {
            matched += 1;
            if query.from_oldest && kept.len() < query.tail {
                kept.push_back(line);
            } else if !query.from_oldest && query.tail > 0 {
                if kept.len() == query.tail {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
        }
        let next_seq = match kept.back() {
            Some(last) if query.from_oldest && kept.len() < matched => last.seq + 1,
            _ => ring.next_seq,
        };
        Page {
            matched,
            lines: kept.into_iter().cloned().collect(),
            buffered: ring.lines.len(),
            dropped: ring.dropped,
            next_seq,
            oldest_first: query.from_oldest,
        }
    }

    /// The last `n` lines as text, for error messages.
    pub fn tail_text(&self, n: usize) -> String {
        self.tail_text_since(0, n)
    }

    /// [`Self::tail_text`] of the lines from sequence number `from` on.
    pub fn tail_text_since(&self, from: u64, n: usize) -> String {
        let page = self.query(&Query {
            tail: n,
            since: Some(Since::Seq(from)),
            ..Query::default()
        });
        page.lines
            .iter()
            .map(LogLine::compact)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The error that goes with an exit at `exit_at` of the run whose lines start at
    /// `run_from`: the newest error-or-worse line of that run, on one line cut to
    /// [`EXIT_ERROR_CHARS`]. One logged more than [`EXIT_ERROR_NEAR`] before the exit is
    /// labelled as such: it may have nothing to do with it (a failed request long before a
    /// kill).
    pub fn error_of_exit(&self, run_from: u64, exit_at: SystemTime) -> Option<String> {
        let ring = self.ring();
        let line = ring
            .lines
            .iter()
            .rev()
            .filter(|l| l.seq >= run_from && l.at <= exit_at)
            .find(|l| l.level.is_some_and(|lv| lv <= Level::Error))?;
        let before = exit_at.duration_since(line.at).unwrap_or_default();
        let text = cut_chars(&line.compact(), EXIT_ERROR_CHARS);
        Some(if before > EXIT_ERROR_NEAR {
            format!(
                "{text} ({}s before the exit: maybe not its cause)",
                before.as_secs()
            )
        } else {
            text
        })
    }

    /// The newest error-or-worse line of the run whose lines start at `run_from`, on one line
    /// cut to [`EXIT_ERROR_CHARS`]: what `status` shows of a running node.
    pub fn newest_error(&self, run_from: u64) -> Option<String> {
        let ring = self.ring();
        let line = ring
            .lines
            .iter()
            .rev()
            .take_while(|l| l.seq >= run_from)
            .find(|l| l.level.is_some_and(|lv| lv <= Level::Error))?;
        Some(cut_chars(&line.compact(), EXIT_ERROR_CHARS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_filter_by_level_source_grep_since_and_eval() {
        let logs = LogBuffer::default();
        logs.push(Source::Logger, Some(Level::Info), "started", false);
        logs.push(Source::Logger, Some(Level::Error), "crashed: badarg", false);
        logs.push(Source::Logger, Some(Level::Warning), "from eval", true);
        logs.push(Source::Stderr, None, "plain stderr", false);
        let q = |query: Query| logs.query(&Query { tail: 100, ..query });
        assert_eq!(
            q(Query {
                min_level: Some(Level::Warning),
                ..Query::default()
            })
            .matched,
            2
        );
        assert_eq!(
            q(Query {
                source: Some(Source::Stderr),
                ..Query::default()
            })
            .matched,
            1
        );
        let grep = Some(Regex::new("bad(arg)?").unwrap());
        assert_eq!(
            q(Query {
                grep,
                ..Query::default()
            })
            .lines[0]
                .seq,
            1
        );
        assert_eq!(
            q(Query {
                since: Some(Since::Seq(2)),
                ..Query::default()
            })
            .matched,
            2
        );
        assert_eq!(
            q(Query {
                skip_eval: true,
                ..Query::default()
            })
            .matched,
            3
        );
        let recent = Since::parse("5m").unwrap();
        assert_eq!(
            q(Query {
                since: Some(recent),
                ..Query::default()
            })
            .matched,
            4
        );
        assert!(Since::parse("yesterday-ish").is_err());
        assert!(Since::parse("25:61").is_err());
        let at = |text| {
            clock_time(
                text,
                humantime::parse_rfc3339("2026-11-22T10:00:00Z").unwrap(),
            )
        };
        assert_eq!(
            at("09:29:04.183"),
            humantime::parse_rfc3339("2026-11-22T09:29:04.183Z").ok()
        );
        assert_eq!(
            at("09:30"),
            humantime::parse_rfc3339("2026-11-22T09:30:00Z").ok()
        );
        // Ahead of now: a line of yesterday.
        assert_eq!(
            at("23:59:58"),
            humantime::parse_rfc3339("2026-11-21T23:59:58Z").ok()
        );
        assert!(matches!(
            Since::parse("2026-11-22T10:00:00Z"),
            Ok(Since::Time(_))
        ));
    }

    #[test]
    fn a_cursor_pages_forward_from_the_oldest_line() {
        let logs = LogBuffer::default();
        for i in 0..20 {
            logs.push(Source::Stdout, None, &format!("line {i}"), false);
        }
        let page = |since: u64| {
            logs.query(&Query {
                tail: 4,
                since: Some(Since::Seq(since)),
                from_oldest: true,
                ..Query::default()
            })
        };
        let first = page(0);
        let texts: Vec<&str> = first.lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["line 0", "line 1", "line 2", "line 3"]);
        assert_eq!(first.matched, 20);
        assert!(first.compact().starts_with("20 matched, the first 4 shown"));
        let second = page(first.next_seq);
        assert_eq!(second.lines[0].text, "line 4");
        let last = page(16);
        assert_eq!(last.lines.len(), 4);
        assert_eq!(last.next_seq, 20, "the end: the next line to come");
        // Without a cursor, the newest.
        let newest = logs.query(&Query {
            tail: 4,
            ..Query::default()
        });
        assert_eq!(newest.lines[0].text, "line 16");
    }
}
