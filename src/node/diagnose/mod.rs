//! `diagnose`: what is wrong with a node, as one typed [`Diagnosis`] with one owner per fact.
//!
//! The node samples itself over a short window (`os_sup_diagnose`) and sends its findings,
//! each decoded once into a [`Finding`] (the holder a pid, its code a [`Site`], the next call
//! a [`Next`]); this server assesses the history it kept once ([`history`]), adds what only
//! it sees (growth toward a limit with the holders the node found, its own restarts of the
//! node), ranks everything once by time to harm ([`rank`]) and decides once whether the node
//! is healthy ([`Verdict`]). Text is written from this at the edge (`mcp::tools::diagnose`).

mod cause;
mod concern;
mod finding;
pub mod history;
mod holder_text;
mod holders;
mod process_holder;
mod rank;
mod restarted;
mod text;
mod verdict;
mod window;
pub mod work;

pub use finding::{Arg, Facts, Finding, Joined, Keys, Kind, Next, Site};
pub use history::{Assessment, Step, Trend, TREND_MIN_SPAN};
pub use holders::Holders;
pub use text::{duration_text, rate_text};
pub use verdict::past_steps;

use super::vitals::Sample;
use super::{Lang, NodeError, Registry, ToolCall};
use serde::Deserialize;
use std::time::Duration;

/// What the node's `diagnose` sends (`os_sup_diagnose:diagnose/1`), decoded once.
#[derive(Debug, Clone, Deserialize)]
pub struct NodeReport {
    pub findings: Vec<Finding>,
    /// The node's vitals at both ends of the window (`os_sup_node_vitals:sample/0`): a rate
    /// of the history is checked against what the window saw.
    pub window_start: serde_json::Value,
    pub window_end: serde_json::Value,
    #[serde(default)]
    pub holders: Holders,
    /// What it measured (process count, memory by type, run queue, rates), as data.
    pub figures: serde_json::Value,
    /// What a member holds that its peers are expected to hold too (`os_sup_cluster_facts`).
    #[serde(default)]
    pub cluster_facts: serde_json::Value,
    pub window_ms: u64,
    pub duration_ms: u64,
    /// The syntax the node wrote terms in (`elixir` or `erlang`, `auto` resolved).
    pub format: String,
}

/// Whether the node is healthy, decided once: only when nothing was found and every check
/// could run.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Nothing found; what was checked, over how much history.
    Healthy(String),
    /// Nothing found, but these checks could not run: not a healthy answer.
    Unchecked(Vec<String>),
    /// Findings (the report's list).
    Findings,
}

/// One node's diagnosis: its findings ranked (most urgent first), the verdict, the node's
/// figures (line and data), the history read, and what this server knows of the node that
/// the node cannot see in itself.
#[derive(Debug, Clone)]
pub struct Diagnosis {
    pub findings: Vec<Finding>,
    pub verdict: Verdict,
    /// The node's figures line (what it measured).
    pub figures_line: String,
    pub figures: serde_json::Value,
    pub assessment: Assessment,
    pub warnings: Vec<String>,
    pub cluster_facts: serde_json::Value,
    pub window_ms: u64,
    pub duration_ms: u64,
    /// Terms (pids in next calls) are written in Elixir syntax.
    pub elixir: bool,
    /// The reductions a second of the node's busiest registered processes over the window
    /// (names as the node wrote them: `Elixir.Shop.Worker`), busiest first: a cluster's
    /// members are compared by them.
    pub work_now: Vec<(String, f64)>,
}

impl Diagnosis {
    pub fn healthy(&self) -> bool {
        matches!(self.verdict, Verdict::Healthy(_))
    }
}

/// Time a diagnosis gets besides its window and the usual deadline: the helper's own budget
/// for explaining its findings (2 s after the window) and its walks, which a node sharing two
/// cores with ten others makes slow. A diagnosis killed at its deadline answers nothing.
const EXPLAIN_SLACK: Duration = Duration::from_secs(4);

/// The symptom a diagnosis is asked to explain first (`diagnose`'s `focus`): a function, a
/// module, a registered name or a pid.
#[derive(Debug, Clone, Copy)]
pub struct Focus<'a> {
    pub text: &'a str,
    /// A cluster's member, where the focus may be on some members only: one that names
    /// nothing there is no focus, not an error.
    pub anywhere: bool,
}

