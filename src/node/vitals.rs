//! A node's vital signs over time, kept by the server: one sample every [`SAMPLE_EVERY`] (the
//! helper's `vitals`: memory by type, processes, ports, atoms and ETS tables with their limits,
//! run queue, the timers of OTP's `timer` module, errors and restarts; and, for nodes this server started, the OS process's
//! resident memory, open file descriptors against their limit and threads, read from `/proc`
//! even when the VM does not answer), in a ring of [`KEEP`] samples (an hour). A sample is
//! [`Meter::COUNT`] optional integers: ~400 bytes, ~700 KB per node for the hour.
//!
//! What the history says (which meters grow, how soon they reach their limit) is
//! [`super::diagnose::history`]'s; the OS figures are read by [`super::proc_fs`].

use super::work_readings::{Reading, WorkHistory};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

/// How often a running node is sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(2);
/// How long a sample may take (the helper's `vitals` is O(1); a node that does not answer
/// within this is recorded without its own meters).
pub const SAMPLE_TIMEOUT: Duration = Duration::from_secs(1);
/// Whether nodes are sampled at all: `OS_SUP_VITALS=off` turns it off (`diagnose` then
/// judges from its own window only; the sampler's cost is measured against this).
pub fn sampling_on() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("OS_SUP_VITALS").map_or(true, |v| v != "off"))
}
/// Samples kept: an hour at one every two seconds.
pub const KEEP: usize = 1800;

/// One thing measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Meter {
    MemoryTotal,
    MemoryProcesses,
    MemoryBinary,
    MemoryEts,
    MemoryAtom,
    MemoryCode,
    MemorySystem,
    Processes,
    ProcessLimit,
    Ports,
    PortLimit,
    Atoms,
    AtomLimit,
    EtsTables,
    EtsLimit,
    RunQueue,
    /// The timers of OTP's `timer` module (`os_sup_node_timers`): intervals, `apply_after`s.
    /// Those of `erlang:send_after/3` live in the VM's timer wheel and cannot be counted.
    Timers,
    Errors,
    Restarts,
    Rss,
    Fds,
    FdLimit,
    Threads,
}

/// Bytes or a count: how a meter's values read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Count,
}

impl Meter {
    pub const COUNT: usize = 23;
    pub const ALL: [Meter; Self::COUNT] = [
        Meter::MemoryTotal,
        Meter::MemoryProcesses,
        Meter::MemoryBinary,
        Meter::MemoryEts,
        Meter::MemoryAtom,
        Meter::MemoryCode,
        Meter::MemorySystem,
        Meter::Processes,
        Meter::ProcessLimit,
        Meter::Ports,
        Meter::PortLimit,
        Meter::Atoms,
        Meter::AtomLimit,
        Meter::EtsTables,
        Meter::EtsLimit,
        Meter::RunQueue,
        Meter::Timers,
        Meter::Errors,
        Meter::Restarts,
        Meter::Rss,
        Meter::Fds,
        Meter::FdLimit,
        Meter::Threads,
    ];

