//! The finding only this server can make of a node: it restarted the node inside the
//! history `diagnose` reads (when, why, and the run's last error).

use super::finding::{Arg, Finding, Kind, Next};
use super::history;
use super::text;
use crate::node::NodeStatus;
use std::time::Duration;

/// The node restarted by this server inside the history `diagnose` reads: when and why.
pub(super) fn node_restarted(status: &NodeStatus, span: Duration) -> Option<Finding> {
    let uptime = Duration::from_millis(status.uptime_ms?);
    if status.restarts == 0 || uptime > span.max(history::STEPS_WINDOW) {
        return None;
    }
    // (room for an error's lead and what followed it, `logs::ExitError`)
    let short = |t: &str| t.chars().take(320).collect::<String>();
    let why = short(status.last_exit.as_deref().unwrap_or("unknown"));
    // The error of the run that ended, never one the new run logged since.
    let error = status
        .exit_error
        .as_deref()
        .or(status.last_error.as_deref())
        .map(|e| format!("; its last error: {}", short(e)))
        .unwrap_or_default();
    let head = format!(
        "node restarted: os_sup_mcp restarted it {}× since it was started, the latest {} ago: \
         {why}",
        status.restarts,
        text::duration_text(uptime.as_secs_f64()).trim_start_matches('~')
    );
    // The log of an automatic restart keeps the run before it, its crash included: the line
    // of its error (what died first), else the last errors.
    let next = match status.last_error_seq {
        Some(seq) => vec![("since", Arg::Text(seq.to_string())), ("tail", Arg::Int(1))],
        None => vec![
            ("min_level", Arg::Text("error".into())),
            ("tail", Arg::Int(10)),
        ],
    };
    let mut finding = Finding::new(Kind::NodeRestart, head, error, Next::new("logs", next));
    finding.facts.extend([
        ("restarts".to_string(), status.restarts as f64),
        ("uptime_ms".to_string(), uptime.as_millis() as f64),
    ]);
    Some(finding)
}
