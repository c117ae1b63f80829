//! The data each introspection tool answers with, typed: one struct per tool mirroring the
//! plain map the helper sends (`erlang/os_sup_*.erl`, `data` of `{ok, #{text, data}}`).
//!
//! Each struct reads the JSON form of that map ([`crate::term::to_json`]: atoms become strings,
//! `undefined`/`nil` become `null`) and serializes back to the same JSON, so a tool's
//! `structuredContent` is what the helper sent:
//! - a key the helper always sends, possibly `undefined`, is an `Option` written as `null`;
//! - a key it sends only sometimes (and never `undefined`) is an `Option` left out when `None`;
//! - a key that is sometimes absent and sometimes `undefined`, a value whose shape varies, and
//!   any key a newer helper adds, stay JSON in the struct's `extra` map.
//!
//! A reply that does not fit is a [`super::HelperError::BadReply`] naming the tool.

use super::introspect::{
    ApplicationsQuery, EtsQuery, GetStateQuery, Introspect, ModuleInfoQuery, ProcessInfoQuery,
    ProcessesQuery, RecompileQuery, SupervisionTreeQuery, SystemInfoQuery, SystemMonitorQuery,
    TraceMessagesQuery, TraceQuery, TraceResultsQuery, WaitsQuery,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Keys this crate does not type (yet), kept as the helper sent them.
pub type Extra = Map<String, Value>;

macro_rules! outputs {
    ($($query:ty => $output:ty),* $(,)?) => {
        $(impl Introspect for $query {
            type Output = $output;
        })*
    };
}

outputs! {
    ProcessesQuery => ProcessesReport,
    ProcessInfoQuery => ProcessInfoReport,
    GetStateQuery => GetStateReport,
    SupervisionTreeQuery => SupervisionTreeReport,
    WaitsQuery => WaitsReport,
    SystemInfoQuery => SystemInfoReport,
}

// Not typed yet: their data stays the helper's JSON.
outputs! {
    ApplicationsQuery => Value,
    EtsQuery => Value,
    ModuleInfoQuery => Value,
    RecompileQuery => Value,
    TraceQuery => Value,
    TraceMessagesQuery => Value,
    TraceResultsQuery => Value,
    SystemMonitorQuery => Value,
}

// ---------------------------------------------------------------------------------------------
// processes

/// `processes`: the top processes by a resource (`os_sup_procs`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessesReport {
    pub rows: Vec<ProcessRow>,
    /// The resource ranked by (`memory`, `reductions`, ...).
    pub sort_by: String,
    /// The sampling window, `null` for absolute values.
    pub window_ms: Option<u64>,
    /// Processes on the node.
    pub total: u64,
    /// Processes looked at (after the filter).
    pub scanned: u64,
    pub duration_us: u64,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One process in `processes`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessRow {
    pub pid: String,
    /// Registered name, or initial call.
    pub name: String,
    pub current_function: String,
    /// The ranked value, or its change over the window (may be negative).
    pub value: i64,
    pub memory: Option<u64>,
    pub message_queue_len: Option<u64>,
    #[serde(flatten)]
    pub extra: Extra,
}

// ---------------------------------------------------------------------------------------------
// process_info

/// `process_info`: one process in detail (`os_sup_procs`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessInfoReport {
    pub pid: String,
    pub registered_name: Option<String>,
    /// `running`, `waiting`, `suspended`...
    pub status: Option<String>,
    pub initial_call: String,
    /// The initial call `proc_lib` recorded (the real module of an OTP process).
    pub proc_lib_initial_call: Option<String>,
    /// The stacktrace, one frame per line.
    pub current_stacktrace: String,
    pub ancestors: Vec<String>,
    /// The first links (`link_count` in all).
    pub links: Vec<String>,
    pub link_count: u64,
    pub monitors: Vec<String>,
    pub monitor_count: u64,
    pub memory: Option<u64>,
    pub reductions: Option<u64>,
    pub message_queue_len: Option<u64>,
    /// A sample of queued messages, rendered.
    pub messages: Vec<String>,
    pub messages_note: Option<String>,
    /// The queue counted by shape; `null` when it is empty.
    pub mailbox: Option<Mailbox>,
    pub dictionary_keys: Vec<String>,
    pub trap_exit: Option<bool>,
    pub heap_size: Option<u64>,
    pub total_heap_size: Option<u64>,
    pub group_leader: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A mailbox counted by message shape, or why it was not read (`note`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Mailbox {
    pub queued: u64,
    /// Messages read (0 when not read).
    pub read: u64,
    /// Shapes, most frequent first.
    pub shapes: Vec<MessageShape>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_shapes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_us: Option<u64>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One message shape and how many queued messages have it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MessageShape {
    /// E.g. `$gen_cast {:post, _, _}`.
    pub shape: String,
    pub count: u64,
}

// ---------------------------------------------------------------------------------------------
// get_state

/// `get_state`: an OTP process's state, rendered (`os_sup_procs`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GetStateReport {
    pub pid: String,
    pub module: Option<String>,
    pub behaviour: Option<String>,
    /// The state, pretty-printed in the query's syntax.
    pub state: String,
    pub duration_us: u64,
    #[serde(flatten)]
    pub extra: Extra,
}

// ---------------------------------------------------------------------------------------------
// supervision_tree

/// `supervision_tree`: the trees under the roots asked for (`os_sup_tree`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SupervisionTreeReport {
    pub roots: Vec<TreeNode>,
    /// Processes walked, all roots together.
    pub node_count: u64,
    /// The walk stopped at its node budget.
    pub truncated: bool,
    pub duration_us: u64,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One supervisor, worker or child spec in a supervision tree. A root also carries
/// `application` (in `extra`: `null` for a root given as a pid).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TreeNode {
    /// The child id in its supervisor.
    pub id: Option<String>,
    pub pid: Option<String>,
    /// `supervisor`, `dynamic_supervisor`, `worker` or `unknown`.
    pub kind: String,
    pub name: Option<String>,
    pub strategy: Option<String>,
    pub intensity: Option<u64>,
    pub period: Option<u64>,
    /// `permanent`, `transient` or `temporary`.
    pub restart: Option<String>,
    pub modules: Vec<String>,
    pub children: Vec<TreeNode>,
    pub child_count: Option<u64>,
    /// Children not shown (`max_children` or the node budget).
    pub truncated_children: u64,
    /// `restarting` or `not_running`, for a child without a pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Why children are missing (`depth limit`, a supervisor that did not answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children_note: Option<String>,
    /// Why an application's tree could not be walked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<Value>,
    /// `supervisor:count_children/1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<BTreeMap<String, Value>>,
    #[serde(flatten)]
    pub extra: Extra,
}

// ---------------------------------------------------------------------------------------------
// waits

/// `waits`: chains of processes waiting on each other (`os_sup_waits`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WaitsReport {
    pub chains: Vec<WaitChain>,
    /// Chains that are cycles.
    pub deadlocks: u64,
    pub window_ms: u64,
    pub duration_us: u64,
    /// `pid` (from one process) or `scan` (the whole node).
    pub mode: String,
    pub scanned: Option<u64>,
    pub process_count: Option<u64>,
    pub scan_truncated: bool,
    pub waiting: Option<u64>,
    pub chains_found: u64,
    /// `waited_on_by` (from one process) and any key a newer helper adds.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One chain: hop by hop, what each process waits on, and where it stops.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WaitChain {
    pub hops: Vec<WaitHop>,
    pub deadlock: bool,
    /// Why the chain ends (`cycle`, `remote`, `gone`, ...).
    pub stop: Value,
    /// Every wait in the chain is certain (not a plain `receive`).
    pub confirmed: bool,
    pub cycle_to: Option<String>,
    pub also_waiting: Vec<String>,
    pub also_count: u64,
    /// The chain as one line.
    pub text: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One process in a chain; the measurements (queue, rates, functions, its `wait`) are in
/// `extra`, as they depend on whether it is alive and local.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WaitHop {
    pub pid: Option<String>,
    pub label: String,
    pub node: String,
    pub alive: Option<bool>,
    #[serde(flatten)]
    pub extra: Extra,
}

// ---------------------------------------------------------------------------------------------
// system_info

/// `system_info`: memory, limits, schedulers and versions (`os_sup_introspect`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SystemInfoReport {
    /// `erlang:memory()` in bytes, by kind (`total`, `processes`, `binary`...).
    pub memory: BTreeMap<String, u64>,
    pub limits: SystemLimits,
    pub schedulers: u64,
    pub schedulers_online: u64,
    /// `average` and `per_scheduler` over `sample_ms`, when available.
    pub scheduler_utilisation: Value,
    pub run_queue: u64,
    pub uptime_ms: u64,
    pub otp_release: String,
    pub erts_version: String,
    pub elixir_version: Option<String>,
    pub node: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Counts against the node's limits.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SystemLimits {
    pub processes: Limit,
    pub ports: Limit,
    pub atoms: Limit,
    pub ets: Limit,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One count against its limit (`null`s when the node does not say).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Limit {
    pub count: Option<u64>,
    pub limit: Option<u64>,
    pub percent: Option<f64>,
    /// Above 80%.
    pub high: bool,
    #[serde(flatten)]
    pub extra: Extra,
}
