//! The tracing tools: `trace`, `trace_messages`, `trace_results`, `trace_stop`, `traces` and
//! `system_monitor`. They share one concept (a bounded trace session run by the helper's
//! `os_sup_trace` on the node), so they live in one file.
//!
//! A session id is `NODE:ID` (e.g. `web:t1`): the tools that read or stop a session find the
//! node from it.

use crate::bounds::{
    MONITOR_HEAP_WORDS, MONITOR_MS, TRACE_DURATION_MS, TRACE_MAX_EVENTS, TRACE_RATE,
    TRACE_RESULTS_LIMIT,
};
use crate::mcp::output::failure;
use crate::mcp::McpServer;
use crate::node::{Lang, ToolCall};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct TraceInput {
    pub name: String,
    pub module: String,
    /// `name` or `name/arity`.
    pub function: Option<String>,
    pub arity: Option<u32>,
    /// False for loops.
    #[serde(default = "default_true")]
    pub returns: bool,
    /// Only its calls.
    pub pid: Option<String>,
    #[serde(flatten)]
    pub bounds: SessionBounds,
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
    #[serde(flatten)]
    pub bounds: SessionBounds,
    #[serde(default)]
    pub format: Lang,
}

/// The bounds every trace session carries (`trace`, `trace_messages`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SessionBounds {
    pub max_events: u32,
    pub duration_ms: Option<u32>,
    /// Events/s stop.
    pub rate: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SessionInput {
    /// As `trace` returned it.
    pub session: Option<String>,
    pub name: Option<String>,
    /// `next_seq`
    pub since: Option<u64>,
    pub limit: Option<u32>,
    #[serde(default)]
    pub stop: bool,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct MonitorInput {
    pub name: String,
    pub long_gc_ms: Option<u32>,
    pub long_schedule_ms: Option<u32>,
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
                 id as `trace` returned it"
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
    /// Trace a module's (or `function`'s) calls and results, bounded.
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
        let call = ToolCall::new("trace")
            .text("module", input.module.as_str())
            .text("function", input.function.as_deref())
            .int("arity", input.arity.map(u64::from))
            .flag("returns", input.returns)
            .flag("exceptions", false)
            .text("pid", input.pid.as_deref())
            .flag("force", input.force)
            .format(input.format);
        Ok(self.start_session(&input.name, call, &input.bounds).await)
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
        let call = ToolCall::new("trace_messages")
            .text("pid", input.pid.as_str())
            .format(input.format);
        Ok(self.start_session(&input.name, call, &input.bounds).await)
    }

    /// A trace session's events (`stop` ends it); no `session`: node `name`'s newest.
    #[tool(
        name = "trace_results",
        annotations(
            read_only_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    pub async fn trace_results(
        &self,
        Parameters(input): Parameters<SessionInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(session) = input.session.as_deref() else {
            let Some(name) = input.name.as_deref() else {
                return Ok(failure(
                    "pass `session` (as `trace` returned it) to read one, or `name` to read \
                     the node's newest session"
                        .to_string(),
                ));
            };
            return Ok(self.newest_session(name, &input).await);
        };
        let (node, id) = match split_session(session, input.name.as_deref()) {
            Ok(parts) => parts,
            Err(refused) => return Ok(refused),
        };
        Ok(self.read_session(node, id, &input).await)
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
        let mut call = ToolCall::new("system_monitor")
            .bounded("long_gc_ms", input.long_gc_ms.map(u64::from), MONITOR_MS)
            .bounded(
                "long_schedule_ms",
                input.long_schedule_ms.map(u64::from),
                MONITOR_MS,
            )
            .bounded(
                "large_heap_words",
                input.large_heap_words,
                MONITOR_HEAP_WORDS,
            );
        // Switches are sent only when on: an absent one keeps the node's current setting.
        for (key, on) in [
            ("busy_port", input.busy_port),
            ("busy_dist_port", input.busy_dist_port),
            ("off", input.off),
        ] {
            if on {
                call = call.flag(key, true);
            }
        }
        Ok(self.call_tool(&input.name, call).await)
    }
}

impl McpServer {
    /// Session `id`'s events on node `node` (stopped first when asked), paged by `input`.
    async fn read_session(&self, node: &str, id: &str, input: &SessionInput) -> CallToolResult {
        if input.stop {
            let stop = ToolCall::new("trace_stop").text("session", id);
            let stopped = self.call_tool(node, stop).await;
            if stopped.is_error == Some(true) {
                return stopped;
            }
        }
        let call = ToolCall::new("trace_results")
            .text("session", id)
            .int("since", input.since)
            .bounded("limit", input.limit.map(u64::from), TRACE_RESULTS_LIMIT);
        self.call_tool(node, call).await
    }

    /// The events of node `name`'s newest session (what an agent that just traced wants),
    /// then one line for each older session kept; or that there is none.
    async fn newest_session(&self, name: &str, input: &SessionInput) -> CallToolResult {
        let listing = self.call_tool(name, ToolCall::new("traces")).await;
        let ids: Vec<String> = listing
            .structured_content
            .as_ref()
            .and_then(|data| data["sessions"].as_array())
            .map(|sessions| {
                sessions
                    .iter()
                    .filter_map(|s| s["session"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let Some(newest) = ids.first() else {
            return listing;
        };
        let mut result = self.read_session(name, newest, input).await;
        // Its data lists every session kept too, as the listing does.
        if let (Some(data), Some(listing)) = (
            result.structured_content.as_mut(),
            listing.structured_content.as_ref(),
        ) {
            data["sessions"] = listing["sessions"].clone();
        }
        if result.is_error != Some(true) && ids.len() > 1 {
            let older: Vec<String> = listing_lines(&listing)
                .into_iter()
                .skip(1)
                .map(|line| format!("  {name}:{line}"))
                .collect();
            if let Some(rmcp::model::ContentBlock::Text(text)) = result.content.first_mut() {
                text.text = format!(
                    "{}\nolder sessions (pass `session` to read one):\n{}",
                    text.text,
                    older.join("\n")
                );
            }
        }
        qualify_session_ids(name, &mut result);
        result
    }

    /// Starts session `call` on node `name` within `bounds`, and rewrites its node-local id
    /// into a `NODE:ID` session id. `max_events` is refused out of range (the caller's own
    /// promise of how much a session may collect); the others are clamped.
    async fn start_session(
        &self,
        name: &str,
        call: ToolCall,
        bounds: &SessionBounds,
    ) -> CallToolResult {
        let call = call
            .required("max_events", bounds.max_events.into(), TRACE_MAX_EVENTS)
            .bounded(
                "duration_ms",
                bounds.duration_ms.map(u64::from),
                TRACE_DURATION_MS,
            )
            .bounded("rate", bounds.rate.map(u64::from), TRACE_RATE);
        let mut result = self.call_tool(name, call).await;
        qualify_session_ids(name, &mut result);
        result
    }
}

/// The lines of a tool's text answer.
fn listing_lines(result: &CallToolResult) -> Vec<String> {
    match result.content.first() {
        Some(rmcp::model::ContentBlock::Text(text)) => {
            text.text.lines().map(String::from).collect()
        }
        _ => Vec::new(),
    }
}

/// Prefixes every `session` id in the data with the node's name, and names in the text the
/// session the answer is of (its data's own `session`), or else every one it lists.
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
    let mut own = None;
    if let Some(data) = result.structured_content.as_mut() {
        walk(name, data, &mut ids);
        own = data["session"].as_str().map(String::from);
    }
    let qualified: Vec<String> = match own {
        Some(own) => vec![own],
        None => ids.iter().map(|id| format!("{name}:{id}")).collect(),
    };
    if qualified.is_empty() {
        return;
    }
    if let Some(rmcp::model::ContentBlock::Text(text)) = result.content.first_mut() {
        text.text = format!("session id: {}\n{}", qualified.join(", "), text.text);
    }
}
