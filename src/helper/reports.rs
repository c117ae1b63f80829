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
    ApplicationsQuery, CallersQuery, DiagnoseQuery, DocsQuery, EtsQuery, FindQuery, GetStateQuery,
    Introspect, ProcessInfoQuery, ProcessesQuery, RecompileQuery, SourceQuery,
    SupervisionTreeQuery, SystemInfoQuery, SystemMonitorQuery, TraceMessagesQuery, TraceQuery,
    TraceResultsQuery, TraceStopQuery, TracesQuery, WaitsQuery,
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
    DiagnoseQuery => DiagnoseReport,
    SystemInfoQuery => SystemInfoReport,
    ApplicationsQuery => ApplicationsReport,
    EtsQuery => EtsReport,
    TraceQuery => TraceSession,
    TraceMessagesQuery => TraceSession,
    TraceStopQuery => TraceSession,
    TracesQuery => TracesReport,
    TraceResultsQuery => TraceResultsReport,
    SystemMonitorQuery => SystemMonitorReport,
    DocsQuery => DocsReport,
    SourceQuery => SourceReport,
    CallersQuery => CallersReport,
    FindQuery => FindReport,
}

// Not typed yet: its data (build output, per-application health) stays the helper's JSON.
outputs! {
    RecompileQuery => Value,
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
    /// With `group_by`: the groups, ranked (`rows` is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<ProcessGroup>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One group of processes in `processes` with `group_by` (`os_sup_groups`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessGroup {
    /// The group's key, with its sample's top application frame.
    pub group: String,
    pub count: u64,
    /// Change in count over the window; `null` without one.
    pub change: Option<i64>,
    pub per_s: Option<i64>,
    /// Total memory in bytes.
    pub memory: u64,
    /// Total queued messages.
    pub message_queue_len: u64,
    pub links: u64,
    /// One process of the group.
    pub sample: Option<String>,
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
    /// The process that spawned it (OTP 25+), with its registered name or initial call.
    #[serde(default)]
    pub parent: Option<String>,
    /// Its `proc_lib` ancestors, by registered name where they have one.
    pub ancestors: Vec<String>,
    /// The top stack frame in the application's own code (not OTP's or Elixir's), with
    /// file:line: `Shop.Ledger.post/2 lib/shop/ledger.ex:56`.
    #[serde(default)]
    pub app_frame: Option<String>,
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
// diagnose

/// `diagnose`: ranked findings over a window, and the figures looked at (`os_sup_health`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiagnoseReport {
    /// Most urgent first; empty when healthy.
    pub findings: Vec<Finding>,
    /// Process count and change, run queue, scheduler use, memory by category, restarts,
    /// errors per second.
    pub figures: Extra,
    pub healthy: bool,
    pub window_ms: u64,
    pub duration_ms: u64,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One finding of `diagnose`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Finding {
    /// `deadlock`, `leak`, `restarts`, `ets`, `mailbox`, `memory`, `limit`, `run_queue`,
    /// `errors`.
    pub kind: String,
    /// One line of evidence.
    pub line: String,
    /// The call to make next, e.g. `process_info {"name":"web","pid":"<0.1.0>"}`.
    pub next: String,
    /// A sample process.
    pub pid: Option<String>,
    /// Where: the application module and `function/arity`.
    pub module: Option<String>,
    pub function: Option<String>,
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
    /// From one process: who waits on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_on_by: Option<Vec<WaitedOnBy>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A process waiting on the one `waits` started from, and how.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WaitedOnBy {
    pub pid: String,
    pub label: String,
    /// `call`, `await`, `erpc`, `io`...
    pub kind: String,
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

/// One process in a chain and what it waits on; its measurements (queue, rates, functions)
/// are in `extra`, as they are there only for a live local process.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WaitHop {
    pub pid: Option<String>,
    pub label: String,
    pub node: String,
    /// `null` for a process on another node.
    pub alive: Option<bool>,
    /// What it waits on for the next hop; `null` for the last.
    pub wait: Option<HopWait>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// How one hop waits on the next.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HopWait {
    /// `call`, `await`, `erpc`, `io`, `start` or `receive`.
    pub kind: String,
    /// Certain (not a plain `receive` that may wait for something else).
    pub confirmed: bool,
    /// Where it waits.
    pub function: String,
    /// Who it waits on (the first 10).
    pub targets: Vec<String>,
    /// Still waiting at every sample of the window (`null`: not sampled).
    pub pending_whole_window: Option<bool>,
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

// ---------------------------------------------------------------------------------------------
// applications

/// `applications`: the running applications, or one application with its environment
/// (`os_sup_introspect`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ApplicationsReport {
    /// Without `app`: every running application.
    Running {
        applications: Vec<ApplicationRow>,
        #[serde(flatten)]
        extra: Extra,
    },
    /// With `app`: that application.
    One(ApplicationDetail),
}

/// One running application.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApplicationRow {
    pub name: String,
    pub vsn: Option<String>,
    pub description: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One application, loaded or running, with (the first 200 keys of) its environment.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApplicationDetail {
    pub name: String,
    pub vsn: Option<String>,
    pub description: Option<String>,
    pub running: bool,
    pub env: Vec<EnvEntry>,
    /// Keys in the environment, all of them.
    pub env_count: u64,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One environment key and its value, rendered.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnvEntry {
    pub key: String,
    pub value: String,
}

// ---------------------------------------------------------------------------------------------
// ets

/// `ets`: tables by memory, or one table with sample rows (`os_sup_introspect`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum EtsReport {
    /// Without `table`: the largest tables.
    Tables {
        tables: Vec<EtsTableRow>,
        /// Tables on the node.
        total: u64,
        #[serde(flatten)]
        extra: Extra,
    },
    /// With `table`: that table.
    Table(EtsTable),
}

/// One table in the list.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EtsTableRow {
    pub name: Option<String>,
    pub id: String,
    pub owner: String,
    pub owner_name: Option<String>,
    pub size: u64,
    /// Bytes.
    pub memory: u64,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub protection: Option<String>,
    pub named_table: bool,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One table: `ets:info/1` (memory in bytes, terms rendered) and its first rows.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EtsTable {
    pub info: Map<String, Value>,
    pub rows: Vec<String>,
    pub rows_note: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

// ---------------------------------------------------------------------------------------------
// trace, trace_messages, trace_stop, traces, trace_results

/// A trace session as the helper describes it (`os_sup_trace_session`): what `trace`,
/// `trace_messages` and `trace_stop` answer, one row of `traces`, and the head of
/// `trace_results`. Its `session` is the node-local id (the tool prefixes the node's name).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TraceSession {
    pub session: String,
    /// `calls` or `messages`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What is traced, for people.
    pub pattern: String,
    /// `running`, `stopped`...
    pub state: String,
    pub stop_reason: Value,
    pub stop_detail: Value,
    /// Calls or messages seen so far.
    pub count: u64,
    /// `calls` or `messages`.
    pub unit: String,
    pub started_at: Value,
    pub elapsed_ms: Value,
    pub max_events: u64,
    pub duration_ms: u64,
    /// Most events a second, `null` for no rate limit.
    pub rate: Option<u64>,
    /// Tallies (`returned`, `raised`, `not_returned`) and any key a newer helper adds.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `traces`: the node's sessions, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TracesReport {
    pub sessions: Vec<TraceSession>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `trace_results`: the session, and its calls (`trace`) or events (`trace_messages`) from
/// `since` on.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TraceResultsReport {
    #[serde(flatten)]
    pub session: TraceSession,
    /// Pass as `since` to read on.
    pub next_seq: u64,
    /// Each call with `call`, `status`, `result` or `exception`, and `duration_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<Vec<Map<String, Value>>>,
    /// Each message sent or received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<Map<String, Value>>>,
}

// ---------------------------------------------------------------------------------------------
// system_monitor

/// `system_monitor`: the settings in force and the events seen (`os_sup_sysmon`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SystemMonitorReport {
    pub active: bool,
    /// Thresholds in force (`long_gc_ms`, `busy_port`...).
    pub settings: Map<String, Value>,
    /// The latest events, oldest first.
    pub events: Vec<MonitorEvent>,
    /// Events dropped by the rate limit.
    pub dropped: u64,
    /// `total` (events kept), `owner` (the node's system monitor process) and any key a newer
    /// helper adds.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One `erlang:system_monitor` event.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MonitorEvent {
    pub seq: u64,
    /// `long_gc`, `long_schedule`, `large_heap`, `busy_port`, `busy_dist_port`.
    pub kind: String,
    pub pid: String,
    pub name: Option<String>,
    pub current: Option<String>,
    pub info: String,
    /// The event as one line.
    pub text: String,
    /// `time`, `time_us` and any key a newer helper adds.
    #[serde(flatten)]
    pub extra: Extra,
}