impl Registry {
    /// The post-mortem of node `name` when it is down for good (`restarted::node_down`): no
    /// VM to ask, what the server kept of its end; `None` for a node that runs or will.
    pub fn post_mortem(&self, name: &str, format: Lang) -> Option<Diagnosis> {
        let status = self.node_status(name).ok()?;
        let finding = restarted::node_down(&status)?;
        Some(Diagnosis {
            findings: vec![finding],
            verdict: Verdict::Findings,
            figures_line: "none: the node is not running".into(),
            figures: serde_json::Value::Null,
            assessment: Assessment::default(),
            warnings: status.warnings,
            cluster_facts: serde_json::Value::Null,
            window_ms: 0,
            duration_ms: 0,
            elixir: format == Lang::Elixir,
            work_now: Vec::new(),
        })
    }

    /// Diagnoses node `name`, sampling it for `window` (held to
    /// [`crate::bounds::DIAGNOSE_WINDOW_MS`]), terms written in `format`, explaining `focus`
    /// first when asked.
    pub async fn diagnose(
        &self,
        name: &str,
        window: Duration,
        format: Lang,
        focus: Option<Focus<'_>>,
    ) -> Result<Diagnosis, NodeError> {
        let window_ms = crate::bounds::DIAGNOSE_WINDOW_MS.clamp(window.as_millis() as u64);
        // The history this server kept of the node, assessed once: what grows there is
        // looked for (its holders) inside the node during the window.
        let history = self.vitals(name);
        let kept = history
            .as_ref()
            .map(|v| v.recent(history::STEPS_WINDOW))
            .unwrap_or_default();
        let mut assessment = history::assess(&kept, super::proc_fs::memory_available());
        if let Some(kept) = history.as_ref().map(|v| v.work()) {
            assessment.work = work::assess(&kept);
            assessment.work_node = work::assess_node(&kept);
        }
        let suspects = rank::suspects(&assessment);
        let call = ToolCall::new("diagnose")
            .int("window_ms", Some(window_ms))
            .choices("suspects", &suspects)
            .text("focus", focus.map(|f| f.text))
            .flag("focus_anywhere", focus.is_some_and(|f| f.anywhere))
            .format(format)
            .with_window(Duration::from_millis(window_ms) + EXPLAIN_SLACK);
        // A node still starting is a node to diagnose: asked as soon as its helper answers.
        let reply = self.look_typed::<NodeReport>(name, &call).await?;
        let report = reply.data;
        if let (Some(start), Some(end)) = (
            Sample::from_node(&report.window_start),
            Sample::from_node(&report.window_end),
        ) {
            // The window's two samples are the newest: a rise they saw end is a past step.
            window::ended_in_window(&mut assessment, &start, &end);
        }
        let work_now = work::over_window(&report.window_start, &report.window_end);
        let (span, count) = history.map(|v| v.span()).unwrap_or_default();
        let status = self.node_status(name).ok();
        let restarted = status
            .as_ref()
            .and_then(|s| restarted::node_restarted(s, span));
        let findings = rank::ranked(
            report.findings.into_iter().chain(restarted).collect(),
            &assessment,
            &report.holders,
            self.local_os_pid(name),
        );
        let unchecked = verdict::unchecked(&report.figures, &assessment);
        let verdict = if !findings.is_empty() {
            Verdict::Findings
        } else if !unchecked.is_empty() {
            Verdict::Unchecked(unchecked)
        } else {
            let uptime = status.as_ref().and_then(|s| s.uptime_ms);
            Verdict::Healthy(verdict::healthy_line(
                span,
                count,
                uptime,
                &assessment.steps,
            ))
        };
        Ok(Diagnosis {
            findings,
            verdict,
            figures_line: reply.text,
            figures: report.figures,
            assessment,
            warnings: status.map(|s| s.warnings).unwrap_or_default(),
            cluster_facts: report.cluster_facts,
            window_ms: report.window_ms,
            duration_ms: report.duration_ms,
            elixir: report.format == "elixir",
            work_now,
        })
    }
}
