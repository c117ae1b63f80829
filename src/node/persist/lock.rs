//! One server per state dir: `server.lock` is held with `flock` for the server's life (the
//! kernel lets go when the process dies, however it dies), names its holder (pid, start),
//! and says how the server ended: a clean exit writes it there; a server killed writes
//! nothing, and the file's time, touched every few seconds while it ran, says when it died.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::SystemTime;

/// How often a live server touches its lock file: how precisely the next one dates its end.
pub const BEAT_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// What the lock file says of its holder.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Holder {
    pid: u32,
    started_at: String,
    /// Written by a server that ended cleanly: when, and how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ended: Option<Ended>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Ended {
    at: String,
    how: String,
}

/// The lock, held until this value is dropped (or the process dies).
pub struct ServerLock {
    file: File,
}

fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

impl ServerLock {
    /// Takes the lock of `dir`, or says which server holds it. Also answers how the server
    /// before ended (`ended at T: how`), when one held it before.
    pub fn take(dir: &Path) -> Result<(Self, Option<String>), String> {
        let path = dir.join("server.lock");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        let before: Option<Holder> = serde_json::from_str(&text).ok();
        // SAFETY: flock on a file descriptor this function owns.
        let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if !taken {
            let who = match &before {
                Some(h) => format!("pid {}, started {}", h.pid, h.started_at),
                None => "a server that has not written its pid yet".into(),
            };
            return Err(format!(
                "state directory {} is in use by another os_sup_mcp server ({who}); two servers \
                 never share one: give this server its own --state-dir, or stop that one first",
                dir.display()
            ));
        }
        let previous = before.map(|h| match h.ended {
            Some(ended) => format!(
                "the server that ran it ended at {}: {}",
                ended.at, ended.how
            ),
            None => {
                let at = file
                    .metadata()
                    .and_then(|m| m.modified())
                    .map(|t| humantime::format_rfc3339_seconds(t).to_string())
                    .unwrap_or_else(|_| "an unknown time".into());
                format!(
                    "the server that ran it ended at {at}: killed (pid {}; it could not stop \
                     its nodes)",
                    h.pid
                )
            }
        });
        let lock = Self { file };
        lock.write(&Holder {
            pid: std::process::id(),
            started_at: now(),
            ended: None,
        })
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok((lock, previous))
    }

    fn write(&self, holder: &Holder) -> std::io::Result<()> {
        let mut file = &self.file;
        let json = serde_json::to_vec(holder)?;
        file.set_len(0)?;
        file.rewind()?;
        file.write_all(&json)?;
        file.sync_data()
    }

    /// The server is alive now: what the next one reads as its time of death if it is killed.
    pub fn beat(&self) {
        let _ = self.file.set_modified(SystemTime::now());
    }

    /// Writes how this server ends (it is about to exit).
    pub fn ended(&self, how: &str) {
        let holder = Holder {
            pid: std::process::id(),
            started_at: String::new(),
            ended: Some(Ended {
                at: now(),
                how: how.to_string(),
            }),
        };
        if let Err(e) = self.write(&holder) {
            tracing::warn!("cannot write how this server ended into server.lock: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_by_pid_and_the_next_one_learns_how_the_first_ended() {
        let dir = tempfile::tempdir().unwrap();
        let (first, previous) = ServerLock::take(dir.path()).unwrap();
        assert_eq!(previous, None);
        // flock locks belong to open files: a second open of the same file is refused.
        let refused = ServerLock::take(dir.path()).err().expect("refused");
        assert!(
            refused.contains(&format!("pid {}", std::process::id()))
                && refused.contains("--state-dir"),
            "{refused}"
        );
        drop(first);
        let (second, previous) = ServerLock::take(dir.path()).unwrap();
        let previous = previous.unwrap();
        assert!(previous.contains(": killed (pid "), "{previous}");
        second.ended("exited 0");
        drop(second);
        let (_third, previous) = ServerLock::take(dir.path()).unwrap();
        assert!(previous.unwrap().ends_with(": exited 0"));
    }
}
