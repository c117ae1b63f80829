//! `diagnose`: what is wrong with a node, in one call. The node layer builds the typed
//! [`Diagnosis`] (`node::diagnose`: the node's findings, the history's growth, ranked once,
//! the verdict decided once); this slice writes it out as the report's text and data, the
//! only place either is made. A cluster's name gets every member's diagnosis and what
//! differs between members (`mcp::cluster_diagnose`).

use crate::bounds::{DIAGNOSE_WINDOW_DEFAULT_MS, DIAGNOSE_WINDOW_MS};
use crate::mcp::finding_text;
use crate::mcp::output::success;
use crate::mcp::McpServer;
use crate::node::diagnose::{past_steps, Diagnosis, Facts, Finding, Focus, Verdict};
use crate::node::Lang;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;
use serde_json::{json, Value};
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
    /// A symptom to explain first: a function (`MyApp.Cache.get/1`), a module, a registered
    /// name or a pid. Its calls are timed over the window and the process serving it is
    /// sampled: where its time went (collections, its own work, a call it waits on, a queue).
    #[serde(default)]
    pub focus: Option<String>,
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
        let window = Duration::from_millis(DIAGNOSE_WINDOW_MS.clamp(input.window_ms.into()));
        // A node down for good is diagnosed from what the server kept of its end.
        let diagnosed = match self.registry.post_mortem(&input.name, input.format) {
            Some(post_mortem) => Ok(post_mortem),
            None => {
                self.registry
                    .diagnose(&input.name, window, input.format, focus(&input.focus))
                    .await
            }
        };
        Ok(match diagnosed {
            Ok(diagnosis) => success(
                text(&input.name, &diagnosis),
                &data(&input.name, &diagnosis),
            ),
            Err(e) => e.into(),
        })
    }
}

/// The focus asked of one node: it must name something there.
fn focus(text: &Option<String>) -> Option<Focus<'_>> {
    text.as_deref().map(|text| Focus {
        text,
        anywhere: false,
    })
}

/// The report's text: the warnings the server has of the node, then the findings (most
/// urgent first, each with its next call) above the node's figures line, or the verdict.
pub(crate) fn text(name: &str, d: &Diagnosis) -> String {
    let mut lines: Vec<String> = d.warnings.iter().map(|w| format!("warning: {w}")).collect();
    match &d.verdict {
        Verdict::Healthy(checked) => lines.push(format!("{checked}; {}", d.figures_line)),
        Verdict::Unchecked(why) => lines.push(format!(
            "no finding, but NOT CHECKED: {}; figures: {}",
            why.join("; "),
            d.figures_line
        )),
        Verdict::Findings => {
            let count = d.findings.len();
            lines.push(format!(
                "{count} finding{}, most urgent first:",
                if count == 1 { "" } else { "s" }
            ));
            for (i, finding) in d.findings.iter().take(SHOWN).enumerate() {
                lines.push(format!("{}. {}", i + 1, finding_text::line(finding)));
                lines.push(format!(
                    "   next: {}",
                    finding.next.call_text(name, d.elixir)
                ));
            }
            if count > SHOWN {
                lines.push(format!("({} more findings in data)", count - SHOWN));
            }
            lines.push(format!("figures: {}", d.figures_line));
        }
    }
    within(lines, TEXT_BYTES)
}

/// The report's data: every finding, the verdict, the figures and the history read.
pub(crate) fn data(name: &str, d: &Diagnosis) -> Value {
    let mut data = json!({
        "healthy": d.healthy(),
        "findings": d.findings.iter().map(|f| finding_data(name, f, d.elixir)).collect::<Vec<_>>(),
        "figures": d.figures,
        "window_ms": d.window_ms,
        "duration_ms": d.duration_ms,
        "history": {
            "seconds": d.assessment.history.as_secs(),
            "samples": d.assessment.samples,
            "unanswered_last": d.assessment.unanswered,
            "past_steps": past_steps(&d.assessment.steps)
                .map(|(meter, step)| json!({"meter": meter, "step": step}))
                .collect::<Vec<_>>(),
        },
    });
    if let Verdict::Unchecked(why) = &d.verdict {
        data["not_checked"] = json!(why);
    }
    if !d.warnings.is_empty() {
        data["warnings"] = json!(d.warnings);
    }
    data
}

/// One finding as data: its numbers (`facts`, the unit in each name), the next call as
/// `{tool, arguments}` with the node's `name`.
pub(crate) fn finding_data(name: &str, f: &Finding, elixir: bool) -> Value {
    let site = f.site.as_ref();
    let mut data = json!({
        "kind": f.kind,
        "seconds_to_harm": f.seconds_to_harm,
        "line": finding_text::line(f),
        "facts": facts_data(&f.facts),
        "pid": f.holder.as_ref().map(|p| if elixir { format!("#PID{}", p.local()) } else { p.local() }),
        "module": site.map(|s| s.module.clone()),
        "function": site.and_then(|s| s.function.clone()).or_else(|| f.holder_function.clone()),
        "file": site.and_then(|s| s.file.clone()),
        "file_line": site.and_then(|s| s.line),
        "next": f.next.call_json(name, elixir),
    });
    if let Some(t) = &f.trend {
        data["meter"] = json!(t.meter.key());
        data["rate_per_s"] = json!(t.rate);
        data["current"] = json!(t.current);
        data["limit"] = json!(t.limit);
        data["seconds_to_limit"] = json!(t.to_limit);
        if let Some(step) = t.past_step() {
            data["past_step"] = json!({"by": step.by, "took_s": step.took, "ago_s": step.ago});
        }
    }
    data
}

/// A finding's numbers, a whole one written as an integer (`waiting: 11`, not `11.0`).
fn facts_data(facts: &Facts) -> Value {
    let number = |v: f64| match v.fract() == 0.0 && v.abs() < 9e15 {
        true => json!(v as i64),
        false => json!(v),
    };
    facts.iter().map(|(k, v)| (k.clone(), number(*v))).collect()
}

/// `lines` joined while they fit in `max` bytes; the rest counted (as the node's
/// `os_sup_lib_render:lines/2` does).
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

    #[test]
    fn a_findings_whole_numbers_are_integers_in_its_data() {
        let facts: Facts = [("waiting".to_string(), 11.0), ("share".to_string(), 0.25)].into();
        assert_eq!(facts_data(&facts), json!({"waiting": 11, "share": 0.25}));
    }

    #[test]
    fn the_text_stops_at_its_budget_and_counts_what_it_left_out() {
        let lines: Vec<String> = ["one", "two", "three"].map(String::from).to_vec();
        assert_eq!(within(lines.clone(), 100), "one\ntwo\nthree");
        assert_eq!(within(lines, 8), "one\ntwo\n...(truncated: 1 more lines)");
    }
}
