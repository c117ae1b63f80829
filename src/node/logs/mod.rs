//! A node's log: its stdout and stderr lines and the structured events its helper forwards
//! (`logger`), in one ring bounded in lines and bytes, each line numbered, timestamped and
//! tagged with its source, ANSI escapes stripped and long lines cut. Kept after the node exits,
//! until it is started again, for post-mortems.
//!
//! The helper renders each logger event as one line in the node's language and quiets the
//! node's console echo of the same events on nodes we start, so an event is read once. The
//! compact text form ([`LogLine::compact`]) stays one short line per entry whatever the entry:
//! line breaks folded, cut at [`MAX_COMPACT_BYTES`] with a marker, and a console line that
//! carries its own `[level]` is not tagged a second time.

use regex::Regex;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;
use tokio::io::{AsyncRead, AsyncReadExt};

pub const MAX_LINE_BYTES: usize = 4096;
/// Most bytes of a line's text in its compact form (the full text stays in `text`).
pub const MAX_COMPACT_BYTES: usize = 1024;
/// How long output may stay without its newline before it is shown as a line.
pub const PARTIAL_IDLE: std::time::Duration = std::time::Duration::from_millis(500);
/// Most characters of the error shown beside an exit (`status`, `stop`, `remove` repeat it;
/// `logs` has the whole line).
pub const EXIT_ERROR_CHARS: usize = 200;
/// An error logged longer than this before an exit is labelled as maybe unrelated to it.
pub const EXIT_ERROR_NEAR: std::time::Duration = std::time::Duration::from_secs(5);

/// How much of a node's log is kept: the oldest lines go first.
#[derive(Debug, Clone, Copy)]
pub struct LogLimits {
    pub max_lines: usize,
    pub max_bytes: usize,
}

impl Default for LogLimits {
    fn default() -> Self {
        Self {
            max_lines: 20_000,
            max_bytes: 8 * 1024 * 1024,
        }
    }
}

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

    fn as_str(self) -> &'static str {
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
}

fn rfc3339<S: serde::Serializer>(at: &SystemTime, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&humantime::format_rfc3339_millis(*at))
}

impl LogLine {
    /// `#12 04:51:56.123 log [error] text`: one line, the text folded and cut at
    /// `MAX_COMPACT_BYTES` (`…[+N bytes]`). A console line (`12:00:00.000 [error] boom`) shows
    /// its own level only once.
    pub fn compact(&self) -> String {
        let time = humantime::format_rfc3339_millis(self.at).to_string();
        let clock = time.get(11..23).unwrap_or(&time);
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
        format!(
            "#{} {clock} {source} {level}{}",
            self.seq,
            compact_text(&self.text)
        )
    }
}

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
    /// A sequence number (`120`), an RFC 3339 time (`2026-11-22T10:00:00Z`) or an age (`30s`,
    /// `5m`, `1h`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Ok(seq) = text.parse::<u64>() {
            return Ok(Self::Seq(seq));
        }
        if let Ok(age) = humantime::parse_duration(text) {
            return Ok(Self::Time(SystemTime::now() - age));
        }
        humantime::parse_rfc3339_weak(text)
            .map(Self::Time)
            .map_err(|_| format!("`since` must be a sequence number, an RFC 3339 time or an age like 30s or 5m, not `{text}`"))
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

impl Page {
    /// A header (`N matched, N shown, N buffered, N dropped; next since=N`), then one compact
    /// line per entry.
    pub fn compact(&self) -> String {
        let shown = if self.oldest_first && self.lines.len() < self.matched {
            format!("the first {}", self.lines.len())
        } else {
            self.lines.len().to_string()
        };
        let mut text = format!(
            "{} matched, {shown} shown, {} buffered, {} dropped; next since={}",
            self.matched, self.buffered, self.dropped, self.next_seq
        );
        for line in &self.lines {
            text.push('\n');
            text.push_str(&line.compact());
        }
        text
    }
}

#[derive(Default)]
pub struct LogBuffer {
    inner: Mutex<Ring>,
    limits: LogLimits,
    /// Error-or-worse lines pushed so far, for readers that wait for new ones.
    errors: tokio::sync::watch::Sender<u64>,
}

#[derive(Default)]
struct Ring {
    lines: VecDeque<LogLine>,
    bytes: usize,
    next_seq: u64,
    dropped: u64,
    /// The newest line was output the program has not ended with a newline (a prompt, most
    /// likely), shown after [`PARTIAL_IDLE`]: its sequence number and when it was shown.
    unended: Option<(u64, std::time::Instant)>,
}

