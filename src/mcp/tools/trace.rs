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
    pub name: String,
    pub module: String,
    /// `name` or `name/arity`.
    #[serde(default)]
    pub function: Option<String>,
    #[serde(default)]
    pub arity: Option<u32>,
    /// False for loops.
    #[serde(default = "default_true")]
    pub returns: bool,
    /// Deprecated.
    #[serde(default)]
    pub exceptions: bool,
    /// Only its calls.
    #[serde(default)]
    pub pid: Option<String>,
    /// Max 10000.
    pub max_events: u32,
    /// Max 60000.
    #[serde(default)]
    pub duration_ms: Option<u32>,
    /// Calls/s stop.
    #[serde(default)]
    pub rate: Option<u32>,
    /// Whole hot module.
    #[serde(default)]
    pub force: bool,
    #[serde(default)]
    pub format: Lang,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct TraceMessagesInput {
    pub name: String,
    pub pid: String,
    pub max_events: u32,
    #[serde(default)]
    pub duration_ms: Option<u32>,
    #[serde(default)]
    pub rate: Option<u32>,
    #[serde(default)]
    pub format: Lang,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SessionInput {
    pub session: String,
    /// `next_seq`
    #[serde(default)]
    pub since: Option<u64>,
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct StopInput {
    pub session: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct MonitorInput {
    pub name: String,
    #[serde(default)]
    pub long_gc_ms: Option<u32>,
    #[serde(default)]
    pub long_schedule_ms: Option<u32>,
    #[serde(default)]
    pub large_heap_words: Option<u64>,
    #[serde(default)]
    pub busy_port: bool,
    #[serde(default)]
    pub busy_dist_port: bool,
    #[serde(default)]
    pub off: bool,
}

fn default_true() -> bool {
    true
}

/// Splits `node:id` into the node's name and the node-local session id.
fn split_session(session: &str) -> Result<(&str, &str), CallToolResult> {
    session
        .split_once(':')
        .filter(|(node, id)| !node.is_empty() && !id.is_empty())
        .ok_or_else(|| failure(format!("`{session}` is not a session id like `web:t1`")))
}

#[tool_router(router = trace_router, vis = "pub(crate)")]
impl McpServer {
    /// Trace calls of a module or `function` with results, until `max_events`, `duration_ms` or
    /// `rate`; a whole hot module needs `force`.
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

    /// Trace one process's messages, bounded like `trace`.
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

    /// A trace session's calls or messages so far.
    #[tool(
        name = "trace_results",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn trace_results(
        &self,
        Parameters(input): Parameters<SessionInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let (node, id) = match split_session(&input.session) {
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

    /// Stop a trace session.
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
        let (node, id) = match split_session(&input.session) {
            Ok(parts) => parts,
            Err(refused) => return Ok(refused),
        };
        let query = TraceStopQuery {
            session: id.to_string(),
        };
        Ok(self.introspect(node, query).await)
    }

    /// A node's trace sessions.
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

    /// Report long GCs or schedules, large heaps, busy ports.
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
