//! Reading a node's log back.
//!
//! It decides which lines a [`Query`] wants (since a sequence number or a time,
//! at least a level, from a source, matching a pattern, without our own evals), the newest or
//! the oldest of them as a [`Page`] that says where the next one starts, and the error that goes
//! with an exit.

use super::fold::{self, Entry};
use super::render::cut_chars;
use super::{Level, LogBuffer, LogLine, Ring, Source};
use regex::Regex;
use serde::Serialize;
use std::collections::VecDeque;
use std::time::SystemTime;

/// Most characters of the error shown beside an exit (`status`, `stop`, `remove` repeat it;
/// `logs` has the whole line).
pub const EXIT_ERROR_CHARS: usize = 200;
/// ... of which its lead, when others followed it (they are told in what is left).
const EXIT_LEAD_CHARS: usize = 140;
/// An error logged longer than this before an exit is labelled as maybe unrelated to it.
pub const EXIT_ERROR_NEAR: std::time::Duration = std::time::Duration::from_secs(5);

/// Which lines to return.
#[derive(Debug, Default)]
pub struct Query {
    /// At most this many of the newest matching lines (the oldest, with `from_oldest`); with
    /// `fold`, this many entries.
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
    /// Lines of one shape logged close together as one entry ([`super::fold`]).
    pub fold: bool,
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
    pub lines: Vec<Entry>,
    /// Lines that matched (before `tail` cut them).
    pub matched: usize,
    /// Entries the matched lines folded into (equal to `matched` without folding).
    pub entries: usize,
    /// Lines in the buffer.
    pub buffered: usize,
    /// Lines dropped from the buffer since the node was started (it is bounded).
    pub dropped: u64,
    /// ... by level (`none`: lines without one); warnings and worse go only when they alone
    /// fill their share.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dropped_by_level: Vec<(String, u64)>,
    /// The next sequence number: pass it as `since` to read only newer lines (the next page).
    pub next_seq: u64,
    /// The lines are the oldest that matched, not the newest.
    pub oldest_first: bool,
}

/// The error that goes with a run's exit: its line's number (to read it whole) and text.
#[derive(Debug, Clone, PartialEq)]
pub struct ExitError {
    pub seq: u64,
    pub text: String,
}

impl Ring {
    /// Both rings' lines from the first at or after `since`, in sequence order.
    fn lines_since(&self, since: Option<Since>) -> impl Iterator<Item = &LogLine> {
        let first = |lines: &VecDeque<LogLine>| match since {
            Some(Since::Seq(seq)) => lines.partition_point(|l| l.seq < seq),
            Some(Since::Time(t)) => lines.partition_point(|l| l.at < t),
            None => 0,
        };
        let mut chatter = self
            .chatter
            .lines
            .range(first(&self.chatter.lines)..)
            .peekable();
        let mut kept = self.kept.lines.range(first(&self.kept.lines)..).peekable();
        std::iter::from_fn(move || match (chatter.peek(), kept.peek()) {
            (Some(c), Some(k)) if c.seq < k.seq => chatter.next(),
            (_, Some(_)) => kept.next(),
            (Some(_), None) => chatter.next(),
            (None, None) => None,
        })
    }

    /// The error-or-worse lines of the run from `run_from` logged up to `until`, newest last.
    fn errors_of_run(&self, run_from: u64, until: SystemTime) -> Vec<&LogLine> {
        // Errors never leave the kept ring for chatter.
        self.kept
            .lines
            .range(self.kept.lines.partition_point(|l| l.seq < run_from)..)
            .filter(|l| l.at <= until && l.level.is_some_and(|lv| lv <= Level::Error))
            .collect()
    }
}