impl LogBuffer {
    pub fn new(limits: LogLimits) -> Self {
        Self {
            inner: Mutex::default(),
            limits,
            errors: Default::default(),
        }
    }

    /// Counts the error-or-worse lines pushed: it changes on each new one (`changed()`), and
    /// is closed when the buffer (its node) is dropped.
    pub fn errors(&self) -> tokio::sync::watch::Receiver<u64> {
        self.errors.subscribe()
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.inner.lock().expect("log lock")
    }

    pub fn push(&self, source: Source, level: Option<Level>, text: &str, eval: bool) {
        self.push_line(source, level, text, eval);
    }

    /// [`push`](Self::push), answering the line's sequence number.
    fn push_line(&self, source: Source, level: Option<Level>, text: &str, eval: bool) -> u64 {
        let text = bounded(&strip_ansi(text));
        let level = level.or_else(|| console_level(&text));
        let at = SystemTime::now();
        let is_error = level.is_some_and(|lv| lv <= Level::Error);
        let mut ring = self.ring();
        let seq = ring.next_seq;
        ring.next_seq += 1;
        ring.unended = None;
        ring.bytes += text.len();
        ring.lines.push_back(LogLine {
            seq,
            at,
            source,
            level,
            text,
            eval,
        });
        while ring.lines.len() > self.limits.max_lines || ring.bytes > self.limits.max_bytes {
            let Some(old) = ring.lines.pop_front() else {
                break;
            };
            ring.bytes -= old.text.len();
            ring.dropped += 1;
        }
        drop(ring);
        if is_error {
            // After the line is in the ring, so that a woken reader finds it.
            self.errors.send_modify(|n| *n += 1);
        }
        seq
    }

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

