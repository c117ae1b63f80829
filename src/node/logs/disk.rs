//! A node's log kept on disk too (with `--state-dir`), so that it outlives the server: the
//! next server reads it back into the node's ring ([`DiskLog::open`]).
//!
//! The server writes it, never the node: each line that enters the ring is appended here
//! (JSON, one line each), into a user-space buffer that a flusher thread writes out every
//! [`FLUSH_EVERY`], so that a server killed loses at most that much of it; warnings and
//! worse are written out at once. Bounded like the ring,
//! in lines and bytes, the oldest dropped first: each of two tracks (warnings and worse, and
//! the rest, so that chatter never pushes an error out) is two segments, the current one and
//! the one before, and a full current segment replaces the one before.

use super::{Level, LogLimits, LogLine, Source};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufRead, BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How often buffered lines reach the file: what a server killed may lose at most.
pub const FLUSH_EVERY: Duration = Duration::from_millis(250);

/// Warnings and worse get this share (in quarters) of the limits, the rest the other three.
const ERROR_QUARTERS: usize = 1;

pub struct DiskLog {
    tracks: Mutex<Tracks>,
}

struct Tracks {
    chatter: Track,
    errors: Track,
    /// The next line's number, across tracks: the order lines are read back in.
    next_n: u64,
    scratch: Vec<u8>,
    /// A write failed (disk full, directory gone): said once, then nothing more is written.
    broken: bool,
}

/// One track: its current segment, open for appending, and the segment before it.
struct Track {
    current: PathBuf,
    before: PathBuf,
    file: BufWriter<File>,
    lines: usize,
    bytes: usize,
    max_lines: usize,
    max_bytes: usize,
}

#[derive(Serialize)]
struct Written<'a> {
    n: u64,
    /// Milliseconds since 1970.
    t: u64,
    s: Source,
    #[serde(skip_serializing_if = "Option::is_none")]
    l: Option<Level>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    e: bool,
    /// The helper's line naming what died first in a cascade.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    f: bool,
    x: &'a str,
}

#[derive(Deserialize)]
struct ReadBack {
    n: u64,
    t: u64,
    s: Source,
    #[serde(default)]
    l: Option<Level>,
    #[serde(default)]
    e: bool,
    #[serde(default)]
    f: bool,
    x: String,
}

/// One line read back: when, from where, its level, its text, whether an eval made it, and
/// whether it is the helper's line naming what died first in a cascade.
pub struct KeptLine {
    pub at: SystemTime,
    pub source: Source,
    pub level: Option<Level>,
    pub text: String,
    pub eval: bool,
    pub first_to_die: bool,
}

/// What the disk held of a node's log, oldest first.
#[derive(Default)]
pub struct Kept {
    pub lines: Vec<KeptLine>,
    /// Lines that could not be read (cut by a crash mid-write, edited by hand).
    pub unreadable: usize,
}

fn paths(dir: &Path, base: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{base}.log")),
        dir.join(format!("{base}.log.1")),
    )
}

/// Deletes node `name`'s log files (`remove`).
pub fn remove_disk_log(dir: &Path, name: &str) {
    for base in [name.to_string(), format!("{name}.errors")] {
        let (current, before) = paths(dir, &base);
        let _ = std::fs::remove_file(current);
        let _ = std::fs::remove_file(before);
    }
}

impl DiskLog {
    /// Opens node `name`'s log in `dir`, reading back what it holds; new lines are appended.
    pub fn open(dir: &Path, name: &str, limits: LogLimits) -> std::io::Result<(Arc<Self>, Kept)> {
        let share = |max: usize, quarters: usize| (max * quarters / 4 / 2).max(1);
        let mut kept = Kept::default();
        let mut numbered = Vec::new();
        let chatter = Track::open(
            dir,
            name,
            share(limits.max_lines, 4 - ERROR_QUARTERS),
            share(limits.max_bytes, 4 - ERROR_QUARTERS),
            &mut numbered,
            &mut kept.unreadable,
        )?;
        let errors = Track::open(
            dir,
            &format!("{name}.errors"),
            share(limits.max_lines, ERROR_QUARTERS),
            share(limits.max_bytes, ERROR_QUARTERS),
            &mut numbered,
            &mut kept.unreadable,
        )?;
        numbered.sort_by_key(|(n, _)| *n);
        let next_n = numbered.last().map_or(0, |(n, _)| n + 1);
        kept.lines = numbered.into_iter().map(|(_, line)| line).collect();
        let log = Arc::new(Self {
            tracks: Mutex::new(Tracks {
                chatter,
                errors,
                next_n,
                scratch: Vec::with_capacity(256),
                broken: false,
            }),
        });
        flusher()
            .lock()
            .expect("flusher lock")
            .push(Arc::downgrade(&log));
        Ok((log, kept))
    }

