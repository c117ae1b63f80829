//! `diagnose`: what is wrong with a node, in one call. The node samples itself over a short
//! window (`os_sup_diagnose`) and answers with its findings (deadlocks, growing process groups,
//! restarts, growing ETS tables, long mailboxes, crowds, CPU, run queue, errors), each typed
//! with how soon it does harm, its holder and code, one line of evidence and the next call.
//! This slice asks the node to look for the holders of what grows in the history this server
//! kept, and adds what only the server sees; `mcp::diagnosis` ranks all the findings
//! once by time to harm and writes the report.

use crate::bounds::{DIAGNOSE_WINDOW_DEFAULT_MS, DIAGNOSE_WINDOW_MS};
use crate::mcp::diagnosis::{healthy_line, node_restarted, past_steps, ranked, report, Finding};
use crate::mcp::output::success;
use crate::mcp::McpServer;
use crate::node::growth::{self, Assessment};
use crate::node::proc_fs;
use crate::node::vitals::Sample;
use crate::node::{Lang, ToolCall};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

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
    /// What is wrong with a node, ranked (deadlocks, leaks, growth, limits, errors…), with
    /// evidence and the next call. Start here.
    #[tool(
        name = "diagnose",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn diagnose(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let window = DIAGNOSE_WINDOW_MS.clamp(input.window_ms.into());
        // The history this server kept of the node: what grows there is looked for (its
        // holders) inside the node during the window.
        let history = self.registry.vitals(&input.name);
        let kept = history
            .as_ref()
            .map(|v| v.recent(growth::STEPS_WINDOW))
            .unwrap_or_default();
        let room = proc_fs::memory_available();
        let suspects = suspects(&growth::assess(&kept, room));
        let call = ToolCall::new("diagnose")
            .int("window_ms", Some(window))
            .choices("suspects", &suspects)
            .format(input.format)
            .with_window(Duration::from_millis(window));
        Ok(match self.registry.look(&input.name, &call).await {
            Ok(reply) => {
                let mut data = reply.data;
                let node: Vec<Finding> = match serde_json::from_value(data["findings"].take()) {
                    Ok(findings) => findings,
                    Err(e) => {
                        return Err(ErrorData::internal_error(
                            format!(
                                "the node's diagnose answer has findings this server cannot \
                                 read ({e}); is its helper from another os_sup_mcp version? \
                                 `restart` the node"
                            ),
                            None,
                        ))
                    }
                };
                let mut samples = kept;
                for end in ["vitals_start", "vitals_end"] {
                    samples.extend(Sample::from_node(&data[end]));
                }
                samples.sort_by_key(|s| s.at_ms);
                let assessment = growth::assess(&samples, room);
                let (span, count) = history.map(|v| v.span()).unwrap_or_default();
                let os_pid = self.registry.local_os_pid(&input.name);
                let status = self.registry.node_status(&input.name).ok();
                // This server's own restarts of the node are crashes too, in its history.
                let restarted = status.as_ref().and_then(|s| node_restarted(s, span));
                let findings = ranked(
                    node.into_iter().chain(restarted).collect(),
                    &assessment,
                    &data["holders"],
                    os_pid,
                );
                let figures = if findings.is_empty() {
                    let uptime = status.as_ref().and_then(|s| s.uptime_ms);
                    format!(
                        "{}; {}",
                        healthy_line(span, count, uptime, &assessment.steps),
                        reply.text
                    )
                } else {
                    format!("figures: {}", reply.text)
                };
                let mut text = report(&input.name, &findings, figures);
                data["healthy"] = Value::Bool(findings.is_empty());
                data["findings"] = findings.iter().map(|f| f.to_data(&input.name)).collect();
                data["history"] = json!({"seconds": assessment.history.as_secs(),
                                         "samples": assessment.samples,
                                         "unanswered_last": assessment.unanswered,
                                         "past_steps": past_steps(&assessment.steps)
                                             .map(|(meter, step)| json!({"meter": meter, "step": step}))
                                             .collect::<Vec<_>>()});
                // What the server knows of the node that the node cannot see in itself (an
                // endpoint that serves nothing looks healthy from inside).
                let warnings = status.map(|s| s.warnings).unwrap_or_default();
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

/// The holders to look for inside the node: those of the meters growing in the history.
fn suspects(history: &Assessment) -> Vec<&'static str> {
    let mut suspects: Vec<&'static str> = history
        .concerns
        .iter()
        .filter(|t| t.growing)
        .flat_map(|t| t.meter.suspects().iter().copied())
        .collect();
    suspects.sort_unstable();
    suspects.dedup();
    suspects
}