// ---------------------------------------------------------------------------------------------
// docs, source, callers, find

/// `docs`: a module's summary and members, or one name's signatures, specs and doc
/// (`os_sup_code`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DocsReport {
    /// What was looked up, in the node's syntax (`Enum.map/2`).
    pub target: String,
    pub module: String,
    /// `module`, `function`, `macro`, `callback` or `type`.
    pub kind: String,
    /// The module has an EEP-48 docs chunk.
    pub docs_chunk: bool,
    /// Why docs are missing, when they are.
    pub note: Option<String>,
    /// The module doc (cut), for a module.
    pub moduledoc: Option<String>,
    pub deprecated: Option<String>,
    /// One per arity (or per member found), for a function, macro, callback or type.
    pub entries: Vec<DocEntry>,
    /// For a module: its members as `name/arity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub functions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub macros: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callbacks: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub types: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One documented member.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DocEntry {
    pub kind: String,
    pub name: String,
    pub arity: u64,
    pub signatures: Vec<String>,
    /// `@spec`s (or `-spec`s), rendered.
    pub specs: Vec<String>,
    /// Markdown as stored (cut), or why there is none.
    pub doc: Option<String>,
    pub deprecated: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `source`: where a module or member is defined (`os_sup_code`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SourceReport {
    pub target: String,
    pub module: String,
    pub kind: String,
    /// Relative to the project when inside it.
    pub file: Option<String>,
    /// The module's line, or the first entry's.
    pub line: Option<u64>,
    pub entries: Vec<SourceEntry>,
    pub note: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One definition and the first line of each of its clauses.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SourceEntry {
    pub name: String,
    pub arity: u64,
    /// `def`, `defp`, `defmacro`, `callback`, `type`...
    pub kind: String,
    pub line: Option<u64>,
    pub clauses: Vec<u64>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `callers`: call sites of a function in the project, or what it calls
/// (`os_sup_code_xref`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CallersReport {
    pub target: String,
    /// `callers` or `callees`.
    pub direction: String,
    /// One per calling (or called) function.
    pub rows: Vec<CallRow>,
    pub call_sites: u64,
    /// Which modules count as the project's (`null` for callees).
    pub scope: Option<String>,
    pub modules_scanned: u64,
    pub modules_total: u64,
    /// The time budget ran out before every module was read.
    pub partial: bool,
    /// More rows than `limit`.
    pub truncated: bool,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A function and the lines of its call sites.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CallRow {
    pub function: String,
    pub file: Option<String>,
    /// The first 20 lines.
    pub lines: Vec<u64>,
    pub line_count: u64,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `find`: modules and functions by name (`os_sup_code_find`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FindReport {
    pub query: String,
    /// The project's own first.
    pub hits: Vec<FindHit>,
    pub total: u64,
    pub truncated: bool,
    /// The time budget ran out before every module was searched.
    pub partial: bool,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One module or function found.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FindHit {
    /// `module`, `function` or `macro`.
    pub kind: String,
    pub name: String,
    pub module: String,
    pub arity: Option<u64>,
    /// One of the project's own modules.
    pub project: bool,
    /// The first line of its doc.
    pub doc: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helper::introspect::Introspection;
    use serde_json::json;

    /// Decodes `data` as `T` and checks it serializes back to the same JSON.
    fn round_trip<T: Introspect>(data: Value) -> T::Output {
        let found = Introspection {
            text: String::new(),
            data: data.clone(),
        }
        .decode::<T::Output>("tool")
        .unwrap();
        assert_eq!(serde_json::to_value(&found.data).unwrap(), data);
        found.data
    }

    #[test]
    fn outputs_serialize_to_the_json_they_were_read_from() {
        let report = round_trip::<ProcessInfoQuery>(json!({
            "pid": "#PID<0.1.0>", "registered_name": null, "status": "waiting",
            "initial_call": "a:b/0", "proc_lib_initial_call": null, "current_stacktrace": "",
            "parent": "<0.9.0> (sup)", "ancestors": [], "app_frame": null, "links": ["#PID<0.2.0>"], "link_count": 1, "monitors": [],
            "monitor_count": 0, "memory": 2000, "reductions": 10, "message_queue_len": 0,
            "messages": [], "messages_note": null, "mailbox": null, "dictionary_keys": [],
            "trap_exit": false, "heap_size": 10, "total_heap_size": 20,
            "group_leader": "#PID<0.3.0>", "a_new_key": [1, 2]
        }));
        assert_eq!(report.link_count, 1);
        assert_eq!(report.extra["a_new_key"], json!([1, 2]));
        let tree = round_trip::<SupervisionTreeQuery>(json!({
            "roots": [{
                "id": null, "pid": "<0.5.0>", "kind": "supervisor", "name": "sup",
                "strategy": "one_for_one", "intensity": 3, "period": 5, "restart": null,
                "modules": [], "child_count": 1, "truncated_children": 0, "application": null,
                "counts": {"active": 1, "workers": 1},
                "children": [{
                    "id": "w", "pid": null, "kind": "worker", "name": null, "strategy": null,
                    "intensity": null, "period": null, "restart": "permanent",
                    "modules": ["w"], "children": [], "child_count": null,
                    "truncated_children": 0, "status": "restarting"
                }]
            }],
            "node_count": 2, "truncated": false, "duration_us": 100
        }));
        assert_eq!(
            tree.roots[0].children[0].status.as_deref(),
            Some("restarting")
        );
        let waits = round_trip::<WaitsQuery>(json!({
            "chains": [{
                "hops": [
                    {"pid": "#PID<0.9.0>", "label": "Shop.Ledger", "node": "a@h", "alive": true,
                     "message_queue_len": 12, "from": null,
                     "wait": {"kind": "call", "confirmed": true, "function": ":gen.do_call/4",
                              "targets": ["Shop.Audit"], "pending_whole_window": null}},
                    {"pid": null, "label": "x", "node": "b@h", "alive": null, "wait": null}
                ],
                "deadlock": false, "stop": "remote", "confirmed": true, "cycle_to": null,
                "also_waiting": [], "also_count": 0, "text": "Shop.Ledger → call → x"
            }],
            "deadlocks": 0, "window_ms": 500, "duration_us": 9, "mode": "pid", "scanned": null,
            "process_count": null, "scan_truncated": false, "waiting": null, "chains_found": 1,
            "waited_on_by": [{"pid": "#PID<0.8.0>", "label": "Shop.Importer", "kind": "call"}]
        }));
        assert_eq!(
            waits.chains[0].hops[1].wait.as_ref().map(|w| w.confirmed),
            None
        );
        round_trip::<ApplicationsQuery>(json!({
            "applications": [{"name": "kernel", "vsn": "9.0", "description": "ERTS"}]
        }));
        let one = round_trip::<ApplicationsQuery>(json!({
            "name": "demo", "vsn": "0.1.0", "description": "demo", "running": true,
            "env": [{"key": "port", "value": "4000"}], "env_count": 1
        }));
        assert!(matches!(one, ApplicationsReport::One(ref app) if app.running));
    }

    #[test]
    fn code_tool_outputs_round_trip() {
        let docs = round_trip::<DocsQuery>(json!({
            "target": "Enum.map/2", "module": "Enum", "kind": "function", "docs_chunk": true,
            "note": null, "moduledoc": null, "deprecated": null,
            "entries": [{"kind": "function", "name": "Enum.map/2", "arity": 2,
                         "signatures": ["map(enumerable, fun)"],
                         "specs": ["@spec map(t(), (element() -> any())) :: list()"],
                         "doc": "Returns a list", "deprecated": null}]
        }));
        assert_eq!(docs.entries[0].arity, 2);
        round_trip::<DocsQuery>(json!({
            "target": "Enum", "module": "Enum", "kind": "module", "docs_chunk": false,
            "note": "no docs chunk", "moduledoc": null, "deprecated": null, "entries": [],
            "functions": ["map/2"], "macros": [], "callbacks": [], "types": ["t/0"]
        }));
        round_trip::<SourceQuery>(json!({
            "target": "M.f/1", "module": "M", "kind": "def", "file": "lib/m.ex", "line": 3,
            "note": null,
            "entries": [{"name": "M.f/1", "arity": 1, "kind": "def", "line": 3, "clauses": [3, 5]}]
        }));
        round_trip::<CallersQuery>(json!({
            "target": "M.f/1", "direction": "callers", "call_sites": 1, "scope": null,
            "modules_scanned": 1, "modules_total": 1, "partial": false, "truncated": false,
            "rows": [{"function": "N.g/0", "file": null, "lines": [4], "line_count": 1}]
        }));
        round_trip::<FindQuery>(json!({
            "query": "m", "total": 1, "truncated": false, "partial": false,
            "hits": [{"kind": "module", "name": "M", "module": "M", "arity": null,
                      "project": true, "doc": null}]
        }));
    }

    #[test]
    fn data_of_another_shape_is_a_bad_reply() {
        let error = Introspection {
            text: String::new(),
            data: json!({"rows": "not a list"}),
        }
        .decode::<ProcessesReport>("processes")
        .unwrap_err();
        assert!(
            matches!(error, super::super::HelperError::BadReply(ref m) if m.contains("processes")),
            "{error}"
        );
    }
}
