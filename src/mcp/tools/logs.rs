//! `logs`: a node's stdout, stderr and logger events, filtered.

use crate::bounds::LOGS_TAIL;
use crate::mcp::output::{failure, success};
use crate::mcp::McpServer;
use crate::node::{Level, Query, Since, Source};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Max 2000.
    #[serde(default = "default_tail")]
    pub tail: usize,
    /// A header's `next`, a time as lines print it (UTC), RFC 3339, or an age (`5m`).
    pub since: Option<String>,
    pub min_level: Option<Level>,
    /// Regex.
    pub grep: Option<String>,
    pub source: Option<Source>,
    /// Leave out `eval`'s.
    #[serde(default)]
    pub skip_eval: bool,
    /// Lines alike logged close together as one, counted.
    #[serde(default = "default_fold")]
    pub fold: bool,
}

fn default_fold() -> bool {
    true
}

fn default_tail() -> usize {
    100
}

#[tool_router(router = logs_router, vis = "pub(crate)")]
impl McpServer {
    /// A node's stdout, stderr and logger events (kept after exit).
    #[tool(
        name = "logs",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
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
            tail: LOGS_TAIL.clamp(input.tail as u64) as usize,
            // From a header's `next`, a page forward: the lines right after it.
            from_oldest: matches!(since, Some(Since::Seq(_))),
            since,
            min_level: input.min_level,
            grep,
            source: input.source,
            skip_eval: input.skip_eval,
            fold: input.fold,
        };
        Ok(match self.registry.logs(&input.name, &query) {
            Ok(page) => success(page.compact(), &page),
            Err(e) => e.into(),
        })
    }
}
