//! Folding what repeats, as the supervision tree folds a pool: lines of one shape (the same
//! text once numbers, pids and references are set aside, the same level and source) logged
//! close together are one [`Entry`] with their count, time span and the first of them as the
//! example (the first report of a burst is the one closest to its cause).
//!
//! A compiler's diagnostic (Elixir 1.18+ prints a type warning on twenty lines: the message,
//! the types, the code quoted in a box, then `└─ file:line`) is one [`Entry`] too: its first
//! line, with the place it names, standing for the [`Block`] of its lines.
//!
//! It also finds the lead of the burst of errors that ended a run: the helper's line naming
//! the process whose exit started the cascade (logged after the burst's reports, marked
//! [`first_to_die`](LogLine::first_to_die) by the helper) when it found one, else the burst's
//! first error.

use super::render::{compact_text, cut_chars};
use super::{Level, LogLine, Source};
use serde::Serialize;
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// Lines of one shape this close to the previous one fold into its entry…
pub const FOLD_GAP: Duration = Duration::from_secs(1);
/// … while the entry spans no more than this (chatter folds per stretch, not for ever).
pub const FOLD_SPAN: Duration = Duration::from_secs(10);

/// One line of a page, or the first of several alike that follow it closely.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Entry {
    #[serde(flatten)]
    pub line: LogLine,
    /// The lines folded into this one, itself included (absent: one line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeats: Option<Repeats>,
    /// The lines of the compiler diagnostic this line starts, itself included (absent: not
    /// one); read them whole with `since` this line's seq and `fold` off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<Block>,
}

/// The lines of one compiler diagnostic.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Block {
    pub lines: usize,
    pub last_seq: u64,
}

/// How many lines an entry stands for, and the last of them.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Repeats {
    pub count: usize,
    pub last_seq: u64,
    #[serde(rename = "last_time", serialize_with = "super::line::rfc3339")]
    #[schemars(with = "String")]
    pub last_at: SystemTime,
}

impl std::ops::Deref for Entry {
    type Target = LogLine;
    fn deref(&self) -> &LogLine {
        &self.line
    }
}

impl Entry {
    pub fn one(line: LogLine) -> Self {
        Self {
            line,
            repeats: None,
            block: None,
        }
    }

    /// The lines it stands for.
    pub fn count(&self) -> usize {
        self.repeats.as_ref().map_or(1, |r| r.count)
    }
}

/// `lines` (in sequence order) folded: each entry at the place of its first line.
pub fn fold<'a>(lines: impl Iterator<Item = &'a LogLine>) -> Vec<Entry> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut open: HashMap<String, usize> = HashMap::new();
    // The entry of the compiler diagnostic whose lines are still coming, and whether its
    // place was seen (then only the blank line after it is still its own).
    let mut diagnostic: Option<(usize, bool)> = None;
    for line in lines {
        if diagnostic_head(line) {
            diagnostic = Some((entries.len(), false));
            entries.push(Entry::one(line.clone()));
            continue;
        }
        if let Some((at, placed)) = diagnostic {
            let entry = &mut entries[at];
            let body = diagnostic_body(entry, line).filter(|_| !placed || line.text.is_empty());
            diagnostic = None;
            if body.is_some() {
                let block = entry.block.get_or_insert(Block {
                    lines: 1,
                    last_seq: entry.line.seq,
                });
                block.lines += 1;
                block.last_seq = line.seq;
                match place(&line.text) {
                    Some(place) if !placed => {
                        entry.line.text = format!("{} (at {place})", entry.line.text.trim());
                        diagnostic = Some((at, true));
                    }
                    _ if !placed => diagnostic = Some((at, false)),
                    _ => {}
                }
                continue;
            }
        }
        let key = shape(line);
        if let Some(&at) = open.get(&key) {
            let entry = &mut entries[at];
            let last = entry.repeats.as_ref().map_or(entry.line.at, |r| r.last_at);
            let close = line.at.duration_since(last).unwrap_or_default() <= FOLD_GAP;
            let short = line.at.duration_since(entry.line.at).unwrap_or_default() <= FOLD_SPAN;
            if close && short {
                let count = entry.count() + 1;
                entry.repeats = Some(Repeats {
                    count,
                    last_seq: line.seq,
                    last_at: line.at,
                });
                continue;
            }
        }
        open.insert(key, entries.len());
        entries.push(Entry::one(line.clone()));
    }
    entries
}

