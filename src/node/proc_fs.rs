//! What this server reads of a node's OS process in Linux's `/proc`: its resident memory,
//! open file descriptors (against their limit, and by kind) and threads, whether a pid is the
//! BEAM of a node, the processes it started, and the host's available memory. These answer even when the VM does not;
//! what cannot be read stays unknown.

/// Whether OS process `pid` on this host is the BEAM of `node` (`name@host`): its command
/// line names it (`-sname name` or `-name name@host`). A node attached from another host may
/// report a pid that is some other process here.
pub fn is_local_beam(pid: u32, node: &str) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let short = node.split('@').next().unwrap_or(node);
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    args.windows(2).any(|pair| {
        matches!(pair[0], b"-sname" | b"-name")
            && (pair[1] == node.as_bytes() || pair[1] == short.as_bytes())
    })
}

/// The OS side of a vitals sample: resident memory (bytes), threads, open file descriptors
/// and their soft limit. What cannot be read stays unknown.
#[derive(Debug, Default)]
pub struct ProcFigures {
    pub rss: Option<u64>,
    pub threads: Option<u64>,
    pub fds: Option<u64>,
    pub fd_limit: Option<u64>,
}

/// The OS side of a sample, read from `/proc/PID` (Linux).
pub fn read_proc(pid: u32) -> ProcFigures {
    let mut figures = ProcFigures::default();
    let base = format!("/proc/{pid}");
    if let Ok(status) = std::fs::read_to_string(format!("{base}/status")) {
        for line in status.lines() {
            let value = |prefix: &str| {
                line.strip_prefix(prefix)
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.parse::<u64>().ok())
            };
            if let Some(kb) = value("VmRSS:") {
                figures.rss = Some(kb * 1024);
            }
            if let Some(n) = value("Threads:") {
                figures.threads = Some(n);
            }
        }
    }
    if let Ok(dir) = std::fs::read_dir(format!("{base}/fd")) {
        figures.fds = Some(dir.count() as u64);
    }
    if let Ok(limits) = std::fs::read_to_string(format!("{base}/limits")) {
        figures.fd_limit = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|v| v.parse::<u64>().ok());
    }
    figures
}

/// The host's available memory (`MemAvailable`), to time memory growth against.
pub fn memory_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// The OS process's open file descriptors by kind, most first, at most `top`: `socket`,
/// `pipe`, `anon_inode`, and files by their directory, with how many distinct files (the
/// same file open many times was opened and never closed).
pub fn fd_kinds(pid: u32, top: usize) -> Vec<(String, usize)> {
    use std::collections::{HashMap, HashSet};
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let mut kinds: HashMap<String, (usize, HashSet<String>)> = HashMap::new();
    for entry in dir.flatten().take(100_000) {
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        let (kind, file) = match target.parent().filter(|_| target.is_absolute()) {
            Some(dir) => (
                format!("files in {}/", dir.display()),
                target.to_string_lossy().into_owned(),
            ),
            None => {
                let text = target.to_string_lossy();
                let kind = text.split_once(':').map_or(&*text, |(k, _)| k).to_string();
                (kind, String::new())
            }
        };
        let (count, files) = kinds.entry(kind).or_default();
        *count += 1;
        if !file.is_empty() && files.len() < 10_000 {
            files.insert(file);
        }
    }
    let mut kinds: Vec<(String, usize)> = kinds
        .into_iter()
        .map(|(kind, (count, files))| match files.len() {
            0 => (kind, count),
            n if n < count => (
                format!("{kind} ({n} distinct: each open ~{}×)", count / n),
                count,
            ),
            n => (format!("{kind} ({n} distinct)"), count),
        })
        .collect();
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    kinds.truncate(top);
    kinds
}

/// One process of the host as `/proc/PID/stat` says: its parent and its start time (clock
/// ticks since boot: a pid reused later has another).
struct Stat {
    pid: u32,
    ppid: u32,
    start: u64,
}

fn stats() -> Vec<Stat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            stat_of(pid)
        })
        .collect()
}

fn stat_of(pid: u32) -> Option<Stat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command (which may hold spaces): state, ppid, …, starttime (the 20th).
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    Some(Stat {
        pid,
        ppid: fields.get(1)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Every process `root` started, and theirs, as `(pid, start time)`: read before a node is
/// ended, so that what it started in sessions of their own (a port's program) can be ended
/// with it ([`end_left_behind`]).
pub fn descendants(root: u32) -> Vec<(u32, u64)> {
    let all = stats();
    let mut found: Vec<(u32, u64)> = Vec::new();
    let mut parents = vec![root];
    while let Some(parent) = parents.pop() {
        for s in all.iter().filter(|s| s.ppid == parent) {
            if !found.iter().any(|(p, _)| *p == s.pid) {
                found.push((s.pid, s.start));
                parents.push(s.pid);
            }
        }
    }
    found
}

/// SIGKILLs each of `family` ([`descendants`]) that is still the same process (same start
/// time); a pid reused since is left alone. Returns how many were ended.
pub fn end_left_behind(family: &[(u32, u64)]) -> usize {
    family
        .iter()
        .filter(|(pid, start)| stat_of(*pid).is_some_and(|s| s.start == *start))
        .filter(|(pid, _)| {
            let Ok(pid) = libc::pid_t::try_from(*pid) else {
                return false;
            };
            // SAFETY: plain syscall on a pid this server's child started, checked just above.
            unsafe { libc::kill(pid, libc::SIGKILL) == 0 }
        })
        .count()
}
