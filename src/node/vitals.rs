//! A node's vital signs over time, kept by the server: one sample every [`SAMPLE_EVERY`] (the
//! helper's `vitals`: memory by type, processes, ports, atoms and ETS tables with their limits,
//! run queue, errors and restarts; and, for nodes this server started, the OS process's
//! resident memory, open file descriptors against their limit and threads, read from `/proc`
//! even when the VM does not answer), in a ring of [`KEEP`] samples (an hour). A sample is
//! [`Meter::COUNT`] optional integers: ~400 bytes, ~700 KB per node for the hour.
//!
//! [`assess`] turns the history into what `diagnose` reports: each meter's rate over the last
//! [`TREND_WINDOW`] (a least-squares slope, so one noisy sample does not make a trend), which
//! meters grow beyond noise (a rise over the floor of their kind, and steady), and how long
//! until each meter with a limit reaches it.

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
/// The stretch of history a rate is measured over.
pub const TREND_WINDOW: Duration = Duration::from_secs(60);
/// The least history a rate is trusted from.
pub const TREND_MIN_SPAN: Duration = Duration::from_secs(15);
/// The longer stretch read for a rise in steps (see [`staircase`]), and the least of it
/// that is trusted.
pub const STEPS_WINDOW: Duration = Duration::from_secs(600);
const STEPS_MIN_SPAN: Duration = Duration::from_secs(180);
/// A count at this share of its limit is reported whatever its rate.
pub const NEAR_LIMIT: f64 = 0.8;

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
    pub const COUNT: usize = 22;
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

    /// The least rise over [`TREND_WINDOW`] that counts as growth (below it is noise: a
    /// module loaded, a connection opened). `None`: not judged by its trend (limits, the run
    /// queue, cumulative counters reported elsewhere).
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
            _ => None,
        }
    }

    /// The holders `diagnose` asks the node for when this meter grows (`os_sup_holders`),
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
            _ => &[],
        }
    }

    fn index(self) -> usize {
        Self::ALL.iter().position(|m| *m == self).unwrap_or(0)
    }
}

/// One sample: when (Unix ms), and each meter's value when it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub at_ms: u64,
    values: [Option<u64>; Meter::COUNT],
}

impl Sample {
    pub fn new(at_ms: u64) -> Self {
        Self {
            at_ms,
            values: [None; Meter::COUNT],
        }
    }

