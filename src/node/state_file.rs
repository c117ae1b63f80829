//! Crash recovery: a small JSON file (mode 0600, one per server process, in a per-user
//! directory) lists the OS processes of the running children. If a server is killed and a
//! child somehow survives it (the control pipe normally stops them), the next server start
//! finds the file, checks that each recorded pid is still the same process (same start time,
//! its own process group), kills that process group, and reports it.

use super::private_file::{check_private, write_private};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Recorded {
    os_pid: u32,
    /// Start time of the process in clock ticks since boot (`/proc/PID/stat`): it identifies
    /// the process across `exec` and cannot be reused by another process with the same pid.
    start_time: u64,
    node: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Contents {
    server_pid: u32,
    server_start_time: u64,
    children: BTreeMap<String, Recorded>,
}

pub struct StateFile {
    path: PathBuf,
    contents: Mutex<Contents>,
}

/// The default directory: `$XDG_STATE_HOME/os_sup_mcp`, else `~/.local/state/os_sup_mcp`.
pub fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("os_sup_mcp");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => PathBuf::from(home).join(".local/state/os_sup_mcp"),
        // SAFETY: getuid never fails.
        None => std::env::temp_dir().join(format!("os_sup_mcp-{}", unsafe { libc::getuid() })),
    }
}

impl StateFile {
    /// Reaps what dead servers left behind in `dir`, then creates this server's file.
    /// Returns the file and one line per reaped process.
    pub fn open(dir: &Path, listener: &str) -> std::io::Result<(Self, Vec<String>)> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        check_private(dir)?;
        let reaped = reap_dead_servers(dir);
        let pid = std::process::id();
        let label: String = listener
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(80)
            .collect();
        let file = Self {
            path: dir.join(format!("{label}-{pid}.json")),
            contents: Mutex::new(Contents {
                server_pid: pid,
                server_start_time: start_time(pid).unwrap_or(0),
                children: BTreeMap::new(),
            }),
        };
        file.write()?;
        Ok((file, reaped))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records a child's OS process.
    pub fn record(&self, name: &str, os_pid: u32, node: &str) {
        let Some(start_time) = start_time(os_pid) else {
            return;
        };
        let record = Recorded {
            os_pid,
            start_time,
            node: node.to_string(),
        };
        self.contents
            .lock()
            .expect("state lock")
            .children
            .insert(name.to_string(), record);
        self.write_logged();
    }

    /// Forgets a child whose process is gone.
    pub fn forget(&self, name: &str) {
        let removed = self
            .contents
            .lock()
            .expect("state lock")
            .children
            .remove(name);
        if removed.is_some() {
            self.write_logged();
        }
    }

    /// Deletes the file (clean shutdown: nothing is left to reap).
    pub fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
    }

    fn write_logged(&self) {
        if let Err(e) = self.write() {
            tracing::warn!(path = %self.path.display(), "cannot write the state file: {e}");
        }
    }

    /// Writes atomically (a new temp file, never one that exists or a symlink, then rename),
    /// readable by the owner only.
    fn write(&self) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(&*self.contents.lock().expect("state lock"))?;
        write_private(&self.path, &json)
    }
}

/// Kills the surviving children of servers that are gone, and deletes their files.
fn reap_dead_servers(dir: &Path) -> Vec<String> {
    let mut reaped = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return reaped;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let Some(contents) = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Contents>(&bytes).ok())
        else {
            continue;
        };
        if same_process(contents.server_pid, contents.server_start_time) {
            continue; // that server is alive: its children are its own business
        }
        for (name, child) in &contents.children {
            if same_process(child.os_pid, child.start_time) && own_group(child.os_pid) {
                // SAFETY: plain syscall on a process group verified above.
                unsafe { libc::killpg(child.os_pid as libc::pid_t, libc::SIGKILL) };
                reaped.push(format!(
                    "reaped `{name}` (node {}, os pid {}) left by a server that died (pid {})",
                    child.node, child.os_pid, contents.server_pid
                ));
            }
        }
        let _ = std::fs::remove_file(&path);
    }
    reaped
}

/// The `/proc/PID/stat` fields after the command name (which may hold spaces and parens).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    Some(after_name.split_whitespace().map(str::to_string).collect())
}

/// Field 22 of `/proc/PID/stat` (index 19 after the name).
fn start_time(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// The process exists, is not a zombie and started when recorded.
fn same_process(pid: u32, recorded_start: u64) -> bool {
    match stat_fields(pid) {
        Some(fields) => {
            fields.first().is_some_and(|state| state != "Z")
                && start_time(pid) == Some(recorded_start)
        }
        None => false,
    }
}

/// The process leads its own process group (as every child we spawn does).
fn own_group(pid: u32) -> bool {
    stat_fields(pid)
        .and_then(|f| f.get(2).and_then(|g| g.parse::<u32>().ok()))
        .is_some_and(|pgrp| pgrp == pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_dir_others_can_reach_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("state");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let error = StateFile::open(&dir, "x")
            .err()
            .expect("refused")
            .to_string();
        assert!(
            error.contains("mode 0755") && error.contains("chmod 700"),
            "{error}"
        );

        let link = parent.path().join("link");
        std::os::unix::fs::symlink(parent.path(), &link).unwrap();
        let error = StateFile::open(&link, "x")
            .err()
            .expect("refused")
            .to_string();
        assert!(error.contains("not a directory"), "{error}");

        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(StateFile::open(&dir, "x").is_ok());
    }

    #[test]
    fn files_are_private_and_survivors_of_dead_servers_are_reaped() {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let (file, reaped) = StateFile::open(dir.path(), "127.0.0.1:9100").unwrap();
        assert!(reaped.is_empty());
        let mode = std::fs::metadata(file.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        // A "child" in its own process group, recorded under a server pid that is dead.
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .process_group(0)
            .spawn()
            .unwrap();
        let orphan = Contents {
            server_pid: u32::MAX - 1,
            server_start_time: 1,
            children: BTreeMap::from([(
                "web".to_string(),
                Recorded {
                    os_pid: child.id(),
                    start_time: start_time(child.id()).unwrap(),
                    node: "web@127.0.0.1".into(),
                },
            )]),
        };
        std::fs::write(
            dir.path().join("old-1.json"),
            serde_json::to_vec(&orphan).unwrap(),
        )
        .unwrap();
        let (_second, reaped) = StateFile::open(dir.path(), "127.0.0.1:9100").unwrap();
        assert_eq!(reaped.len(), 1, "{reaped:?}");
        assert!(reaped[0].contains("`web`"));
        assert!(child.wait().unwrap().code().is_none(), "killed by a signal");
        assert!(!dir.path().join("old-1.json").exists());
        // Our own live server's file is left alone.
        assert!(file.path().exists());
    }
}
