//! `mix`: run a one-shot Mix task (`test`, `compile`, `format --check-formatted`…) in a project.

use crate::mcp::output::{failure, success};
use crate::mcp::McpServer;
use crate::node::mix_task::{self, MixTask};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// `test`, `compile`…
    pub task: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Project (or `name`).
    pub path: Option<String>,
    /// Its node's project.
    pub name: Option<String>,
    pub mix_env: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub timeout_ms: Option<u64>,
}

#[tool_router(router = mix_router, vis = "pub(crate)")]
impl McpServer {
    /// Run a Mix task apart: exit code, output tail, failures at file:line.
    #[tool(
        name = "mix",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    pub async fn mix(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let path = match (&input.path, &input.name) {
            (Some(path), _) => path.into(),
            (None, Some(name)) => match self.registry.project_path(name) {
                Ok(path) => path,
                Err(e) => return Ok(e.into()),
            },
            (None, None) => {
                return Ok(failure(
                    "give `path` (a Mix project) or `name` (a started node)".into(),
                ))
            }
        };
        let task = MixTask {
            path,
            task: input.task,
            args: input.args,
            env: input.env,
            mix_env: input.mix_env,
            timeout: input
                .timeout_ms
                .map_or(mix_task::DEFAULT_TIMEOUT, Duration::from_millis),
        };
        let outcome = match mix_task::run(&task).await {
            Ok(outcome) => outcome,
            Err(e) => return Ok(e.into()),
        };
        let mut text = match (outcome.timed_out, outcome.exit_code) {
            (true, _) => format!(
                "{}: killed after {} ms (timeout)",
                outcome.command, outcome.duration_ms
            ),
            (false, Some(code)) => format!(
                "{}: exit {code} in {} ms",
                outcome.command, outcome.duration_ms
            ),
            (false, None) => format!("{}: killed by a signal", outcome.command),
        };
        if let Some(tests) = &outcome.tests {
            let _ = write!(
                text,
                "\n{} tests, {} failures, {} excluded",
                tests.tests, tests.failures, tests.excluded
            );
            for f in &tests.failed {
                let _ = write!(
                    text,
                    "\nFAIL {} at {}\n  {}",
                    f.name,
                    f.location,
                    f.message.replace('\n', "\n  ")
                );
            }
        }
        if outcome.omitted_lines > 0 {
            let _ = write!(
                text,
                "\n--- output ({} earlier lines omitted) ---",
                outcome.omitted_lines
            );
        } else {
            text.push_str("\n--- output ---");
        }
        for line in &outcome.output {
            let _ = write!(text, "\n{line}");
        }
        let mut result = success(text, &outcome);
        if outcome.timed_out || outcome.exit_code != Some(0) {
            result.is_error = Some(true);
        }
        Ok(result)
    }
}
