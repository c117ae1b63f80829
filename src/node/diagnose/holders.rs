//! Who holds what the history saw growing, as the node found it (`os_sup_diagnose_holders`),
//! decoded once: the processes or tables holding the most, what they are made of, and the
//! application function that makes what they hold.

use super::finding::Next;
use crate::term::Pid;
use serde::Deserialize;

/// The holders of each suspect the node was asked to look for (absent: not looked for).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Holders {
    pub binary: Vec<Holder>,
    pub process_memory: Vec<Holder>,
    pub persistent_terms: Option<PersistentTerms>,
    pub process_groups: Vec<Holder>,
    pub ets_tables: Vec<Holder>,
    pub ets_memory: Vec<Holder>,
    pub ports: Vec<Holder>,
    pub atoms: Option<Traced>,
    pub files: Option<Traced>,
    pub timers: Option<Timers>,
    /// The processes that took the most reductions over the window.
    pub work: Vec<Holder>,
}

/// A process (or an ETS table) holding much of a resource, with what it is made of. The node
/// sends the parts that apply to the resource; the others are absent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Holder {
    pub pid: Option<Pid>,
    /// How it is shown: its registered name or initial call (`ETS table X` for a table).
    pub label: Option<String>,
    /// The application function it is in, with file:line.
    pub function: Option<String>,
    /// A table: its name, rows and owner (the owner's label).
    pub table: Option<String>,
    pub rows: Option<u64>,
    pub bytes: Option<f64>,
    pub owner: Option<String>,
    /// Ranked by how much it grew in the window (`growth`) or over the history the helper
    /// keeps (`history`, over `over_ms`), else by size.
    pub ranked_by: Option<String>,
    pub memory: Option<f64>,
    pub grew: Option<f64>,
    pub over_ms: Option<f64>,
    pub heap_words: Option<u64>,
    pub heap_bytes: Option<f64>,
    pub mailbox: Option<u64>,
    pub monitors: Option<u64>,
    pub monitors_top: Option<Commonest>,
    pub monitored_by: Option<u64>,
    pub monitored_by_top: Option<Commonest>,
    pub links: Option<u64>,
    pub dictionary: Option<u64>,
    pub dictionary_bytes: Option<u64>,
    pub refc_count: Option<u64>,
    pub refc_bytes: Option<f64>,
    /// An OTP process, whose state `get_state` can show.
    pub otp: bool,
    /// Tables owned (with a few names), ports owned (with their name), processes of a group.
    pub tables: Option<u64>,
    pub examples: Vec<String>,
    pub name: Option<String>,
    pub count: Option<u64>,
    /// A group that grew in the window: by how much, and how it is described.
    pub change: Option<i64>,
    pub group: Option<String>,
    /// The process its processes wait on (in a call, or for a lock it holds).
    pub waits_on: Option<Pid>,
    pub made_by: Option<Made>,
    pub state_growth: Option<Made>,
    /// Reductions a second over the window (the busiest processes), and, for the first, the
    /// messages it received by shape and what each cost (`os_sup_diagnose_work`).
    pub reductions_per_s: Option<f64>,
    pub received: Option<Made>,
    /// The scan that found it stopped early.
    pub truncated: bool,
}

/// The commonest other end of a process's monitors or links among the first `read`.
#[derive(Debug, Clone, Deserialize)]
pub struct Commonest {
    pub target: String,
    pub count: u64,
    pub read: u64,
}

/// The application function that makes (or writes) what a holder holds, from a short trace:
/// the text to show and, when a function was found, its name for `source`.
#[derive(Debug, Clone, Deserialize)]
pub struct Made {
    pub text: String,
    #[serde(default)]
    pub target: Option<String>,
}

/// Persistent terms (memory filed under `system` that no process holds).
#[derive(Debug, Clone, Deserialize)]
pub struct PersistentTerms {
    pub count: u64,
    pub bytes: f64,
    /// Percent of all memory.
    pub share: u64,
    #[serde(default)]
    pub made_by: Option<Made>,
}

/// What no scan can attribute (atoms, open files): a short trace of the functions that make
/// them, and the call that traces longer.
#[derive(Debug, Clone, Deserialize)]
pub struct Traced {
    #[serde(default)]
    pub made_by: Option<Made>,
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub next: Option<Next>,
}

/// The timers of OTP's `timer` module (`os_sup_node_timers`): how many, the processes their
/// intervals message (most first, each with its `count`), and the application function that
/// starts them, traced through `timer_server`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Timers {
    pub count: Option<u64>,
    /// Intervals alive (one monitor of `timer_server`'s on its target each), and how many of
    /// them were read for the targets.
    pub intervals: Option<u64>,
    pub read: Option<u64>,
    pub targets: Vec<Holder>,
    pub made_by: Option<Made>,
}