/// Lines a compiler diagnostic has at most (the rest of a longer one is left as lines).
const DIAGNOSTIC_LINES: usize = 80;

/// `warning: …` or `error: …` on a node's own output: what Mix's compile prints.
fn diagnostic_head(line: &LogLine) -> bool {
    let text = line.text.trim_start();
    line.source != Source::Logger && (text.starts_with("warning: ") || text.starts_with("error: "))
}

/// Whether `line` goes on the diagnostic `head` starts: an indented, boxed or empty line of
/// the same output, printed with it.
fn diagnostic_body(head: &Entry, line: &LogLine) -> Option<()> {
    let lines = head.block.as_ref().map_or(1, |b| b.lines);
    let text = line.text.as_str();
    let indented = text.is_empty() || text.starts_with(char::is_whitespace);
    // ` 39 │ code`: a quoted line of the source, numbered.
    let quoted = text
        .trim_start()
        .split_once(" │")
        .is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()));
    let together = line.at.duration_since(head.line.at).unwrap_or_default() <= FOLD_GAP;
    (line.source == head.line.source
        && together
        && lines < DIAGNOSTIC_LINES
        && (indented || quoted))
        .then_some(())
}

/// The place a diagnostic's last line names: `└─ lib/app/web.ex:39: App.Web.handle/1`
/// (Elixir 1.18+), or `  lib/app/web.ex:39: App.Web.handle/1` (before).
fn place(text: &str) -> Option<&str> {
    let text = text.trim();
    if let Some(place) = text.strip_prefix("└─") {
        return Some(place.trim());
    }
    let (file, rest) = text.split_once(':')?;
    let source = [".ex", ".exs", ".erl"]
        .iter()
        .any(|ext| file.ends_with(ext));
    (source && !file.contains(' ') && rest.starts_with(|c: char| c.is_ascii_digit()))
        .then_some(text)
}

/// A line's shape: its level, source and text with the numbers that tell alike lines apart
/// set aside as `#`. In a warning or worse (a report) every run of digits: pids, references,
/// times, counts and ids of the many processes of one kind. In chatter (a request's line) only
/// those of pids, references, ports and durations: a status, a path or a count is what the
/// line says (`Sent 404` never folds into `Sent 200`).
fn shape(line: &LogLine) -> String {
    let mut key = format!("{:?}{:?}", line.level, line.source);
    let report = line.level.is_some_and(|l| l <= Level::Warning);
    let text = line.text.as_str();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(id) = ["#PID<", "#Reference<", "#Port<", "<"]
            .iter()
            .find_map(|open| identifier(rest, open))
        {
            key.push_str("<#>");
            rest = &rest[id..];
            continue;
        }
        if c.is_ascii_digit() {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit() && c != '.')
                .unwrap_or(rest.len());
            let after = &rest[digits..];
            let unit = ["ms", "µs", "us", "ns", "s"]
                .iter()
                .find(|u| after.starts_with(**u) && !word_char(after[u.len()..].chars().next()));
            match unit {
                Some(u) => {
                    key.push('#');
                    key.push_str(u);
                    rest = &after[u.len()..];
                }
                None if report => {
                    key.push('#');
                    rest = after;
                }
                None => {
                    key.push_str(&rest[..digits]);
                    rest = after;
                }
            }
            continue;
        }
        key.push(c);
        rest = &rest[c.len_utf8()..];
    }
    key
}

/// The length of a pid, reference or port that `text` starts with (`#PID<0.1.0>`,
/// `<0.1.0>`): `open`, then digits and dots, then `>`.
fn identifier(text: &str, open: &str) -> Option<usize> {
    let inner = text.strip_prefix(open)?;
    let end = inner.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    (end > 0 && inner[end..].starts_with('>')).then_some(open.len() + end + 1)
}