    /// Appends `line` (to the buffer; the flusher writes it out).
    pub fn append(&self, line: &LogLine) {
        let mut tracks = self.tracks.lock().expect("disk log lock");
        if tracks.broken {
            return;
        }
        let tracks = &mut *tracks;
        let written = Written {
            n: tracks.next_n,
            t: line
                .at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            s: line.source,
            l: line.level,
            e: line.eval,
            f: line.first_to_die,
            x: &line.text,
        };
        tracks.next_n += 1;
        tracks.scratch.clear();
        if serde_json::to_writer(&mut tracks.scratch, &written).is_err() {
            return;
        }
        tracks.scratch.push(b'\n');
        let serious = line.level.is_some_and(|l| l <= Level::Warning);
        let track = if serious {
            &mut tracks.errors
        } else {
            &mut tracks.chatter
        };
        // A warning or an error is what a post-mortem needs most, and is rare: written out
        // at once, it is on disk as soon as it is in the ring.
        let written = track.append(&tracks.scratch).and_then(|()| {
            if serious {
                track.file.flush()
            } else {
                Ok(())
            }
        });
        if let Err(e) = written {
            tracks.broken = true;
            tracing::warn!(file = %track.current.display(), "cannot keep the log on disk: {e}; it is kept in memory only");
        }
    }

    fn flush(&self) {
        let mut tracks = self.tracks.lock().expect("disk log lock");
        if tracks.broken {
            return;
        }
        let flushed = tracks
            .chatter
            .file
            .flush()
            .and_then(|()| tracks.errors.file.flush());
        if let Err(e) = flushed {
            tracks.broken = true;
            tracing::warn!("cannot keep the log on disk: {e}; it is kept in memory only");
        }
    }
}

impl Track {
    /// Reads both segments of track `base` into `numbered`, and opens its current one for
    /// appending.
    fn open(
        dir: &Path,
        base: &str,
        max_lines: usize,
        max_bytes: usize,
        numbered: &mut Vec<(u64, KeptLine)>,
        unreadable: &mut usize,
    ) -> std::io::Result<Self> {
        let (current, before) = paths(dir, base);
        read_segment(&before, max_bytes, numbered, unreadable);
        let (lines, bytes) = read_segment(&current, max_bytes, numbered, unreadable);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&current)?;
        if bytes > 0 && !ends_with_newline(&current) {
            // A line cut by a crash: the next one starts on a line of its own.
            file.write_all(b"\n")?;
        }
        Ok(Self {
            current,
            before,
            file: BufWriter::with_capacity(64 * 1024, file),
            lines,
            bytes,
            max_lines,
            max_bytes,
        })
    }

    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all(bytes)?;
        self.lines += 1;
        self.bytes += bytes.len();
        if self.lines >= self.max_lines || self.bytes >= self.max_bytes {
            // The current segment becomes the one before; the oldest lines go.
            self.file.flush()?;
            std::fs::rename(&self.current, &self.before)?;
            let file = crate::node::private_file::create_private(&self.current)?;
            self.file = BufWriter::with_capacity(64 * 1024, file);
            self.lines = 0;
            self.bytes = 0;
        }
        Ok(())
    }
}

fn ends_with_newline(path: &Path) -> bool {
    use std::io::{Seek, SeekFrom};
    let mut last = [0u8];
    File::open(path)
        .and_then(|mut f| {
            f.seek(SeekFrom::End(-1))?;
            f.read_exact(&mut last)
        })
        .is_ok_and(|()| last[0] == b'\n')
}

