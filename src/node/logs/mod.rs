//! A node's log, kept after the node exits for post-mortems.
//!
//! It holds its stdout and stderr lines and the structured events its helper forwards
//! (`logger`), in one ring bounded in lines and bytes, each line numbered, timestamped and
//! tagged with its source, ANSI escapes stripped and long lines cut, until the node
//! is started again.
//!
//! This file is the store: the bounded ring, what goes into it (pushed lines, a program's
//! output read line by line) and who is told of new errors. What a line is lives in [`line`],
//! reading the ring back in [`query`], and the compact text form agents read in [`render`].

mod disk;
mod line;
mod query;
mod render;

pub use disk::{remove_disk_log, DiskLog, Kept};
pub use line::{Level, LogLine, Source};
pub use query::{Page, Query, Since};

use line::{bounded, console_level, strip_ansi, MAX_LINE_BYTES};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::SystemTime;
use tokio::io::{AsyncRead, AsyncReadExt};

/// How long output may stay without its newline before it is shown as a line.
pub const PARTIAL_IDLE: std::time::Duration = std::time::Duration::from_millis(500);

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
            self.push_at(line.at, line.source, line.level, &line.text, line.eval);
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
        self.push_at(SystemTime::now(), source, level, text, eval)
    }

    fn push_at(
        &self,
        at: SystemTime,
        source: Source,
        level: Option<Level>,
        text: &str,
        eval: bool,
    ) -> u64 {
        let text = bounded(&strip_ansi(text));
        let level = level.or_else(|| console_level(&text));
        let is_error = level.is_some_and(|lv| lv <= Level::Error);
        let mut ring = self.ring();
        let seq = ring.next_seq;
        ring.next_seq += 1;
        ring.unended = None;
        ring.bytes += text.len();
        let line = LogLine {
            seq,
            at,
            source,
            level,
            text,
            eval,
        };
        if let Some(disk) = self.disk.get() {
            disk.append(&line);
        }
        ring.lines.push_back(line);
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
}