fn word_char(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// Of error lines in sequence order ending with the one nearest a run's end, the burst that
/// one belongs to (each within [`FOLD_GAP`] of the next), folded: its lead first (the helper's
/// line naming what died first when the burst has one, else its first line), then the rest.
pub fn last_burst(errors: &[&LogLine]) -> Vec<Entry> {
    let Some(last) = errors.last() else {
        return vec![];
    };
    let mut start = errors.len() - 1;
    let mut newest = last.at;
    while start > 0 {
        let before = errors[start - 1];
        if newest.duration_since(before.at).unwrap_or_default() > FOLD_GAP {
            break;
        }
        newest = before.at;
        start -= 1;
    }
    let mut entries = fold(errors[start..].iter().copied());
    if let Some(lead) = entries.iter().position(|e| e.first_to_die) {
        let lead = entries.remove(lead);
        entries.insert(0, lead);
    }
    entries
}

/// `; then 57 more error lines, 55 × GenServer … terminating`: what followed a burst's lead,
/// its largest fold named.
pub fn followers(burst: &[Entry]) -> String {
    let rest = burst.get(1..).unwrap_or_default();
    let count: usize = rest.iter().map(Entry::count).sum();
    match rest.iter().max_by_key(|e| e.count()) {
        Some(most) if most.count() > 1 => {
            // The process the text starts with is only the example's.
            let text = most.text.trim_start();
            let text = match text.split_once(' ') {
                Some((pid, rest)) if pid.starts_with("#PID<") || pid.starts_with('<') => rest,
                _ => text,
            };
            format!(
                "; then {count} more error lines, {} × {}",
                most.count(),
                cut_chars(&compact_text(text, MAX_FOLLOWER_BYTES), MAX_FOLLOWER_CHARS)
            )
        }
        Some(_) => format!("; then {count} more error lines"),
        None => String::new(),
    }
}

const MAX_FOLLOWER_BYTES: usize = 400;
const MAX_FOLLOWER_CHARS: usize = 56;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::logs::{Level, LogBuffer, Query, Source};

    /// Elixir 1.18's type warning (as 1.20.4 printed it for the demo fixture) and 1.14's
    /// unused variable: each one entry, its first line with its place.
    #[test]
    fn a_compiler_diagnostic_is_one_entry_with_its_place() {
        let logs = LogBuffer::default();
        let err = |text: &str| logs.push(Source::Stderr, None, text, false);
        logs.push(Source::Stdout, None, "Compiling 10 files (.ex)", false);
        for line in [
            "    warning: the right-hand side of || will never be executed:",
            "",
            "        conn.resp_body || \"\"",
            "",
            "    type warning found at:",
            "    │",
            " 39 │       body = conn.resp_body || \"\"",
            "    │       ~~~~~~~~~~~~~~~~~~~~~~~~~~~",
            "    │",
            "    └─ lib/demo_app/web.ex:39: DemoApp.Web.handle/1",
            "",
            "warning: variable \"x\" is unused",
            "  lib/demo_app/counter.ex:7: DemoApp.Counter.get/0",
            "",
        ] {
            err(line);
        }
        logs.push(Source::Stdout, None, "Generated demo_app app", false);
        let page = logs.query(&Query {
            tail: 100,
            fold: true,
            ..Query::default()
        });
        let shown: Vec<String> = page.lines.iter().map(|e| e.compact()).collect();
        assert_eq!(shown.len(), 4, "{shown:#?}");
        assert!(
            shown[1].ends_with(
                "err warning: the right-hand side of || will never be executed: (at \
             lib/demo_app/web.ex:39: DemoApp.Web.handle/1) (11 lines #1..#11)"
            ),
            "{shown:#?}"
        );
        assert!(
            shown[2].ends_with(
                "err warning: variable \"x\" is unused (at lib/demo_app/counter.ex:7: \
             DemoApp.Counter.get/0) (3 lines #12..#14)"
            ),
            "{shown:#?}"
        );
        assert!(
            shown[3].ends_with("out Generated demo_app app"),
            "{shown:#?}"
        );
    }

    #[test]
    fn chatter_folds_only_what_differs_in_pids_and_durations() {
        let logs = LogBuffer::default();
        for i in 0..20 {
            let (path, status) = if i % 2 == 0 { ("2", 200) } else { ("99", 404) };
            let info = |text: &str| logs.push(Source::Logger, Some(Level::Info), text, false);
            info(&format!("GET /api/items/{path} from #PID<0.{}.0>", 500 + i));
            info(&format!("Sent {status} in {}ms", 1 + i % 7));
        }
        let page = logs.query(&Query {
            tail: 100,
            fold: true,
            ..Query::default()
        });
        let folded: Vec<(String, usize)> = page
            .lines
            .iter()
            .map(|e| (e.text.clone(), e.count()))
            .collect();
        assert_eq!(folded.len(), 4, "{folded:?}");
        for (text, count) in [
            ("GET /api/items/2 ", 10),
            ("GET /api/items/99 ", 10),
            ("Sent 200", 10),
            ("Sent 404", 10),
        ] {
            assert!(
                folded
                    .iter()
                    .any(|(t, c)| t.starts_with(text) && *c == count),
                "{text}: {folded:?}"
            );
        }
    }

    #[test]
    fn alike_reports_fold_into_their_first_and_others_keep_their_place() {
        let logs = LogBuffer::default();
        logs.push(
            Source::Logger,
            Some(Level::Error),
            "GenServer Web.Telemetry terminating ** (stop) killed",
            false,
        );
        for i in 0..50 {
            logs.push(
                Source::Logger,
                Some(Level::Error),
                &format!("GenServer #PID<0.{}.0> terminating ** (stop) killed Last message: {{:EXIT, #PID<0.2{i}.0>, :killed}}", 300 + i),
                false,
            );
            if i == 10 {
                logs.push(Source::Logger, Some(Level::Error), "something else", false);
            }
        }
        let page = logs.query(&Query {
            tail: 10,
            fold: true,
            ..Query::default()
        });
        let counts: Vec<usize> = page.lines.iter().map(Entry::count).collect();
        assert_eq!(counts, [1, 50, 1]);
        assert_eq!(page.matched, 52);
        assert!(
            page.lines[1].text.contains("0.300.0"),
            "the first is the example"
        );
        assert_eq!(page.lines[1].repeats.as_ref().unwrap().last_seq, 51);
        let text = page.compact();
        assert!(text.contains("50 × GenServer #PID<0.300.0>"), "{text}");
        assert!(text.len() < 1024, "{}: {text}", text.len());
    }

    #[test]
    fn the_burst_that_ended_a_run_leads_with_what_died_first() {
        let logs = LogBuffer::default();
        logs.push(Source::Logger, Some(Level::Error), "long before", false);
        std::thread::sleep(FOLD_GAP + Duration::from_millis(100));
        logs.push(
            Source::Logger,
            Some(Level::Error),
            "Web.Telemetry killed",
            false,
        );
        for i in 0..5 {
            logs.push(
                Source::Logger,
                Some(Level::Error),
                &format!("acceptor {i} killed"),
                false,
            );
        }
        let exit = logs.error_of_exit(0, SystemTime::now()).unwrap();
        assert!(exit.text.contains("Web.Telemetry killed"), "{}", exit.text);
        assert!(exit.text.contains("5 × "), "{}", exit.text);
        assert_eq!(exit.seq, 1);
        logs.push_from(
            Source::Logger,
            Some(Level::Error),
            "os_sup_mcp: first to die: Web.Supervisor (killed)",
            crate::node::logs::Origin::FirstToDie,
        );
        let exit = logs.error_of_exit(0, SystemTime::now()).unwrap();
        assert!(
            exit.text.contains("first to die: Web.Supervisor"),
            "{}",
            exit.text
        );
        assert_eq!(exit.seq, 7);
        assert!(
            !exit.text.contains(" × "),
            "it says what followed: {}",
            exit.text
        );
    }
}
