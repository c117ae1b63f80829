//! The `introspect` request: one round trip runs one introspection tool inside the node
//! (`{introspect, Tool, Args, TimeoutMs}`, dispatched by the helper to `os_sup_introspect`,
//! `os_sup_waits`, `os_sup_health`, `os_sup_trace`, `os_sup_dev` or the `os_sup_code*`
//! modules), which answers with a compact text and plain data.
//!
//! [`Request`] names every tool with its typed query: only this file knows the tools' wire
//! names and argument keys, and it holds every number to its range ([`crate::bounds`]) as the
//! request is encoded. Each query names the data its tool answers with ([`Introspect`], the
//! structs in [`super::reports`]); a reply that does not fit is a [`HelperError::BadReply`].

use super::{ok_or_error, HelperError, Lang};
use crate::bounds::{self, Bound};
use crate::term;
use eetf::Term;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Time an introspection may take inside the node unless its query says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// One introspection tool and its query.
#[derive(Debug, Clone)]
pub enum Request {
    SupervisionTree(SupervisionTreeQuery),
    Processes(ProcessesQuery),
    ProcessInfo(ProcessInfoQuery),
    GetState(GetStateQuery),
    Applications(ApplicationsQuery),
    SystemInfo,
    Ets(EtsQuery),
    Waits(WaitsQuery),
    Diagnose(DiagnoseQuery),
    Recompile(RecompileQuery),
    Trace(TraceQuery),
    TraceMessages(TraceMessagesQuery),
    TraceResults(TraceResultsQuery),
    /// Stops a trace session (its node-local id).
    TraceStop {
        session: String,
    },
    /// The node's trace sessions.
    Traces,
    SystemMonitor(SystemMonitorQuery),
    Docs(DocsQuery),
    Source(SourceQuery),
    Callers(CallersQuery),
    Find(FindQuery),
}

/// `supervision_tree`: where to start and how much to show.
#[derive(Debug, Clone, Default)]
pub struct SupervisionTreeQuery {
    /// An application, a registered name or a pid; `None`: the project's applications.
    pub root: Option<String>,
    pub depth: Option<u32>,
    pub max_children: Option<u32>,
    pub format: Lang,
}

// What `processes` ranks by (its schema is part of the `processes` tool's input).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SortBy {
    /// Memory, or count with `group_by` (the default; not listed).
    #[default]
    #[schemars(skip)]
    Auto,
    Memory,
    Reductions,
    MessageQueueLen,
    BinaryMemory,
    HeapSize,
    /// Processes per group (with `group_by`).
    Count,
}

impl SortBy {
    /// The wire name; `None` lets the node pick (memory, or count for groups).
    fn as_str(self) -> Option<&'static str> {
        Some(match self {
            Self::Auto => return None,
            Self::Memory => "memory",
            Self::Reductions => "reductions",
            Self::MessageQueueLen => "message_queue_len",
            Self::BinaryMemory => "binary_memory",
            Self::HeapSize => "heap_size",
            Self::Count => "count",
        })
    }
}

// How `processes` groups processes (its schema is part of the `processes` tool's input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    InitialCall,
    CurrentFunction,
    Parent,
    NamePrefix,
}

impl GroupBy {
    fn as_str(self) -> &'static str {
        match self {
            Self::InitialCall => "initial_call",
            Self::CurrentFunction => "current_function",
            Self::Parent => "parent",
            Self::NamePrefix => "name_prefix",
        }
    }
}

/// `processes`: the top processes by a resource, optionally over a window; or groups of
/// processes with `group_by`.
#[derive(Debug, Clone, Default)]
pub struct ProcessesQuery {
    pub sort_by: SortBy,
    pub limit: Option<u32>,
    pub window_ms: Option<u32>,
    /// Only processes whose name, initial call or current module contains this.
    pub filter: Option<String>,
    pub group_by: Option<GroupBy>,
    pub format: Lang,
}

/// `process_info`: one process in detail.
#[derive(Debug, Clone, Default)]
pub struct ProcessInfoQuery {
    /// A pid or a registered name.
    pub pid: String,
    pub messages: Option<u32>,
    pub max_messages: Option<u32>,
    pub format: Lang,
}

/// `get_state`: an OTP process's state, with how long it gets to answer.
#[derive(Debug, Clone, Default)]
pub struct GetStateQuery {
    pub pid: String,
    pub timeout_ms: Option<u64>,
    pub format: Lang,
}