    /// The sequence number the next line will get (a run's lines start there).
    pub fn next_seq(&self) -> u64 {
        self.ring().next_seq
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

    /// The program's question, when its output ends in a line it has not ended for `idle`
    /// and that reads as one (`… [Yn]`, `Password:`, `Continue?`), not a shell's prompt
    /// (`iex(1)>`, `1>`): it waits for an answer on its standard input.
    pub fn unanswered_prompt(&self, idle: std::time::Duration) -> Option<String> {
        let ring = self.ring();
        let (seq, shown) = ring.unended?;
        let line = ring.lines.back().filter(|l| l.seq == seq)?;
        let text = line.text.trim_end();
        let asks = text.ends_with(['?', ']', ')', ':']);
        (shown.elapsed() + PARTIAL_IDLE >= idle && asks).then(|| text.to_string())
    }

    /// Reads `source` to its end, one bounded line at a time; a line left unended for
    /// [`PARTIAL_IDLE`] is shown as it is (a prompt must be visible while it waits).
    pub async fn collect(&self, tag: Source, mut source: impl AsyncRead + Unpin) {
        let mut chunk = [0u8; 8192];
        let mut line: Vec<u8> = Vec::new();
        loop {
            let read = if line.is_empty() {
                source.read(&mut chunk).await
            } else {
                match tokio::time::timeout(PARTIAL_IDLE, source.read(&mut chunk)).await {
                    Ok(read) => read,
                    Err(_) => {
                        let seq = self.push_line(tag, None, &String::from_utf8_lossy(&line), false);
                        line.clear();
                        let mut ring = self.ring();
                        if ring.next_seq == seq + 1 {
                            ring.unended = Some((seq, std::time::Instant::now()));
                        }
                        continue;
                    }
                }
            };
            let n = match read {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for &byte in &chunk[..n] {
                if byte == b'\n' {
                    self.push(tag, None, &String::from_utf8_lossy(&line), false);
                    line.clear();
                } else if line.len() <= MAX_LINE_BYTES {
                    // One byte over the cap is enough for `bounded` to see the cut.
                    line.push(byte);
                }
            }
        }
        if !line.is_empty() {
            self.push(tag, None, &String::from_utf8_lossy(&line), false);
        }
    }
}

/// `text` cut to `max` characters, with `…` when something was left out.
fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// `text` on one line (line breaks and the indentation after them folded to one space), cut at
/// `MAX_COMPACT_BYTES` with a marker saying how much was left out.
fn compact_text(text: &str) -> std::borrow::Cow<'_, str> {
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
    if folded.len() <= MAX_COMPACT_BYTES {
        return folded;
    }
    let cut = (0..=MAX_COMPACT_BYTES)
        .rev()
        .find(|i| folded.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}…[+{} bytes]", &folded[..cut], folded.len() - cut).into()
}

/// Lines longer than `MAX_LINE_BYTES` are cut with a marker.
fn bounded(text: &str) -> String {
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

fn strip_ansi(text: &str) -> std::borrow::Cow<'_, str> {
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
fn console_level(text: &str) -> Option<Level> {
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

    #[tokio::test]
    async fn lines_are_numbered_bounded_and_cleaned() {
        let logs = LogBuffer::default();
        let long = "x".repeat(MAX_LINE_BYTES * 2);
        let input = format!("\x1b[31mred\x1b[0m\n{long}\n12:00:01.000 [error] boom\ntail");
        logs.collect(Source::Stdout, input.as_bytes()).await;
        let page = logs.query(&Query {
            tail: 10,
            ..Query::default()
        });
        assert_eq!(page.lines.len(), 4);
        assert_eq!(page.lines[0].text, "red");
        assert!(page.lines[1].text.ends_with("(line truncated)"));
        assert!(page.lines[1].text.len() < MAX_LINE_BYTES + 40);
        assert_eq!(page.lines[2].level, Some(Level::Error));
        assert_eq!(page.lines[3].seq, 3);
        let exit = logs.error_of_exit(0, SystemTime::now()).unwrap();
        assert!(exit.contains("boom") && !exit.contains("maybe"), "{exit}");
        let later = SystemTime::now() + EXIT_ERROR_NEAR * 2;
        assert!(logs
            .error_of_exit(0, later)
            .unwrap()
            .contains("maybe not its cause"));
        assert_eq!(
            logs.error_of_exit(4, SystemTime::now()),
            None,
            "another run's"
        );
    }

    #[tokio::test]
    async fn an_unended_line_shows_after_a_pause_and_reads_as_a_question() {
        let logs = std::sync::Arc::new(LogBuffer::default());
        let (mut tx, rx) = tokio::io::duplex(64);
        let reader = tokio::spawn({
            let logs = logs.clone();
            async move { logs.collect(Source::Stdout, rx).await }
        });
        use tokio::io::AsyncWriteExt;
        tx.write_all(b"Compiling 3 files\nContinue? [Yn] ")
            .await
            .unwrap();
        tokio::time::sleep(PARTIAL_IDLE * 2).await;
        assert!(logs.tail_text(1).trim_end().ends_with("Continue? [Yn]"));
        assert_eq!(
            logs.unanswered_prompt(PARTIAL_IDLE).as_deref(),
            Some("Continue? [Yn]")
        );
        tx.write_all(b"\niex(1)> ").await.unwrap();
        tokio::time::sleep(PARTIAL_IDLE * 2).await;
        assert_eq!(
            logs.unanswered_prompt(PARTIAL_IDLE),
            None,
            "a shell's prompt"
        );
        drop(tx);
        reader.await.unwrap();
    }

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

    #[test]
    fn error_lines_are_counted_for_watchers_once_they_are_in_the_ring() {
        let logs = LogBuffer::default();
        let mut errors = logs.errors();
        logs.push(Source::Logger, Some(Level::Warning), "careful", false);
        logs.push(Source::Stdout, None, "12:00:00.000 [info] fine", false);
        assert!(!errors.has_changed().unwrap());
        logs.push(Source::Stderr, None, "12:00:00.000 [error] boom", false);
        logs.push(Source::Logger, Some(Level::Critical), "worse", false);
        assert!(errors.has_changed().unwrap());
        assert_eq!(*errors.borrow_and_update(), 2);
        let page = logs.query(&Query {
            tail: 1,
            ..Query::default()
        });
        assert!(page.compact().ends_with("worse"), "{}", page.compact());
        drop(logs);
        assert!(errors.has_changed().is_err(), "closed with its buffer");
    }

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
        let compact: Vec<String> = page.lines.iter().map(LogLine::compact).collect();
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

    #[test]
    fn the_ring_is_bounded_and_counts_what_it_dropped() {
        let logs = LogBuffer::new(LogLimits {
            max_lines: 100,
            max_bytes: 1 << 20,
        });
        for i in 0..110 {
            logs.push(Source::Stdout, None, &format!("line {i}"), false);
        }
        let last = Query {
            tail: 1,
            ..Query::default()
        };
        let page = logs.query(&last);
        assert_eq!(page.buffered, 100);
        assert_eq!(page.dropped, 10);
        assert_eq!(page.lines[0].text, "line 109");

        let by_bytes = LogBuffer::new(LogLimits {
            max_lines: 100,
            max_bytes: 50,
        });
        for i in 0..10 {
            by_bytes.push(Source::Stdout, None, &format!("line {i}"), false);
        }
        assert_eq!(
            by_bytes.query(&last).buffered,
            8,
            "8 lines of 6 bytes fit in 50"
        );
    }
}
