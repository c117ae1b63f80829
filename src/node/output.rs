//! A child's recent stdout/stderr: a ring of lines bounded in count and bytes, each line bounded
//! in length, so a chatty or hostile child cannot grow the sidecar's memory.

use std::collections::VecDeque;
use std::sync::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt};

const MAX_LINES: usize = 2000;
const MAX_BYTES: usize = 1024 * 1024;
pub const MAX_LINE_BYTES: usize = 4096;

#[derive(Default)]
pub struct OutputBuffer {
    inner: Mutex<Ring>,
}

#[derive(Default)]
struct Ring {
    lines: VecDeque<String>,
    bytes: usize,
    dropped: u64,
}

impl OutputBuffer {
    pub fn push(&self, line: String) {
        let mut ring = self.inner.lock().expect("output lock");
        ring.bytes += line.len();
        ring.lines.push_back(line);
        while ring.lines.len() > MAX_LINES || ring.bytes > MAX_BYTES {
            let Some(old) = ring.lines.pop_front() else {
                break;
            };
            ring.bytes -= old.len();
            ring.dropped += 1;
        }
    }

    /// The last `n` lines, oldest first.
    pub fn tail(&self, n: usize) -> Vec<String> {
        let ring = self.inner.lock().expect("output lock");
        let skip = ring.lines.len().saturating_sub(n);
        ring.lines.iter().skip(skip).cloned().collect()
    }

    pub fn clear(&self) {
        *self.inner.lock().expect("output lock") = Ring::default();
    }

    /// Reads `source` to its end, one bounded line at a time, prefixing each with `tag`.
    pub async fn collect(&self, tag: &str, mut source: impl AsyncRead + Unpin) {
        let mut chunk = [0u8; 8192];
        let mut line: Vec<u8> = Vec::new();
        let mut cut = false;
        loop {
            let n = match source.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for &byte in &chunk[..n] {
                if byte == b'\n' {
                    self.push(render(tag, &line, cut));
                    line.clear();
                    cut = false;
                } else if line.len() < MAX_LINE_BYTES {
                    line.push(byte);
                } else {
                    cut = true;
                }
            }
        }
        if !line.is_empty() {
            self.push(render(tag, &line, cut));
        }
    }
}

fn render(tag: &str, line: &[u8], cut: bool) -> String {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end_matches('\r');
    if cut {
        format!("[{tag}] {text}... (line truncated)")
    } else {
        format!("[{tag}] {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_and_total_are_bounded() {
        let buffer = OutputBuffer::default();
        let long = "x".repeat(MAX_LINE_BYTES * 2);
        let input = format!("one\n{long}\ntwo");
        buffer.collect("out", input.as_bytes()).await;
        let lines = buffer.tail(10);
        assert_eq!(lines[0], "[out] one");
        assert!(lines[1].ends_with("(line truncated)") && lines[1].len() < MAX_LINE_BYTES + 40);
        assert_eq!(lines[2], "[out] two");
        for i in 0..(MAX_LINES + 10) {
            buffer.push(format!("line {i}"));
        }
        assert_eq!(buffer.tail(usize::MAX).len(), MAX_LINES);
        assert_eq!(buffer.tail(1), vec![format!("line {}", MAX_LINES + 9)]);
    }
}
