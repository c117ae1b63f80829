//! The tracing tools: `trace`, `trace_messages`, `trace_results`, `trace_stop`, `traces` and
//! `system_monitor`. They share one concept (a bounded trace session run by the helper's
//! `os_sup_trace` on the node), so they live in one file.
//!
//! A session id is `NODE:ID` (e.g. `web:t1`): the tools that read or stop a session find the
//! node from it.

use crate::mcp::output::failure;
use crate::mcp::McpServer;
use crate::node::{
    Introspect, Lang, SessionLimits, SystemMonitorQuery, TraceMessagesQuery, TraceQuery,
    TraceResultsQuery, TraceStopQuery, TracesQuery,
};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct TraceInput {
    /// The node's name, as given to `start` or `attach`.
    pub name: String,
    /// The module: `DemoApp.Counter` or `my_mod`.
    pub module: String,
    /// Only this function: `duplicate` or `duplicate/2` (default: every function of the
    /// module).
    #[serde(default)]
    pub function: Option<String>,
    /// Only this arity (needs `function`).
    #[serde(default)]
    pub arity: Option<u32>,
    /// Pair each call with its return value or exception and its duration (default true).
    /// `false` records calls only: use it for receive loops and tail-recursive functions,
    /// whose stack a return trace grows by one frame a call.
    #[serde(default = "default_true")]
    pub returns: bool,
    /// Kept for compatibility: exceptions are paired with their calls whenever `returns` is
    /// on (`true` turns pairing on even with `returns: false`).
    #[serde(default)]
    pub exceptions: bool,
    /// Only calls made by this process (pid or registered name); default all processes.
    #[serde(default)]
    pub pid: Option<String>,
    /// Stop after this many calls (required, at most 10000); returns do not count.
    pub max_events: u32,
    /// Stop after this many ms (default 10000, at most 60000).
    #[serde(default)]
    pub duration_ms: Option<u32>,
    /// Stop when more than this many calls arrive in one second.
    #[serde(default)]
    pub rate: Option<u32>,
    /// Allow tracing every function of a hot module (`lists`, `gen_server`, `Enum`…); one
    /// named function of such a module needs no `force`.
    #[serde(default)]
    pub force: bool,
    /// Term syntax: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.
    #[serde(default)]
    pub format: Lang,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct TraceMessagesInput {
    /// The node's name, as given to `start` or `attach`.
    pub name: String,
    /// The process: a pid (`<0.123.0>`) or a registered name (`DemoApp.Counter`).
    pub pid: String,
    /// Stop after this many events (required, at most 10000).
    pub max_events: u32,
    /// Stop after this many ms (default 10000, at most 60000).
    #[serde(default)]
    pub duration_ms: Option<u32>,
    /// Stop when more than this many events arrive in one second.
    #[serde(default)]
    pub rate: Option<u32>,
    /// Term syntax: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.
    #[serde(default)]
    pub format: Lang,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SessionInput {
    /// The session id returned by `trace` or `trace_messages` (e.g. `web:t1`).
    pub session: String,
    /// The node's name; only needed with a bare id like `t1`.
    #[serde(default)]
    pub name: Option<String>,
    /// Only calls or events from this sequence number on (the `next_seq` of a previous call).
    #[serde(default)]
    pub since: Option<u64>,
    /// At most this many calls or events (default 100, max 1000).
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct StopInput {
    /// The session id returned by `trace` or `trace_messages` (e.g. `web:t1`).
    pub session: String,
    /// The node's name; only needed with a bare id like `t1`.
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct MonitorInput {
    /// The node's name, as given to `start` or `attach`.
    pub name: String,
    /// Report garbage collections longer than this many ms.
    #[serde(default)]
    pub long_gc_ms: Option<u32>,
    /// Report processes or ports scheduled for longer than this many ms.
    #[serde(default)]
    pub long_schedule_ms: Option<u32>,
    /// Report heaps larger than this many words.
    #[serde(default)]
    pub large_heap_words: Option<u64>,
    /// Report processes blocked on a busy port.
    #[serde(default)]
    pub busy_port: bool,
    /// Report processes blocked on a busy distribution port.
    #[serde(default)]
    pub busy_dist_port: bool,
    /// Turn monitoring off.
    #[serde(default)]
    pub off: bool,
}

fn default_true() -> bool {
    true
}

/// The node's name and the node-local id of a session given as `node:id`, or as a bare `id`
/// with the node's `name` (every tool about a node takes `name`, so agents pass it).
fn split_session<'a>(
    session: &'a str,
    name: Option<&'a str>,
) -> Result<(&'a str, &'a str), CallToolResult> {
    match (session.split_once(':'), name) {
        (Some((node, id)), name) if !node.is_empty() && !id.is_empty() => match name {
            Some(name) if name != node => Err(failure(format!(
                "session `{session}` belongs to node `{node}`, not `{name}`: pass the session \
                 id as `traces` or `trace` returned it"
            ))),
            _ => Ok((node, id)),
        },
        (None, Some(name)) if !session.is_empty() => Ok((name, session)),
        _ => Err(failure(format!(
            "`{session}` is not a session id like `web:t1` (as `trace` returned it; or pass \
             the node's `name` with a bare id like `t1`)"
        ))),
    }
}

#[tool_router(router = trace_router, vis = "pub(crate)")]
impl McpServer {
    /// Trace calls to a module's functions (or one function) on a live node, safely: each call
    /// is paired with its return value or exception and its duration; the session stops by
    /// itself after `max_events` calls (required), `duration_ms` or `rate`, enforced on the
    /// node, and then removes every trace pattern and flag it set (also if this server
    /// disconnects). Every function of a hot module (`String`, `lists`…) is refused unless
    /// `force` (one named function is fine); a node already traced by someone else (e.g.
    /// `dbg`) is refused. Returns a session id for `trace_results`.
    #[tool(
        name = "trace",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    pub async fn trace(
        &self,
        Parameters(input): Parameters<TraceInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = TraceQuery {
            module: input.module,
            function: input.function,
            arity: input.arity,
            returns: input.returns,
            exceptions: input.exceptions,
            pid: input.pid,
            force: input.force,
            limits: SessionLimits {
                max_events: input.max_events,
                duration_ms: input.duration_ms,
                rate: input.rate,
            },
            format: input.format,
        };
        Ok(self.start_session(&input.name, query).await)
    }

    /// Trace the messages one process sends and receives (e.g. a GenServer's calls and
    /// replies), bounded like `trace`. Returns a session id for `trace_results`.
    #[tool(
        name = "trace_messages",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    pub async fn trace_messages(
        &self,
        Parameters(input): Parameters<TraceMessagesInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = TraceMessagesQuery {
            pid: input.pid,
            limits: SessionLimits {
                max_events: input.max_events,
                duration_ms: input.duration_ms,
                rate: input.rate,
            },
            format: input.format,
        };
        Ok(self.start_session(&input.name, query).await)
    }

    /// A trace session so far and whether it is still running or why it stopped. Call traces:
    /// one line per call (time, pid, call with arguments, `-> result` or `raised kind:
    /// reason`, duration; calls that had not returned are marked), and `calls` with
    /// `duration_us` in the data. Message traces: one line per send or receive (`events`).
    #[tool(
        name = "trace_results",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn trace_results(
        &self,
        Parameters(input): Parameters<SessionInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let (node, id) = match split_session(&input.session, input.name.as_deref()) {
            Ok(parts) => parts,
            Err(refused) => return Ok(refused),
        };
        let query = TraceResultsQuery {
            session: id.to_string(),
            since: input.since,
            limit: input.limit,
        };
        Ok(self.introspect(node, query).await)
    }

    /// Stop a trace session now, removing every pattern and flag it set.
    #[tool(
        name = "trace_stop",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn trace_stop(
        &self,
        Parameters(input): Parameters<StopInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let (node, id) = match split_session(&input.session, input.name.as_deref()) {
            Ok(parts) => parts,
            Err(refused) => return Ok(refused),
        };
        let query = TraceStopQuery {
            session: id.to_string(),
        };
        Ok(self.introspect(node, query).await)
    }

    /// List a node's trace sessions with their state, call or event counts and stop reasons.
    #[tool(
        name = "traces",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn traces(
        &self,
        Parameters(input): Parameters<super::NameInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut result = self.introspect(&input.name, TracesQuery).await;
        qualify_session_ids(&input.name, &mut result);
        Ok(result)
    }

    /// Watch the node for long garbage collections, long schedules, large heaps and busy
    /// ports (`erlang:system_monitor`), rate-limited; without thresholds, shows the current
    /// settings and the events seen so far; `off` turns it off.
    #[tool(
        name = "system_monitor",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    pub async fn system_monitor(
        &self,
        Parameters(input): Parameters<MonitorInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = SystemMonitorQuery {
            long_gc_ms: input.long_gc_ms,
            long_schedule_ms: input.long_schedule_ms,
            large_heap_words: input.large_heap_words,
            busy_port: input.busy_port,
            busy_dist_port: input.busy_dist_port,
            off: input.off,
        };
        Ok(self.introspect(&input.name, query).await)
    }
}

impl McpServer {
    /// Starts a session and rewrites its node-local id into a `NODE:ID` session id.
    async fn start_session(&self, name: &str, query: impl Introspect) -> CallToolResult {
        let mut result = self.introspect(name, query).await;
        qualify_session_ids(name, &mut result);
        result
    }
}

/// Prefixes every `session` id in the data with the node's name, and names them in the text.
fn qualify_session_ids(name: &str, result: &mut CallToolResult) {
    fn walk(name: &str, value: &mut serde_json::Value, ids: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    match v {
                        serde_json::Value::String(id) if key == "session" && !id.contains(':') => {
                            ids.push(id.clone());
                            *id = format!("{name}:{id}");
                        }
                        other => walk(name, other, ids),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| walk(name, v, ids)),
            _ => {}
        }
    }
    if result.is_error == Some(true) {
        return;
    }
    let mut ids = Vec::new();
    if let Some(data) = result.structured_content.as_mut() {
        walk(name, data, &mut ids);
    }
    if ids.is_empty() {
        return;
    }
    let qualified: Vec<String> = ids.iter().map(|id| format!("{name}:{id}")).collect();
    if let Some(rmcp::model::ContentBlock::Text(text)) = result.content.first_mut() {
        text.text = format!("session id: {}\n{}", qualified.join(", "), text.text);
    }
}
