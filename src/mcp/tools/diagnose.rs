//! `diagnose`: what is wrong with a node, in one call. The node samples itself over a short
//! window (`os_sup_health`) and answers with ranked findings (deadlocks, growing process
//! groups, restarts, growing ETS tables, long mailboxes, memory, limits, run queue, errors),
//! each one line of evidence and the next call to make; one line of figures when healthy.
//!
//! The node sends each finding's next call as data (`{"tool", "args": [[key, value]…]}`) and
//! its figures line as the text; this file writes the findings and their next calls, with the
//! node's name as the agent calls it (`process_info {"name":"web","pid":"<0.1.0>"}`), so no
//! JSON is written by hand on the node and the name is never sent down.

use crate::bounds::{DIAGNOSE_WINDOW_DEFAULT_MS, DIAGNOSE_WINDOW_MS};
use crate::mcp::output::success;
use crate::mcp::McpServer;
use crate::node::{Lang, ToolCall};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

/// Findings written out in full; the others are counted (all are in the data).
const SHOWN: usize = 5;
/// The text's budget in bytes (lines past it are counted, not cut).
const TEXT_BYTES: usize = 2000;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// 100..5000.
    #[serde(default = "default_window_ms")]
    pub window_ms: u32,
    /// Term syntax: `auto`, `elixir` or `erlang`.
    #[serde(default)]
    pub format: Lang,
}

fn default_window_ms() -> u32 {
    DIAGNOSE_WINDOW_DEFAULT_MS as u32
}

#[tool_router(router = diagnose_router, vis = "pub(crate)")]
impl McpServer {
    /// What is wrong with a node, ranked (deadlocks, leaks, restarts, growth, limits, errors),
    /// with evidence and the next call. Start here.
    #[tool(
        name = "diagnose",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn diagnose(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let window = DIAGNOSE_WINDOW_MS.clamp(input.window_ms.into());
        let call = ToolCall::new("diagnose")
            .int("window_ms", Some(window))
            .format(input.format)
            .plus(Duration::from_millis(window));
        Ok(match self.registry.call_tool(&input.name, &call).await {
            Ok(reply) => {
                let mut data = reply.data;
                let mut text = report(&input.name, &mut data, reply.text);
                // What the server knows of the node that the node cannot see in itself (an
                // endpoint that serves nothing looks healthy from inside).
                let warnings = self
                    .registry
                    .node_status(&input.name)
                    .map(|s| s.warnings)
                    .unwrap_or_default();
                if !warnings.is_empty() {
                    let lines: Vec<String> =
                        warnings.iter().map(|w| format!("warning: {w}")).collect();
                    text = format!("{}\n{text}", lines.join("\n"));
                    data["warnings"] = warnings.into();
                }
                success(text, &data)
            }
            Err(e) => e.into(),
        })
    }
}

/// The report's text: the findings, most urgent first, each with its next call, above the
/// node's `figures` line. Each finding's `next` becomes that call's text in `data` too.
fn report(name: &str, data: &mut Value, figures: String) -> String {
    let Some(findings) = data["findings"].as_array_mut().filter(|f| !f.is_empty()) else {
        return figures;
    };
    let count = findings.len();
    let mut lines = vec![format!(
        "{count} finding{}, most urgent first:",
        if count == 1 { "" } else { "s" }
    )];
    for (i, finding) in findings.iter_mut().enumerate() {
        let next = next_call(name, &finding["next"]);
        if i < SHOWN {
            let line = finding["line"].as_str().unwrap_or_default();
            lines.push(format!("{}. {line}", i + 1));
            lines.push(format!("   next: {next}"));
        }
        finding["next"] = Value::String(next);
    }
    if count > SHOWN {
        lines.push(format!("({} more findings in data)", count - SHOWN));
    }
    lines.push(figures);
    within(lines, TEXT_BYTES)
}

/// `process_info {"name":"web","pid":"<0.1.0>"}` from `{"tool": "process_info", "args":
/// [["pid", "<0.1.0>"]]}`, the node's `name` first.
fn next_call(name: &str, next: &Value) -> String {
    let tool = next["tool"].as_str().unwrap_or_default();
    let mut pairs = vec![format!("\"name\":{}", Value::from(name))];
    for pair in next["args"].as_array().into_iter().flatten() {
        if let (Some(key), Some(value)) = (pair[0].as_str(), pair.get(1)) {
            pairs.push(format!("{}:{value}", Value::from(key)));
        }
    }
    format!("{tool} {{{}}}", pairs.join(","))
}

/// `lines` joined while they fit in `max` bytes; the rest counted (as the node's
/// `os_sup_render:lines/2` does).
fn within(lines: Vec<String>, max: usize) -> String {
    let mut size = 0;
    let mut kept = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        size += line.len() + 1;
        if size > max {
            kept.push(format!("...(truncated: {} more lines)", lines.len() - i));
            break;
        }
        kept.push(line.clone());
    }
    kept.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn findings_are_written_with_their_next_call() {
        let mut data = json!({"findings": [
            {"line": "mailbox: x", "next": {"tool": "waits", "args": [["pid", "<0.1.0>"]]}},
            {"line": "errors: 2", "next": {"tool": "logs",
                "args": [["min_level", "error"], ["tail", 10]]}}
        ]});
        let text = report("we\"b", &mut data, "figures: 1 process".into());
        assert_eq!(
            text,
            "2 findings, most urgent first:\n1. mailbox: x\n   next: waits \
             {\"name\":\"we\\\"b\",\"pid\":\"<0.1.0>\"}\n2. errors: 2\n   next: logs \
             {\"name\":\"we\\\"b\",\"min_level\":\"error\",\"tail\":10}\nfigures: 1 process"
        );
        assert_eq!(
            data["findings"][1]["next"],
            "logs {\"name\":\"we\\\"b\",\"min_level\":\"error\",\"tail\":10}"
        );
        let mut healthy = json!({"findings": []});
        assert_eq!(
            report("web", &mut healthy, "healthy: ok".into()),
            "healthy: ok"
        );
    }
}
