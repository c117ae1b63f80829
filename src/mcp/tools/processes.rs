//! `processes`: the top processes by a resource, like `recon:proc_count/proc_window`, or
//! processes counted in groups (`group_by`), where a leak of small processes shows.
//!
//! The one tool whose reply Rust reads: the dashboard ranks [`Row`]s by their change over a
//! window, so the rows are typed here; the rest of the data stays the helper's JSON.

use crate::bounds::{PROCESSES_LIMIT, PROCESSES_WINDOW_MS};
use crate::mcp::McpServer;
use crate::node::{Lang, ToolCall};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;
use std::time::Duration;

// What `processes` ranks by (its schema is part of the tool's input).
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

// How `processes` groups processes (its schema is part of the tool's input).
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

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Default memory; count with `group_by`.
    #[serde(default)]
    pub sort_by: SortBy,
    /// Count processes in groups.
    pub group_by: Option<GroupBy>,
    pub limit: Option<u32>,
    /// Rank by change over it.
    pub window_ms: Option<u32>,
    /// Name or module part.
    pub filter: Option<String>,
    #[serde(default)]
    pub format: Lang,
}

/// One process in the reply's `rows` (the fields the dashboard reads).
#[derive(Debug, Clone, Deserialize)]
pub struct Row {
    pub pid: String,
    /// The ranked value, or its change over the window (may be negative).
    pub value: i64,
    pub message_queue_len: Option<u64>,
}

/// The reply's `rows`, typed; an empty list when the data has none (groups) or does not fit.
pub fn rows(data: &serde_json::Value) -> Vec<Row> {
    serde_json::from_value(data["rows"].clone()).unwrap_or_default()
}

/// The call for `input`, allowed its window on top of the usual time.
pub fn call(input: &Input) -> ToolCall {
    let window = input.window_ms.map(|w| PROCESSES_WINDOW_MS.clamp(w.into()));
    ToolCall::new("processes")
        .choice("sort_by", input.sort_by.as_str())
        .choice("group_by", input.group_by.map(GroupBy::as_str))
        .bounded("limit", input.limit.map(u64::from), PROCESSES_LIMIT)
        .int("window_ms", window)
        .text("filter", input.filter.as_deref())
        .format(input.format)
        .with_window(Duration::from_millis(window.unwrap_or(0)))
}

#[tool_router(router = processes_router, vis = "pub(crate)")]
impl McpServer {
    /// Top processes by memory, reductions, queue…, or growth; or grouped.
    #[tool(
        name = "processes",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn processes(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.call_tool(&input.name, call(&input)).await)
    }
}