    /// A sample from the helper's `vitals` map (`at_ms` and the meters' keys); other keys are
    /// ignored, missing ones stay unknown.
    pub fn from_node(data: &serde_json::Value) -> Option<Self> {
        let at_ms = data["at_ms"].as_u64()?;
        let mut sample = Self::new(at_ms);
        for meter in Meter::ALL {
            if let Some(v) = data[meter.key()].as_u64() {
                // The helper's own atoms and tables (its evals, code tools, trace sessions)
                // are not the application's: a count that grows by them is no finding.
                let own = match meter {
                    Meter::Atoms => data["own_atoms"].as_u64(),
                    Meter::EtsTables => data["own_ets_tables"].as_u64(),
                    Meter::MemoryEts => data["own_ets_memory"].as_u64(),
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
        read_proc(pid, &mut sample);
    }
    sample
}

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

/// The ring of one node's samples.
#[derive(Debug, Default)]
pub struct Vitals {
    ring: Mutex<VecDeque<Sample>>,
}

impl Vitals {
    pub fn record(&self, sample: Sample) {
        let mut ring = self.ring();
        if ring.len() == KEEP {
            ring.pop_front();
        }
        ring.push_back(sample);
    }

    /// Forgets the history (the node was started anew: a new VM).
    pub fn clear(&self) {
        self.ring().clear();
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

/// A meter's course over the trend window.
#[derive(Debug, Clone, PartialEq)]
pub struct Trend {
    pub meter: Meter,
    /// Per second (least squares).
    pub rate: f64,
    pub current: u64,
    pub limit: Option<u64>,
    /// Seconds until `limit` at `rate` (`None`: no limit, or not growing).
    pub to_limit: Option<f64>,
    /// Growing beyond noise.
    pub growing: bool,
}

/// What the history says: the meters that grow or near their limit, soonest exhaustion first,
/// and how much history was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    pub concerns: Vec<Trend>,
    pub history: Duration,
    pub samples: usize,
    /// The node did not answer its last samples (its OS figures still came).
    pub unanswered: usize,
}

/// Reads `samples` (oldest first, the last [`STEPS_WINDOW`] or less); `memory_room` is what
/// the host has left (MemAvailable) to time memory growth against.
pub fn assess(samples: &[Sample], memory_room: Option<u64>) -> Assessment {
    let newest = samples.last().map(|s| s.at_ms).unwrap_or(0);
    let last = |span: Duration| -> Vec<&Sample> {
        samples
            .iter()
            .filter(|s| s.at_ms + span.as_millis() as u64 >= newest)
            .collect()
    };
    let (window, long) = (last(TREND_WINDOW), last(STEPS_WINDOW));
    let history = match (samples.first(), samples.last()) {
        (Some(a), Some(b)) => Duration::from_millis(b.at_ms.saturating_sub(a.at_ms)),
        _ => Duration::ZERO,
    };
    let unanswered = samples.iter().rev().take_while(|s| !s.answered()).count();
    let mut concerns: Vec<Trend> = Meter::ALL
        .iter()
        .filter_map(|&meter| trend(&window, &long, meter, memory_room))
        .filter(|t| t.growing || near_limit(t))
        .collect();
    concerns.sort_by(|a, b| {
        let key = |t: &Trend| t.to_limit.unwrap_or(f64::INFINITY);
        key(a).total_cmp(&key(b))
    });
    Assessment {
        concerns,
        history,
        samples: samples.len(),
        unanswered,
    }
}

fn near_limit(t: &Trend) -> bool {
    match t.limit {
        Some(limit) if limit > 0 && t.meter.limit().is_some() => {
            t.current as f64 >= limit as f64 * NEAR_LIMIT
        }
        _ => false,
    }
}

/// The meter's rate over `window` (or, when that shows no growth, a rise in steps over
/// `long`) and its time to the limit; `None` when it was not read often enough over
/// [`TREND_MIN_SPAN`].
fn trend(
    window: &[&Sample],
    long: &[&Sample],
    meter: Meter,
    memory_room: Option<u64>,
) -> Option<Trend> {
    meter.growth_floor()?;
    let points_of = |samples: &[&Sample]| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter_map(|s| s.get(meter).map(|v| (s.at_ms as f64 / 1000.0, v as f64)))
            .collect()
    };
    let points = points_of(window);
    let current = window.iter().rev().find_map(|s| s.get(meter))?;
    let limit = meter
        .limit()
        .and_then(|l| window.iter().rev().find_map(|s| s.get(l)));
    let span = points.last()?.0 - points.first()?.0;
    let (rate, steady) = if points.len() >= 4 && span >= TREND_MIN_SPAN.as_secs_f64() {
        slope(&points)
    } else {
        (0.0, false)
    };
    let floor = meter.growth_floor().unwrap_or(f64::INFINITY);
    let per_window = |rate: f64| rate * TREND_WINDOW.as_secs_f64() >= floor;
    let rising = steady && rate > 0.0 && per_window(rate);
    // The longer stretch is read only when the last minute shows no growth.
    let steps = (!rising)
        .then(|| staircase(&points_of(long)))
        .flatten()
        .filter(|&steps| per_window(steps));
    let (rate, growing) = steps.map_or((rate, rising), |steps| (steps, true));
    let room = match (limit, meter.unit()) {
        (Some(limit), _) => Some(limit.saturating_sub(current) as f64),
        (None, Unit::Bytes) => memory_room.map(|r| r as f64),
        (None, Unit::Count) => None,
    };
    let to_limit = room.filter(|_| growing).map(|room| room / rate);
    Some(Trend {
        meter,
        rate,
        current,
        limit,
        to_limit,
        growing,
    })
}

/// The rate of a rise in steps over `points` (x: seconds, y: value), if it is one: the lowest
/// value of each fifth of them climbs in at least three of the four steps between fifths and
/// never falls. A process's heap grows by half each time it is full, so a leak in one large
/// process shows as jumps a minute or more apart, which the last minute alone may not see;
/// one jump (a cache filled once) or a sawtooth (memory freed again) is not a rise in steps.
fn staircase(points: &[(f64, f64)]) -> Option<f64> {
    let (first, last) = (points.first()?.0, points.last()?.0);
    if last - first < STEPS_MIN_SPAN.as_secs_f64() {
        return None;
    }
    let fifth = (last - first) / 5.0;
    let lows: Vec<(f64, f64)> = (0..5)
        .map(|i| {
            let (from, to) = (first + fifth * i as f64, first + fifth * (i + 1) as f64);
            points
                .iter()
                .filter(|(x, _)| *x >= from && (*x < to || i == 4))
                .copied()
                .min_by(|a, b| a.1.total_cmp(&b.1))
        })
        .collect::<Option<_>>()?;
    let climbs = lows.windows(2).filter(|w| w[1].1 > w[0].1).count();
    let falls = lows.windows(2).any(|w| w[1].1 < w[0].1);
    let (start, end) = (lows[0], lows[4]);
    (climbs >= 3 && !falls && end.0 > start.0).then(|| (end.1 - start.1) / (end.0 - start.0))
}

/// The least-squares slope of `points` (x: seconds, y: value), and whether it is steady (the
/// correlation is strong: a rise, not one jump among flat samples).
fn slope(points: &[(f64, f64)]) -> (f64, bool) {
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (x, y) in points {
        sxy += (x - mean_x) * (y - mean_y);
        sxx += (x - mean_x).powi(2);
        syy += (y - mean_y).powi(2);
    }
    if sxx == 0.0 || syy == 0.0 {
        return (0.0, false);
    }
    let r = sxy / (sxx * syy).sqrt();
    (sxy / sxx, r >= 0.8)
}

/// `~5.7 h`, `~12 min`, `~40 s`.
pub fn duration_text(seconds: f64) -> String {
    if seconds >= 2.0 * 86400.0 {
        format!("~{:.0} days", seconds / 86400.0)
    } else if seconds >= 2.0 * 3600.0 {
        format!("~{:.1} h", seconds / 3600.0)
    } else if seconds >= 120.0 {
        format!("~{:.0} min", seconds / 60.0)
    } else {
        format!("~{:.0} s", seconds.max(1.0))
    }
}

/// The OS side of a sample, read from `/proc/PID` (Linux): resident memory, open file
/// descriptors and their soft limit, threads. What cannot be read stays unknown.
pub fn read_proc(pid: u32, sample: &mut Sample) {
    let base = format!("/proc/{pid}");
    if let Ok(status) = std::fs::read_to_string(format!("{base}/status")) {
        for line in status.lines() {
            let value = |prefix: &str| {
                line.strip_prefix(prefix)
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.parse::<u64>().ok())
            };
            if let Some(kb) = value("VmRSS:") {
                sample.set(Meter::Rss, kb * 1024);
            }
            if let Some(n) = value("Threads:") {
                sample.set(Meter::Threads, n);
            }
        }
    }
    if let Ok(dir) = std::fs::read_dir(format!("{base}/fd")) {
        sample.set(Meter::Fds, dir.count() as u64);
    }
    if let Ok(limits) = std::fs::read_to_string(format!("{base}/limits")) {
        let soft = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(soft) = soft {
            sample.set(Meter::FdLimit, soft);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn history(seconds: u64, f: impl Fn(u64) -> u64) -> Vec<Sample> {
        (0..=seconds / 2)
            .map(|i| {
                let mut s = Sample::new(1_000_000 + i * 2000);
                s.set(Meter::MemoryTotal, 50 << 20);
                s.set(Meter::Atoms, f(i * 2));
                s.set(Meter::AtomLimit, 1_048_576);
                s.set(Meter::Processes, 300 + (i % 3));
                s.set(Meter::ProcessLimit, 262_144);
                s
            })
            .collect()
    }

    #[test]
    fn a_steady_rise_has_its_rate_and_time_to_the_limit() {
        let samples = history(60, |t| 21_256 + 50 * t);
        let a = assess(&samples, None);
        assert_eq!(a.concerns.len(), 1, "{a:?}");
        let atoms = &a.concerns[0];
        assert_eq!(atoms.meter, Meter::Atoms);
        assert!((atoms.rate - 50.0).abs() < 0.01, "{atoms:?}");
        let hours = atoms.to_limit.unwrap() / 3600.0;
        assert!((5.6..5.7).contains(&hours), "{hours}");
        assert_eq!(duration_text(atoms.to_limit.unwrap()), "~5.7 h");
    }

    #[test]
    fn noise_and_short_history_are_not_growth() {
        // Flat with jitter (the processes), and one jump among flat samples.
        let jump = history(60, |t| if t == 30 { 30_000 } else { 21_000 });
        assert!(assess(&jump, None).concerns.is_empty());
        let short = history(8, |t| 21_000 + 500 * t);
        assert!(assess(&short, None).concerns.is_empty(), "8 s of history");
    }

    /// Memory over `minutes`, one sample each 2 s, from `f(t)` (t in seconds).
    fn memory(minutes: u64, f: impl Fn(u64) -> u64) -> Vec<Sample> {
        (0..minutes * 30)
            .map(|i| {
                let mut s = Sample::new(1_000_000 + i * 2000);
                s.set(Meter::MemoryProcesses, f(i * 2));
                s
            })
            .collect()
    }

    #[test]
    fn a_rise_in_steps_a_minute_or_more_apart_is_growth() {
        const MB: u64 = 1 << 20;
        // A heap that grows by 30 MB every 90 s: flat over the last minute, rising over ten.
        let steps = memory(10, |t| 40 * MB + 30 * MB * (t / 90));
        let last_minute = &steps[steps.len() - 30..];
        assert!(assess(last_minute, None).concerns.is_empty());
        let a = assess(&steps, Some(1 << 30));
        assert_eq!(a.concerns.len(), 1, "{a:?}");
        let growth = &a.concerns[0];
        assert_eq!(growth.meter, Meter::MemoryProcesses);
        assert!(growth.growing && growth.to_limit.is_some(), "{growth:?}");
        let per_min = growth.rate * 60.0 / MB as f64;
        assert!((15.0..25.0).contains(&per_min), "{per_min} MB/min");
        // One jump (a cache filled once), and a sawtooth (memory freed again), are not.
        let once = memory(10, |t| if t < 300 { 40 * MB } else { 200 * MB });
        assert!(assess(&once, None).concerns.is_empty());
        let saw = memory(10, |t| 40 * MB + 30 * MB * ((t / 90) % 3));
        assert!(assess(&saw, None).concerns.is_empty());
    }

    #[test]
    fn a_count_near_its_limit_is_a_concern_without_growth() {
        let full = history(60, |_| 900_000);
        let a = assess(&full, None);
        assert_eq!(a.concerns[0].meter, Meter::Atoms);
        assert!(!a.concerns[0].growing);
    }

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