/// `applications`: all running applications, or one's environment.
#[derive(Debug, Clone, Default)]
pub struct ApplicationsQuery {
    pub app: Option<String>,
    pub format: Lang,
}

/// `ets`: tables by memory, or one table with sample rows.
#[derive(Debug, Clone, Default)]
pub struct EtsQuery {
    pub table: Option<String>,
    pub limit: Option<u32>,
    pub format: Lang,
}

/// `waits`: who waits on whom, from one process or the whole node.
#[derive(Debug, Clone, Default)]
pub struct WaitsQuery {
    pub pid: Option<String>,
    pub window_ms: Option<u32>,
    pub limit: Option<u32>,
    pub format: Lang,
}

/// `diagnose`: a health report sampled over a window.
#[derive(Debug, Clone, Default)]
pub struct DiagnoseQuery {
    /// The node's name in the registry, written into the next calls the report suggests.
    pub node: String,
    pub window_ms: Option<u32>,
    pub format: Lang,
}

/// `recompile`: recompile the project in its node.
#[derive(Debug, Clone, Default)]
pub struct RecompileQuery {
    pub force: bool,
    /// Compile, load and watch together.
    pub timeout_ms: Option<u64>,
    /// How long to watch the applications after the load.
    pub watch_ms: Option<u64>,
}

/// The bounds every trace session carries.
#[derive(Debug, Clone, Default)]
pub struct SessionLimits {
    /// Required; refused out of range ([`bounds::TRACE_MAX_EVENTS`]).
    pub max_events: u32,
    pub duration_ms: Option<u32>,
    pub rate: Option<u32>,
}

/// `trace`: calls to a module's functions.
#[derive(Debug, Clone, Default)]
pub struct TraceQuery {
    pub module: String,
    pub function: Option<String>,
    pub arity: Option<u32>,
    pub returns: bool,
    pub exceptions: bool,
    pub pid: Option<String>,
    pub force: bool,
    pub limits: SessionLimits,
    pub format: Lang,
}

/// `trace_messages`: what one process sends and receives.
#[derive(Debug, Clone, Default)]
pub struct TraceMessagesQuery {
    pub pid: String,
    pub limits: SessionLimits,
    pub format: Lang,
}

/// `trace_results`: a session so far.
#[derive(Debug, Clone, Default)]
pub struct TraceResultsQuery {
    /// The node-local session id.
    pub session: String,
    pub since: Option<u64>,
    pub limit: Option<u32>,
}

/// `system_monitor`: thresholds to watch for; none shows the current settings.
#[derive(Debug, Clone, Default)]
pub struct SystemMonitorQuery {
    pub long_gc_ms: Option<u32>,
    pub long_schedule_ms: Option<u32>,
    pub large_heap_words: Option<u64>,
    pub busy_port: bool,
    pub busy_dist_port: bool,
    pub off: bool,
}

/// `docs`: docs and specs of a module, function, callback or type.
#[derive(Debug, Clone, Default)]
pub struct DocsQuery {
    /// `Enum.map/2`, `Enum`, `:lists.seq/3`, `lists:seq/3`, `t:Enum.t/0`...
    pub target: String,
    pub format: Lang,
}

/// `source`: where a module, function, callback or type is defined.
#[derive(Debug, Clone, Default)]
pub struct SourceQuery {
    pub target: String,
    pub format: Lang,
}

/// `callers`: who calls a function in the project (or, with `callees`, what it calls).
#[derive(Debug, Clone, Default)]
pub struct CallersQuery {
    pub target: String,
    pub limit: Option<u32>,
    pub callees: bool,
    pub format: Lang,
}

/// `find`: modules and functions by name.
#[derive(Debug, Clone, Default)]
pub struct FindQuery {
    /// A substring, or a regex written `/.../`.
    pub query: String,
    pub limit: Option<u32>,
    pub format: Lang,
}

macro_rules! from_query {
    ($($query:ident => $variant:ident),* $(,)?) => {
        $(impl From<$query> for Request {
            fn from(query: $query) -> Self {
                Request::$variant(query)
            }
        })*
    };
}

