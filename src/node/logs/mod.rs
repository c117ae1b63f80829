//! A node's log, kept after the node exits for post-mortems.
//!
//! It holds its stdout and stderr lines and the structured events its helper forwards
//! (`logger`), each line numbered, timestamped and tagged with its source, ANSI escapes
//! stripped and long lines cut, until the node is started again.
//!
//! Two rings share one bound in lines and bytes: warnings and worse (and each run's last lines,
//! kept when it ends) apart from the rest, so that no volume of request logs evicts a crash.
//! Chatter gives way first; the kept ring gives way to itself only once it holds its share
//! ([`KEPT_SHARE`]). What each dropped is counted by level.
//!
//! This file is the store: the two rings, what goes into them (pushed lines, a program's
//! output read line by line) and who is told of new errors. What a line is lives in [`line`],
//! reading the rings back in [`query`], folding what repeats in [`fold`], and the compact text
//! form agents read in [`render`].
//!
//! The API others use: [`LogBuffer::push`], [`LogBuffer::collect`], [`LogBuffer::query`] (a
//! [`Query`] in, a [`Page`] out), [`LogBuffer::keep_run_end`] when a run ends, and the
//! one-line readers in [`query`] (`tail_text`, `error_of_exit`, `newest_error`).

mod disk;
mod fold;
mod line;
mod query;
mod render;

pub use disk::{remove_disk_log, DiskLog, Kept};
pub use fold::Entry;
pub use line::{Level, LogLine, Origin, Source};
pub use query::{ExitError, Page, Query, Since};

use line::{bounded, console_level, strip_ansi, MAX_LINE_BYTES};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::SystemTime;
use tokio::io::{AsyncRead, AsyncReadExt};

/// How long output may stay without its newline before it is shown as a line.
pub const PARTIAL_IDLE: std::time::Duration = std::time::Duration::from_millis(500);

/// The share of the bound the kept ring (warnings and worse, runs' last lines) holds on to
/// when the rest floods: it loses lines to chatter only above it.
pub const KEPT_SHARE: usize = 2;
/// A run's last lines kept with the warnings when it ends (what it printed as it died).
pub const RUN_END_LINES: usize = 40;

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

#[derive(Default)]
pub struct LogBuffer {
    inner: Mutex<Ring>,
    limits: LogLimits,
    /// Error-or-worse lines pushed so far, for readers that wait for new ones.
    errors: tokio::sync::watch::Sender<u64>,
    /// Where each line is also kept on disk, when the server has a state dir ([`disk`]).
    disk: std::sync::OnceLock<std::sync::Arc<DiskLog>>,
}

/// Lines in sequence order, and their bytes.
#[derive(Default)]
struct Lines {
    lines: VecDeque<LogLine>,
    bytes: usize,
}

impl Lines {
    fn push(&mut self, line: LogLine) {
        self.bytes += line.text.len();
        self.lines.push_back(line);
    }

    fn pop_oldest(&mut self) -> Option<LogLine> {
        let line = self.lines.pop_front()?;
        self.bytes -= line.text.len();
        Some(line)
    }
}

#[derive(Default)]
struct Ring {
    /// Info, debug and lines without a level.
    chatter: Lines,
    /// Warnings and worse, and each ended run's last lines.
    kept: Lines,
    next_seq: u64,
    /// Lines dropped, by level (`None`: lines without one).
    dropped: Vec<(Option<Level>, u64)>,
    /// The newest line was output the program has not ended with a newline (a prompt, most
    /// likely), shown after [`PARTIAL_IDLE`]: its sequence number and when it was shown.
    unended: Option<(u64, std::time::Instant)>,
}

impl Ring {
    fn len(&self) -> usize {
        self.chatter.lines.len() + self.kept.lines.len()
    }

    fn newest(&self) -> Option<&LogLine> {
        match (self.chatter.lines.back(), self.kept.lines.back()) {
            (Some(c), Some(k)) => Some(if c.seq > k.seq { c } else { k }),
            (c, k) => c.or(k),
        }
    }

    /// Drops the oldest lines until both bounds hold: chatter first, unless the kept ring
    /// holds more than its share.
    fn bound(&mut self, limits: &LogLimits) {
        let over = |r: &Self| {
            r.len() > limits.max_lines || r.chatter.bytes + r.kept.bytes > limits.max_bytes
        };
        while over(self) {
            let kept_over = self.kept.lines.len() > limits.max_lines / KEPT_SHARE
                || self.kept.bytes > limits.max_bytes / KEPT_SHARE;
            let old = if kept_over || self.chatter.lines.is_empty() {
                self.kept.pop_oldest()
            } else {
                self.chatter.pop_oldest()
            };
            let Some(old) = old else { break };
            match self.dropped.iter_mut().find(|(lv, _)| *lv == old.level) {
                Some((_, n)) => *n += 1,
                None => self.dropped.push((old.level, 1)),
            }
        }
    }
}

impl LogBuffer {
    pub fn new(limits: LogLimits) -> Self {
        Self {
            inner: Mutex::default(),
            limits,
            errors: Default::default(),
            disk: Default::default(),
        }
    }

    /// Keeps every line from now on on `disk` too.
    pub fn keep_on_disk(&self, disk: std::sync::Arc<DiskLog>) {
        let _ = self.disk.set(disk);
    }