/// Reads a segment's lines (at most `max_bytes` twice over: a file grown by hand is not read
/// whole) into `numbered`; answers its lines and bytes.
fn read_segment(
    path: &Path,
    max_bytes: usize,
    numbered: &mut Vec<(u64, KeptLine)>,
    unreadable: &mut usize,
) -> (usize, usize) {
    let Ok(file) = File::open(path) else {
        return (0, 0);
    };
    let mut reader = std::io::BufReader::new(file.take(2 * max_bytes as u64));
    let (mut lines, mut bytes) = (0, 0);
    let mut raw = Vec::new();
    loop {
        raw.clear();
        match reader.read_until(b'\n', &mut raw) {
            Ok(0) | Err(_) => break,
            Ok(n) => bytes += n,
        }
        lines += 1;
        let text = raw.strip_suffix(b"\n").unwrap_or(&raw);
        if text.is_empty() {
            continue;
        }
        match serde_json::from_slice::<ReadBack>(text) {
            Ok(line) => numbered.push((
                line.n,
                KeptLine {
                    at: UNIX_EPOCH + Duration::from_millis(line.t),
                    source: line.s,
                    level: line.l,
                    text: line.x,
                    eval: line.e,
                    first_to_die: line.f,
                },
            )),
            Err(_) => *unreadable += 1,
        }
    }
    (lines, bytes)
}

/// The logs the flusher thread writes out, started with the first.
fn flusher() -> &'static Mutex<Vec<Weak<DiskLog>>> {
    static LOGS: OnceLock<Mutex<Vec<Weak<DiskLog>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("os_sup-log-flush".into())
            .spawn(|| loop {
                std::thread::sleep(FLUSH_EVERY);
                let logs: Vec<Arc<DiskLog>> = {
                    let mut logs = flusher().lock().expect("flusher lock");
                    logs.retain(|log| log.strong_count() > 0);
                    logs.iter().filter_map(Weak::upgrade).collect()
                };
                for log in logs {
                    log.flush();
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(
                "cannot start the log flusher: {e}; logs reach the disk when their buffer fills"
            );
        }
        Mutex::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(n: u64, level: Option<Level>, text: &str) -> LogLine {
        LogLine {
            seq: n,
            at: SystemTime::now(),
            source: Source::Stdout,
            level,
            text: text.into(),
            eval: false,
            first_to_die: false,
        }
    }

    #[test]
    fn lines_come_back_in_order_bounded_with_errors_kept_apart() {
        let dir = tempfile::tempdir().unwrap();
        let limits = LogLimits {
            max_lines: 80,
            max_bytes: 1 << 20,
        };
        let (log, kept) = DiskLog::open(dir.path(), "web", limits).unwrap();
        assert!(kept.lines.is_empty());
        log.append(&line(0, Some(Level::Error), "boom"));
        for i in 0..1000 {
            log.append(&line(i, None, &format!("chatter {i}")));
        }
        log.append(&line(0, Some(Level::Warning), "careful"));
        log.flush();
        drop(log);
        // A line cut by a crash at the end of the current segment.
        let current = dir.path().join("web.log");
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&current)
            .unwrap();
        file.write_all(b"{\"n\":99999,\"t\":1,\"s\":\"std").unwrap();
        drop(file);

        let (log, kept) = DiskLog::open(dir.path(), "web", limits).unwrap();
        assert_eq!(kept.unreadable, 1);
        let texts: Vec<&str> = kept.lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts[0], "boom", "an error outlives 1000 lines of chatter");
        assert_eq!(*texts.last().unwrap(), "careful");
        assert_eq!(texts[texts.len() - 2], "chatter 999");
        // Chatter keeps 3/4 of 80 lines at most (two segments of 30), and at least one segment.
        let chatter = texts.iter().filter(|t| t.starts_with("chatter")).count();
        assert!((30..=60).contains(&chatter), "{chatter}");
        log.append(&line(0, None, "after"));
        log.flush();
        drop(log);
        let (_log, kept) = DiskLog::open(dir.path(), "web", limits).unwrap();
        assert_eq!(kept.lines.last().unwrap().text, "after");
        assert_eq!(
            kept.unreadable, 1,
            "the cut line stays on a line of its own"
        );
        remove_disk_log(dir.path(), "web");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