from_query! {
    SupervisionTreeQuery => SupervisionTree,
    ProcessesQuery => Processes,
    ProcessInfoQuery => ProcessInfo,
    GetStateQuery => GetState,
    ApplicationsQuery => Applications,
    EtsQuery => Ets,
    WaitsQuery => Waits,
    DiagnoseQuery => Diagnose,
    RecompileQuery => Recompile,
    TraceQuery => Trace,
    TraceMessagesQuery => TraceMessages,
    TraceResultsQuery => TraceResults,
    SystemMonitorQuery => SystemMonitor,
    DocsQuery => Docs,
    SourceQuery => Source,
    CallersQuery => Callers,
    FindQuery => Find,
}

/// The argument map of one tool, built key by key.
#[derive(Debug, Default)]
struct Args(Vec<(&'static str, Term)>);

impl Args {
    fn text(mut self, key: &'static str, value: Option<&str>) -> Self {
        if let Some(value) = value {
            self.0.push((key, term::binary(value)));
        }
        self
    }

    fn int(mut self, key: &'static str, value: Option<u64>) -> Self {
        if let Some(value) = value {
            self.0
                .push((key, term::int(value.min(i64::MAX as u64) as i64)));
        }
        self
    }

    /// A number held to `bound` (the clamping rule of [`crate::bounds`]).
    fn bounded(self, key: &'static str, value: Option<impl Into<u64>>, bound: Bound) -> Self {
        self.int(key, value.map(|v| bound.clamp(v.into())))
    }

    fn flag(self, key: &'static str, value: bool) -> Self {
        self.choice(key, Some(if value { "true" } else { "false" }))
    }

    /// A choice from a fixed set (sort keys and the like), sent as an atom.
    fn choice(mut self, key: &'static str, value: Option<&str>) -> Self {
        if let Some(value) = value {
            self.0.push((key, term::atom(value)));
        }
        self
    }

    /// Rendering syntax for terms in the reply.
    fn format(self, format: Lang) -> Self {
        self.choice("format", Some(format.as_str()))
    }

    /// A trace session's bounds: `max_events` refused out of range, the others clamped.
    fn session(self, limits: &SessionLimits) -> Result<Self, HelperError> {
        let max_events = bounds::TRACE_MAX_EVENTS
            .check("max_events", limits.max_events.into())
            .map_err(HelperError::Invalid)?;
        Ok(self
            .int("max_events", Some(max_events))
            .bounded("duration_ms", limits.duration_ms, bounds::TRACE_DURATION_MS)
            .bounded("rate", limits.rate, bounds::TRACE_RATE))
    }

    fn into_term(self) -> Term {
        term::map(self.0)
    }
}

impl Request {
    /// The tool's name on the node.
    pub fn tool(&self) -> &'static str {
        match self {
            Self::SupervisionTree(_) => "supervision_tree",
            Self::Processes(_) => "processes",
            Self::ProcessInfo(_) => "process_info",
            Self::GetState(_) => "get_state",
            Self::Applications(_) => "applications",
            Self::SystemInfo => "system_info",
            Self::Ets(_) => "ets",
            Self::Waits(_) => "waits",
            Self::Diagnose(_) => "diagnose",
            Self::Recompile(_) => "recompile",
            Self::Trace(_) => "trace",
            Self::TraceMessages(_) => "trace_messages",
            Self::TraceResults(_) => "trace_results",
            Self::TraceStop { .. } => "trace_stop",
            Self::Traces => "traces",
            Self::SystemMonitor(_) => "system_monitor",
            Self::Docs(_) => "docs",
            Self::Source(_) => "source",
            Self::Callers(_) => "callers",
            Self::Find(_) => "find",
        }
    }

    /// How long the tool may run inside the node: 5 s (`DEFAULT_TIMEOUT`), plus a sampling
    /// window, or the query's own timeout.
    pub fn timeout(&self) -> Duration {
        let ms = Duration::from_millis;
        match self {
            Self::Processes(q) => {
                let window = q
                    .window_ms
                    .map_or(0, |w| bounds::PROCESSES_WINDOW_MS.clamp(w.into()));
                DEFAULT_TIMEOUT + ms(window)
            }
            Self::Waits(q) => {
                let window = bounds::WAITS_WINDOW_MS.clamp(q.window_ms.unwrap_or(0).into());
                DEFAULT_TIMEOUT + ms(window)
            }
            Self::Diagnose(q) => {
                let window = bounds::DIAGNOSE_WINDOW_MS.clamp(q.window_ms.unwrap_or(1000).into());
                DEFAULT_TIMEOUT + ms(window)
            }
            Self::GetState(q) => {
                let answer = bounds::GET_STATE_TIMEOUT_MS.clamp(q.timeout_ms.unwrap_or(2000));
                ms(answer) + Duration::from_secs(2)
            }
            Self::Recompile(q) => {
                ms(bounds::RECOMPILE_TIMEOUT_MS.clamp(q.timeout_ms.unwrap_or(60_000)))
            }
            _ => DEFAULT_TIMEOUT,
        }
    }

    /// The tool's argument map; refused before anything is sent when a required bound is out
    /// of range.
    fn args(&self) -> Result<Args, HelperError> {
        use bounds::*;
        let a = Args::default();
        Ok(match self {
            Self::SupervisionTree(q) => a
                .text("root", q.root.as_deref())
                .bounded("depth", q.depth, TREE_DEPTH)
                .bounded("max_children", q.max_children, TREE_MAX_CHILDREN)
                .format(q.format),
            Self::Processes(q) => a
                .choice("sort_by", q.sort_by.as_str())
                .choice("group_by", q.group_by.map(GroupBy::as_str))
                .bounded("limit", q.limit, PROCESSES_LIMIT)
                .bounded("window_ms", q.window_ms, PROCESSES_WINDOW_MS)
                .text("filter", q.filter.as_deref())
                .format(q.format),
            Self::ProcessInfo(q) => a
                .text("pid", Some(&q.pid))
                .bounded("messages", q.messages, PROCESS_MESSAGES)
                .bounded("max_messages", q.max_messages, PROCESS_MAX_MESSAGES)
                .format(q.format),
            Self::GetState(q) => a
                .text("pid", Some(&q.pid))
                .bounded("timeout_ms", q.timeout_ms, GET_STATE_TIMEOUT_MS)
                .format(q.format),
            Self::Applications(q) => a.text("app", q.app.as_deref()).format(q.format),
            Self::SystemInfo | Self::Traces => a,
            Self::Ets(q) => a
                .text("table", q.table.as_deref())
                .bounded("limit", q.limit, ETS_LIMIT)
                .format(q.format),
            Self::Waits(q) => a
                .text("pid", q.pid.as_deref())
                .bounded("window_ms", q.window_ms, WAITS_WINDOW_MS)
                .bounded("limit", q.limit, WAITS_LIMIT)
                .format(q.format),
            Self::Diagnose(q) => a
                .text("name", Some(&q.node))
                .bounded("window_ms", q.window_ms, DIAGNOSE_WINDOW_MS)
                .format(q.format),
            Self::Recompile(q) => a
                .flag("force", q.force)
                .int(
                    "timeout_ms",
                    Some(RECOMPILE_TIMEOUT_MS.clamp(q.timeout_ms.unwrap_or(60_000))),
                )
                .bounded("watch_ms", q.watch_ms, RECOMPILE_WATCH_MS),
            Self::Trace(q) => a
                .text("module", Some(&q.module))
                .text("function", q.function.as_deref())
                .int("arity", q.arity.map(u64::from))
                .flag("returns", q.returns)
                .flag("exceptions", q.exceptions)
                .text("pid", q.pid.as_deref())
                .flag("force", q.force)
                .format(q.format)
                .session(&q.limits)?,
            Self::TraceMessages(q) => a
                .text("pid", Some(&q.pid))
                .format(q.format)
                .session(&q.limits)?,
            Self::TraceResults(q) => a
                .text("session", Some(&q.session))
                .int("since", q.since)
                .bounded("limit", q.limit, TRACE_RESULTS_LIMIT),
            Self::TraceStop { session } => a.text("session", Some(session)),
            Self::Docs(q) => a.text("target", Some(&q.target)).format(q.format),
            Self::Source(q) => a.text("target", Some(&q.target)).format(q.format),
            Self::Callers(q) => a
                .text("target", Some(&q.target))
                .bounded("limit", q.limit, CALLERS_LIMIT)
                .flag("callees", q.callees)
                .format(q.format),
            Self::Find(q) => a
                .text("query", Some(&q.query))
                .bounded("limit", q.limit, FIND_LIMIT)
                .format(q.format),
            Self::SystemMonitor(q) => {
                let mut a = a
                    .bounded("long_gc_ms", q.long_gc_ms, MONITOR_MS)
                    .bounded("long_schedule_ms", q.long_schedule_ms, MONITOR_MS)
                    .bounded("large_heap_words", q.large_heap_words, MONITOR_HEAP_WORDS);
                for (key, on) in [
                    ("busy_port", q.busy_port),
                    ("busy_dist_port", q.busy_dist_port),
                    ("off", q.off),
                ] {
                    if on {
                        a = a.flag(key, true);
                    }
                }
                a
            }
        })
    }

    /// `{introspect, Tool, Args, TimeoutMs}`.
    pub(super) fn to_term(&self) -> Result<Term, HelperError> {
        Ok(term::tuple(vec![
            term::atom("introspect"),
            term::atom(self.tool()),
            self.args()?.into_term(),
            term::int(self.timeout().as_millis() as i64),
        ]))
    }
}

/// What an introspection tool found: compact text for reading, and the same as data, typed
/// by the tool ([`Introspect::Output`]); `serde_json::Value` is the plain JSON of the reply.
#[derive(Debug, Clone)]
pub struct Introspection<T = serde_json::Value> {
    pub text: String,
    pub data: T,
}

impl Introspection {
    /// The data read as `T`, or [`HelperError::BadReply`] naming the tool when it does not fit.
    pub fn decode<T: DeserializeOwned>(self, tool: &str) -> Result<Introspection<T>, HelperError> {
        match serde_json::from_value(self.data) {
            Ok(data) => Ok(Introspection {
                text: self.text,
                data,
            }),
            Err(e) => Err(HelperError::BadReply(format!(
                "the {tool} data does not have the expected shape: {e}"
            ))),
        }
    }
}

/// A query for one introspection tool, and the data that tool answers with.
pub trait Introspect: Into<Request> {
    /// What the helper sends back as `data`, typed. It serializes to the same JSON it was
    /// read from (fields the helper may add land in an `extra` map).
    type Output: DeserializeOwned + Serialize + Send;
}

/// `system_info`: it takes no arguments.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemInfoQuery;

impl From<SystemInfoQuery> for Request {
    fn from(_: SystemInfoQuery) -> Self {
        Request::SystemInfo
    }
}

/// `trace_stop`: the node-local id of the session to stop.
#[derive(Debug, Clone, Default)]
pub struct TraceStopQuery {
    pub session: String,
}

impl From<TraceStopQuery> for Request {
    fn from(query: TraceStopQuery) -> Self {
        Request::TraceStop {
            session: query.session,
        }
    }
}

/// `traces`: it takes no arguments.
#[derive(Debug, Clone, Copy, Default)]
pub struct TracesQuery;

impl From<TracesQuery> for Request {
    fn from(_: TracesQuery) -> Self {
        Request::Traces
    }
}

pub(super) fn decode_reply(reply: Term) -> Result<Introspection, HelperError> {
    match ok_or_error(reply)? {
        Ok(result) => Ok(Introspection {
            text: term::get(&result, "text")
                .and_then(term::as_text)
                .unwrap_or_default(),
            data: term::get(&result, "data")
                .map(term::to_json)
                .unwrap_or_default(),
        }),
        Err(error) => Err(failure(&error)),
    }
}

/// `{error, #{kind, message}}` as a [`HelperError::Failed`].
pub(super) fn failure(error: &Term) -> HelperError {
    match term::get(error, "message").and_then(term::as_text) {
        Some(message) => HelperError::Failed {
            kind: term::get(error, "kind")
                .and_then(term::as_atom)
                .unwrap_or("error")
                .to_string(),
            message,
        },
        None => HelperError::Refused(term::brief(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_clamped_and_max_events_refused() {
        let request = Request::from(ProcessesQuery {
            limit: Some(500),
            window_ms: Some(50_000),
            ..ProcessesQuery::default()
        });
        assert_eq!(request.timeout(), DEFAULT_TIMEOUT + Duration::from_secs(10));
        let args = request.args().unwrap().into_term();
        assert_eq!(term::get(&args, "limit").and_then(term::as_i64), Some(100));
        let trace = Request::from(TraceQuery {
            module: "lists".into(),
            ..TraceQuery::default()
        });
        let refused = trace.to_term().unwrap_err().to_string();
        assert!(
            refused.contains("max_events must be 1..=10000"),
            "{refused}"
        );
    }
}
