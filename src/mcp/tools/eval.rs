//! `eval`: run Elixir or Erlang code on a node, bounded in time, memory and output size.

use crate::mcp::output::success;
use crate::mcp::McpServer;
use crate::node::{EvalRequest, Lang};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;
use std::time::Duration;

/// Largest source accepted.
const MAX_CODE_BYTES: usize = 1024 * 1024;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// Bindings do not persist.
    pub code: String,
    #[serde(default)]
    pub lang: Lang,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Every member of cluster `name`.
    #[serde(default)]
    pub all: bool,
}

fn default_timeout_ms() -> u64 {
    5000
}

#[tool_router(router = eval_router, vis = "pub(crate)")]
impl McpServer {
    /// Run Elixir or Erlang code: its value and output, or the error.
    #[tool(
        name = "eval",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    pub async fn eval(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        // A cluster's name with `all` never reaches here: the server asks every member.
        if input.all {
            return Ok(crate::mcp::output::failure(format!(
                "`all: true` runs the code on every member of a cluster, and `{}` is not a \
                 cluster's name (see `status`); drop `all` to run it on this node",
                input.name
            )));
        }
        if input.code.len() > MAX_CODE_BYTES {
            return Ok(crate::mcp::output::failure(format!(
                "code is {} bytes; the limit is {MAX_CODE_BYTES}",
                input.code.len()
            )));
        }
        let request = EvalRequest {
            code: input.code,
            lang: input.lang,
            timeout: Duration::from_millis(input.timeout_ms),
        };
        Ok(
            match self.registry.eval_on_node(&input.name, &request).await {
                Ok(Ok(out)) => {
                    let text = if out.output.is_empty() {
                        out.value.clone()
                    } else {
                        format!("{}\n--- output ---\n{}", out.value, out.output)
                    };
                    success(text, &out)
                }
                Ok(Err(err)) => {
                    let mut text = err.headline();
                    if !err.stacktrace.is_empty() {
                        text.push_str("\n--- stacktrace ---\n");
                        text.push_str(&err.stacktrace);
                    }
                    if !err.output.is_empty() {
                        text.push_str("\n--- output ---\n");
                        text.push_str(&err.output);
                    }
                    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
                    result.structured_content = serde_json::to_value(&err).ok();
                    result
                }
                Err(e) => e.into(),
            },
        )
    }
}
