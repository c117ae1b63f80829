//! `logs`: a node's stdout, stderr and logger events, filtered.

use crate::mcp::output::{failure, success};
use crate::mcp::McpServer;
use crate::node::{Level, Page, Query, Since, Source};
use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

const MAX_TAIL: usize = 2000;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// The node's name, as given to `start`.
    pub name: String,
    /// At most this many of the newest matching lines (default 100, max 2000).
    #[serde(default = "default_tail")]
    pub tail: usize,
    /// Only lines from here on: a sequence number (the header's `next` from a previous call),
    /// an RFC 3339 time, or an age such as `30s` or `5m`.
    #[serde(default)]
    pub since: Option<String>,
    /// Only lines at least this severe: emergency, alert, critical, error, warning, notice,
    /// info, debug. Lines without a level (plain output) are left out.
    #[serde(default)]
    pub min_level: Option<Level>,
    /// Only lines matching this regular expression.
    #[serde(default)]
    pub grep: Option<String>,
    /// Only lines from `stdout`, `stderr` or `logger` (structured OTP logger events).
    #[serde(default)]
    pub source: Option<Source>,
    /// Leave out events caused by this tool's own `eval` calls.
    #[serde(default)]
    pub skip_eval: bool,
}

fn default_tail() -> usize {
    100
}

#[tool_router(router = logs_router, vis = "pub(crate)")]
impl McpServer {
    /// Read a node's log: its stdout and stderr lines and its OTP logger events (with level,
    /// crash and supervisor reports), newest last, one line each: `#seq time source [level]
    /// text`. Logger events read as the node's own logger renders them (Elixir syntax on
    /// Elixir nodes), each once: a crash is told by its first report. Here a line is cut at
    /// 1 KB (`…[+N bytes]`); the structured `lines` hold the whole text (at most 4 KB). Kept
    /// after the node exits or fails, until it is started again. The header says how many
    /// lines matched, how many are buffered and dropped, and the `since` value to pass next
    /// time to read only new lines.
    #[tool(
        name = "logs",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<Page>()
    )]
    pub async fn logs(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let since = match input.since.as_deref().map(Since::parse).transpose() {
            Ok(since) => since,
            Err(e) => return Ok(failure(e)),
        };
        let grep = match input.grep.as_deref().map(regex::Regex::new).transpose() {
            Ok(grep) => grep,
            Err(e) => {
                return Ok(failure(format!(
                    "`grep` is not a valid regular expression: {e}"
                )))
            }
        };
        let query = Query {
            tail: input.tail.min(MAX_TAIL),
            since,
            min_level: input.min_level,
            grep,
            source: input.source,
            skip_eval: input.skip_eval,
        };
        Ok(match self.registry.logs(&input.name, &query) {
            Ok(page) => success(page.compact(), &page),
            Err(e) => e.into(),
        })
    }
}