impl LogBuffer {
    pub fn query(&self, query: &Query) -> Page {
        let ring = self.ring();
        let wanted = |l: &&LogLine| {
            query.source.is_none_or(|s| l.source == s)
                && query
                    .min_level
                    .is_none_or(|min| l.level.is_some_and(|lv| lv <= min))
                && !(query.skip_eval && l.eval)
                && query.grep.as_ref().is_none_or(|re| re.is_match(&l.text))
        };
        let mut matched = 0;
        let mut entries: VecDeque<Entry> = if query.fold {
            let mut all = Vec::new();
            for line in ring.lines_since(query.since).filter(wanted) {
                matched += 1;
                all.push(line);
            }
            fold::fold(all.into_iter()).into()
        } else {
            // Count every match, keep only the newest `tail` of them (or the oldest).
            let mut kept = VecDeque::with_capacity(query.tail.min(1024));
            for line in ring.lines_since(query.since).filter(wanted) {
                matched += 1;
                if (query.from_oldest && kept.len() < query.tail)
                    || (!query.from_oldest && query.tail > 0)
                {
                    kept.push_back(line);
                    if kept.len() > query.tail {
                        kept.pop_front();
                    }
                }
            }
            kept.into_iter().cloned().map(Entry::one).collect()
        };
        let total = if query.fold { entries.len() } else { matched };
        let mut next_seq = ring.next_seq;
        if query.from_oldest {
            if entries.len() > query.tail {
                next_seq = entries[query.tail].seq;
            } else if total > entries.len() {
                next_seq = entries.back().map_or(next_seq, |e| e.seq + 1);
            }
            entries.truncate(query.tail);
        } else {
            let cut = entries.len().saturating_sub(query.tail);
            entries.drain(..cut);
        }
        Page {
            matched,
            entries: total,
            lines: entries.into(),
            buffered: ring.len(),
            dropped: ring.dropped.iter().map(|(_, n)| n).sum(),
            dropped_by_level: ring
                .dropped
                .iter()
                .map(|(lv, n)| (lv.map_or("none", Level::as_str).to_string(), *n))
                .collect(),
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
            .map(|e| e.compact())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The error that goes with an exit at `exit_at` of the run whose lines start at
    /// `run_from`: the lead of the burst of error-or-worse lines nearest the exit (the line
    /// naming what died first when the helper found it, else the burst's first line), on one
    /// line cut to [`EXIT_ERROR_CHARS`] (its lead to [`EXIT_LEAD_CHARS`], then how many
    /// followed it, the most alike folded). One logged more than
    /// [`EXIT_ERROR_NEAR`] before the exit is labelled as such: it may have nothing to do with
    /// it (a failed request long before a kill).
    pub fn error_of_exit(&self, run_from: u64, exit_at: SystemTime) -> Option<ExitError> {
        let ring = self.ring();
        let burst = fold::last_burst(&ring.errors_of_run(run_from, exit_at));
        let lead = burst.first()?;
        let newest = burst
            .iter()
            .map(|e| e.repeats.as_ref().map_or(e.at, |r| r.last_at))
            .max()
            .unwrap_or(lead.at);
        let before = exit_at.duration_since(newest).unwrap_or_default();
        let max = if burst.len() > 1 {
            EXIT_LEAD_CHARS
        } else {
            EXIT_ERROR_CHARS
        };
        let mut text = cut_chars(&lead.compact(), max);
        // (the helper's line naming what died first says how many ended with it)
        if !lead.first_to_die {
            text.push_str(&fold::followers(&burst));
        }
        if before > EXIT_ERROR_NEAR {
            text.push_str(&format!(
                " ({}s before the exit: maybe not its cause)",
                before.as_secs()
            ));
        }
        Some(ExitError {
            seq: lead.seq,
            text,
        })
    }

    /// The newest error-or-worse line of the run whose lines start at `run_from`, on one line
    /// cut to [`EXIT_ERROR_CHARS`]: what `status` shows of a running node.
    pub fn newest_error(&self, run_from: u64) -> Option<String> {
        let ring = self.ring();
        let line = ring
            .kept
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