    /// Its key in the helper's `vitals` data, or in the series this server serves.
    pub fn key(self) -> &'static str {
        match self {
            Meter::MemoryTotal => "memory_total",
            Meter::MemoryProcesses => "memory_processes",
            Meter::MemoryBinary => "memory_binary",
            Meter::MemoryEts => "memory_ets",
            Meter::MemoryAtom => "memory_atom",
            Meter::MemoryCode => "memory_code",
            Meter::MemorySystem => "memory_system",
            Meter::Processes => "processes",
            Meter::ProcessLimit => "process_limit",
            Meter::Ports => "ports",
            Meter::PortLimit => "port_limit",
            Meter::Atoms => "atoms",
            Meter::AtomLimit => "atom_limit",
            Meter::EtsTables => "ets_tables",
            Meter::EtsLimit => "ets_limit",
            Meter::RunQueue => "run_queue",
            Meter::Timers => "timers",
            Meter::Errors => "errors",
            Meter::Restarts => "restarts",
            Meter::Rss => "os_rss",
            Meter::Fds => "os_fds",
            Meter::FdLimit => "os_fd_limit",
            Meter::Threads => "os_threads",
        }
    }

    /// How it is named in a finding.
    pub fn label(self) -> &'static str {
        match self {
            Meter::MemoryTotal => "memory",
            Meter::MemoryProcesses => "process memory",
            Meter::MemoryBinary => "binary memory",
            Meter::MemoryEts => "ETS memory",
            Meter::MemoryAtom => "atom memory",
            Meter::MemoryCode => "code memory",
            Meter::MemorySystem => "system memory",
            Meter::Processes => "processes",
            Meter::Ports => "ports",
            Meter::Atoms => "atoms",
            Meter::EtsTables => "ETS tables",
            Meter::RunQueue => "run queue",
            Meter::Timers => "timers (:timer)",
            Meter::Errors => "errors",
            Meter::Restarts => "restarts",
            Meter::Rss => "resident memory (OS)",
            Meter::Fds => "file descriptors",
            Meter::Threads => "OS threads",
            Meter::ProcessLimit
            | Meter::PortLimit
            | Meter::AtomLimit
            | Meter::EtsLimit
            | Meter::FdLimit => "limit",
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            Meter::MemoryTotal
            | Meter::MemoryProcesses
            | Meter::MemoryBinary
            | Meter::MemoryEts
            | Meter::MemoryAtom
            | Meter::MemoryCode
            | Meter::MemorySystem
            | Meter::Rss => Unit::Bytes,
            _ => Unit::Count,
        }
    }

    /// The meter holding this one's limit.
    pub fn limit(self) -> Option<Meter> {
        match self {
            Meter::Processes => Some(Meter::ProcessLimit),
            Meter::Ports => Some(Meter::PortLimit),
            Meter::Atoms => Some(Meter::AtomLimit),
            // Not `EtsLimit`: since OTP 20 the VM does not enforce it (tables cost memory).
            Meter::Fds => Some(Meter::FdLimit),
            _ => None,
        }
    }

    /// The least rise over [`TREND_WINDOW`](super::diagnose::history::TREND_WINDOW) that counts as
    /// growth (below it is noise: a module loaded, a connection opened). `None`: not judged by
    /// its trend (limits, the run queue, cumulative counters reported elsewhere).
    pub fn growth_floor(self) -> Option<f64> {
        const MB: f64 = 1024.0 * 1024.0;
        match self {
            // `system` holds binary, ETS, atoms and code: judged by those.
            Meter::MemoryTotal
            | Meter::MemoryProcesses
            | Meter::MemoryBinary
            | Meter::MemoryEts
            | Meter::Rss => Some(4.0 * MB),
            Meter::MemoryAtom => Some(MB),
            Meter::Atoms => Some(60.0),
            Meter::Processes => Some(60.0),
            Meter::Ports | Meter::EtsTables | Meter::Fds => Some(20.0),
            Meter::Threads => Some(10.0),
            // An interval nobody cancels fires for good: a slow rise (one a second) is work
            // that grows while the input is flat.
            Meter::Timers => Some(30.0),
            _ => None,
        }
    }

    /// The holders `diagnose` asks the node for when this meter grows (`os_sup_diagnose_holders`),
    /// the one its line is written with first.
    pub fn suspects(self) -> &'static [&'static str] {
        match self {
            Meter::MemoryBinary => &["binary"],
            Meter::MemoryProcesses => &["process_memory"],
            // Monitors and links are process memory that `erlang:memory()` files under
            // `system`, as are persistent terms, which no process holds: growth of the total
            // is looked for in both.
            Meter::MemoryTotal | Meter::Rss => &["process_memory", "persistent_terms"],
            Meter::MemoryEts => &["ets_memory"],
            Meter::EtsTables => &["ets_tables"],
            Meter::Ports => &["ports"],
            Meter::Atoms | Meter::MemoryAtom => &["atoms"],
            Meter::Fds => &["files"],
            // The groups of processes that grew in the window, where the processes are.
            Meter::Processes => &["process_groups"],
            // The processes the intervals message, and who starts them.
            Meter::Timers => &["timers"],
            _ => &[],
        }
    }

    fn index(self) -> usize {
        Self::ALL.iter().position(|m| *m == self).unwrap_or(0)
    }
}