    /// Puts lines a server before kept on disk back, oldest first, with their times.
    pub fn restore(&self, kept: Kept) {
        for line in kept.lines {
            let origin = match (line.first_to_die, line.eval) {
                (true, _) => Origin::FirstToDie,
                (false, eval) => Origin::of_eval(eval),
            };
            self.push_at(line.at, line.source, line.level, &line.text, origin);
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
        self.push_line(source, level, text, Origin::of_eval(eval));
    }

    /// [`push`](Self::push) of a line whose origin the helper told.
    pub fn push_from(&self, source: Source, level: Option<Level>, text: &str, origin: Origin) {
        self.push_line(source, level, text, origin);
    }

    /// [`push`](Self::push), answering the line's sequence number.
    fn push_line(&self, source: Source, level: Option<Level>, text: &str, origin: Origin) -> u64 {
        self.push_at(SystemTime::now(), source, level, text, origin)
    }

    fn push_at(
        &self,
        at: SystemTime,
        source: Source,
        level: Option<Level>,
        text: &str,
        origin: Origin,
    ) -> u64 {
        let text = bounded(&strip_ansi(text));
        let level = level.or_else(|| console_level(&text));
        let is_error = level.is_some_and(|lv| lv <= Level::Error);
        let mut ring = self.ring();
        let seq = ring.next_seq;
        ring.next_seq += 1;
        ring.unended = None;
        let line = LogLine {
            seq,
            at,
            source,
            level,
            text,
            eval: origin == Origin::Eval,
            first_to_die: origin == Origin::FirstToDie,
        };
        if let Some(disk) = self.disk.get() {
            disk.append(&line);
        }
        if level.is_some_and(|lv| lv <= Level::Warning) {
            ring.kept.push(line);
        } else {
            ring.chatter.push(line);
        }
        ring.bound(&self.limits);
        drop(ring);
        if is_error {
            // After the line is in the ring, so that a woken reader finds it.
            self.errors.send_modify(|n| *n += 1);
        }
        seq
    }

    /// A run ended: its last [`RUN_END_LINES`] lines (what it printed as it died) are kept
    /// with the warnings, out of the chatter's way.
    pub fn keep_run_end(&self) {
        let mut ring = self.ring();
        let ring = &mut *ring;
        let keep = ring.chatter.lines.len().min(RUN_END_LINES);
        let from = ring.chatter.lines.len() - keep;
        for line in ring.chatter.lines.drain(from..) {
            ring.chatter.bytes -= line.text.len();
            ring.kept.bytes += line.text.len();
            let at = ring.kept.lines.partition_point(|l| l.seq < line.seq);
            ring.kept.lines.insert(at, line);
        }
        ring.bound(&self.limits);
    }

    /// The sequence number the next line will get (a run's lines start there).
    pub fn next_seq(&self) -> u64 {
        self.ring().next_seq
    }

    /// The program's question, when its output ends in a line it has not ended for `idle`
    /// and that reads as one (`… [Yn]`, `Password:`, `Continue?`), not a shell's prompt
    /// (`iex(1)>`, `1>`): it waits for an answer on its standard input.
    pub fn unanswered_prompt(&self, idle: std::time::Duration) -> Option<String> {
        let ring = self.ring();
        let (seq, shown) = ring.unended?;
        let line = ring.newest().filter(|l| l.seq == seq)?;
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
                        let seq = self.push_line(
                            tag,
                            None,
                            &String::from_utf8_lossy(&line),
                            Origin::Application,
                        );
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

#[cfg(test)]
mod tests {
    use super::*;

    use super::query::EXIT_ERROR_NEAR;
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
        let exit = logs.error_of_exit(0, SystemTime::now()).unwrap().text;
        assert!(exit.contains("boom") && !exit.contains("maybe"), "{exit}");
        let later = SystemTime::now() + EXIT_ERROR_NEAR * 2;
        assert!(logs
            .error_of_exit(0, later)
            .unwrap()
            .text
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

    #[test]
    fn chatter_never_evicts_warnings_and_a_run_keeps_its_last_lines() {
        let logs = LogBuffer::new(LogLimits {
            max_lines: 100,
            max_bytes: 1 << 20,
        });
        logs.push(Source::Logger, Some(Level::Error), "the crash", false);
        for i in 0..30 {
            logs.push(Source::Stdout, None, &format!("dying {i}"), false);
        }
        logs.keep_run_end();
        for i in 0..10_000 {
            logs.push(
                Source::Logger,
                Some(Level::Info),
                &format!("GET /{i}"),
                false,
            );
        }
        let errors = logs.query(&Query {
            tail: 10,
            min_level: Some(Level::Error),
            ..Query::default()
        });
        assert_eq!(errors.lines[0].text, "the crash");
        let page = logs.query(&Query {
            tail: 100,
            ..Query::default()
        });
        assert_eq!(page.buffered, 100);
        assert_eq!(page.lines[0].text, "the crash", "in sequence order");
        assert_eq!(page.lines[30].text, "dying 29", "the run's last lines");
        assert_eq!(page.lines[31].text, format!("GET /{}", 10_000 - 69));
        assert_eq!(page.dropped_by_level, [("info".to_string(), 10_000 - 69)]);
        assert!(
            page.compact().contains("dropped (info 9931)"),
            "{}",
            page.compact()
        );

        // Warnings beyond their share give way to warnings, not to chatter.
        for i in 0..200 {
            logs.push(
                Source::Logger,
                Some(Level::Warning),
                &format!("w{i}"),
                false,
            );
        }
        let page = logs.query(&Query {
            tail: 100,
            ..Query::default()
        });
        assert_eq!(page.lines[50].text, "w150", "the newest half are warnings");
        assert!(page
            .lines
            .iter()
            .all(|l| l.text.starts_with('w') || l.text.starts_with("GET")));
        assert_eq!(
            page.lines
                .iter()
                .filter(|l| l.text.starts_with("GET"))
                .count(),
            50
        );
    }
}