/// One sample: when (Unix ms), and each meter's value when it was read; and the work of the
/// registered processes, which [`Vitals::record`] keeps apart (less often).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub at_ms: u64,
    values: [Option<u64>; Meter::COUNT],
    pub work: Option<Reading>,
}

impl Sample {
    pub fn new(at_ms: u64) -> Self {
        Self {
            at_ms,
            values: [None; Meter::COUNT],
            work: None,
        }
    }

    /// A sample from the helper's `vitals` map (`at_ms` and the meters' keys); other keys are
    /// ignored, missing ones stay unknown.
    pub fn from_node(data: &serde_json::Value) -> Option<Self> {
        let at_ms = data["at_ms"].as_u64()?;
        let mut sample = Self::new(at_ms);
        sample.work = Reading::from_node(data);
        for meter in Meter::ALL {
            if let Some(v) = data[meter.key()].as_u64() {
                // The helper's own atoms, tables and walks' memory (its evals, code tools,
                // trace sessions, `diagnose`) are not the application's: a count that grows
                // by them is no finding.
                let own = match meter {
                    Meter::Atoms => data["own_atoms"].as_u64(),
                    Meter::EtsTables => data["own_ets_tables"].as_u64(),
                    Meter::MemoryEts => data["own_ets_memory"].as_u64(),
                    Meter::MemoryProcesses => data["own_memory"].as_u64(),
                    Meter::MemoryTotal => Some(
                        data["own_memory"].as_u64().unwrap_or(0)
                            + data["own_ets_memory"].as_u64().unwrap_or(0),
                    ),
                    _ => None,
                };
                sample.set(meter, v.saturating_sub(own.unwrap_or(0)));
            }
        }
        Some(sample)
    }

    pub fn get(&self, meter: Meter) -> Option<u64> {
        self.values[meter.index()]
    }

    pub fn set(&mut self, meter: Meter, value: u64) {
        self.values[meter.index()] = Some(value);
    }

    /// Whether the node itself answered (its own meters are known).
    pub fn answered(&self) -> bool {
        self.get(Meter::MemoryTotal).is_some()
    }
}

/// One sample of a node: the helper's `vitals` when `ask` (bounded by [`SAMPLE_TIMEOUT`]; a
/// node that does not answer is recorded without its own meters) and `/proc` of the BEAM's OS
/// process when `local` knows it (it answers even when the VM does not). `local` is updated
/// from the pid the node reports when `trust` says that pid is a process of this host's.
pub async fn take(
    client: &crate::helper::Client,
    ask: bool,
    local: &mut Option<u32>,
    trust: impl Fn(u32) -> bool,
) -> Sample {
    let answer = if ask {
        let call = crate::helper::ToolCall::new("vitals").with_timeout(SAMPLE_TIMEOUT);
        tokio::time::timeout(SAMPLE_TIMEOUT, client.run_tool(&call))
            .await
            .ok()
            .and_then(Result::ok)
    } else {
        None
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default();
    let mut sample = answer
        .as_ref()
        .and_then(|a| Sample::from_node(&a.data))
        .unwrap_or_else(|| Sample::new(now));
    let reported = answer.and_then(|a| a.data["os_pid"].as_u64());
    if let Some(pid) = reported.and_then(|p| u32::try_from(p).ok()) {
        if *local != Some(pid) && trust(pid) {
            *local = Some(pid);
        }
    }
    if let Some(pid) = *local {
        let os = super::proc_fs::read_proc(pid);
        let figures = [
            (Meter::Rss, os.rss),
            (Meter::Threads, os.threads),
            (Meter::Fds, os.fds),
            (Meter::FdLimit, os.fd_limit),
        ];
        for (meter, value) in figures {
            if let Some(value) = value {
                sample.set(meter, value);
            }
        }
    }
    sample
}

/// The ring of one node's samples.
#[derive(Debug, Default)]
pub struct Vitals {
    ring: Mutex<VecDeque<Sample>>,
    work: Mutex<WorkHistory>,
}

impl Vitals {
    pub fn record(&self, mut sample: Sample) {
        if let Some(reading) = sample.work.take() {
            self.work
                .lock()
                .expect("work lock")
                .add(sample.at_ms, reading);
        }
        let mut ring = self.ring();
        if ring.len() == KEEP {
            ring.pop_front();
        }
        ring.push_back(sample);
    }

    /// Forgets the history (the node was started anew: a new VM).
    pub fn clear(&self) {
        self.ring().clear();
        self.work.lock().expect("work lock").clear();
    }

    /// The registered processes' work kept (one reading every ten seconds).
    pub fn work(&self) -> WorkHistory {
        self.work.lock().expect("work lock").clone()
    }

    /// When the node last answered a sample (Unix ms), if it has since it was started.
    pub fn last_answered_ms(&self) -> Option<u64> {
        self.ring()
            .iter()
            .rev()
            .find(|s| s.answered())
            .map(|s| s.at_ms)
    }

    /// The samples of the last `span`, oldest first.
    pub fn recent(&self, span: Duration) -> Vec<Sample> {
        let ring = self.ring();
        let Some(newest) = ring.back().map(|s| s.at_ms) else {
            return Vec::new();
        };
        let from = newest.saturating_sub(span.as_millis() as u64);
        ring.iter().filter(|s| s.at_ms >= from).cloned().collect()
    }

    /// Every kept sample, thinned to at most `points` (evenly), oldest first.
    pub fn series(&self, points: usize) -> Vec<Sample> {
        let ring = self.ring();
        let step = ring.len().div_ceil(points.max(1)).max(1);
        ring.iter().step_by(step).cloned().collect()
    }

    /// The kept history as plot data, thinned to at most `points` samples:
    /// `{"keys": ["at_ms", meter keys…], "rows": [[at_ms, value or null, …], …]}`.
    pub fn to_json(&self, points: usize) -> serde_json::Value {
        let keys: Vec<&str> = std::iter::once("at_ms")
            .chain(Meter::ALL.iter().map(|m| m.key()))
            .collect();
        let rows: Vec<serde_json::Value> = self
            .series(points)
            .iter()
            .map(|s| {
                let values = Meter::ALL.iter().map(|m| serde_json::json!(s.get(*m)));
                serde_json::Value::Array(
                    std::iter::once(serde_json::json!(s.at_ms))
                        .chain(values)
                        .collect(),
                )
            })
            .collect();
        serde_json::json!({"keys": keys, "rows": rows, "every_ms": SAMPLE_EVERY.as_millis() as u64})
    }

    /// How much history there is, and how many samples.
    pub fn span(&self) -> (Duration, usize) {
        let ring = self.ring();
        let span = match (ring.front(), ring.back()) {
            (Some(a), Some(b)) => Duration::from_millis(b.at_ms.saturating_sub(a.at_ms)),
            _ => Duration::ZERO,
        };
        (span, ring.len())
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, VecDeque<Sample>> {
        self.ring.lock().expect("vitals lock")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_is_bounded_and_thinned_for_plots() {
        let vitals = Vitals::default();
        for i in 0..(KEEP as u64 + 10) {
            vitals.record(Sample::new(i * 2000));
        }
        let (span, count) = vitals.span();
        assert_eq!(count, KEEP);
        assert_eq!(span, Duration::from_millis((KEEP as u64 - 1) * 2000));
        assert!(vitals.series(600).len() <= 600);
        assert_eq!(vitals.recent(Duration::from_secs(10)).len(), 6);
    }
}
