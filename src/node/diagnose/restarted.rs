//! The findings only this server can make of a node: it restarted the node inside the
//! history `diagnose` reads (when, why, and the run's last error), or the node is down for
//! good (its restarts ran out, or it crashed with none to come): its post-mortem.

use super::finding::{Arg, Finding, Kind, Next};
use super::history;
use super::text;
use crate::node::node_status::NodeState;
use crate::node::NodeStatus;
use std::time::Duration;

/// The node down for good: failed (its restarts ran out) or stopped by a crash with no
/// restart to come. What the server kept of its end: its last exit and error, and the logs
/// that say why.
pub(super) fn node_down(status: &NodeStatus) -> Option<Finding> {
    let crashed = status.state == NodeState::Stopped && status.exit_error.is_some();
    if status.state != NodeState::Failed && !crashed {
        return None;
    }
    let (why, error) = run_end(status);
    let head = match status.state {
        NodeState::Failed => format!(
            "node down: its restarts ran out ({} since it was started); its last exit: {why}",
            status.restarts
        ),
        _ => format!("node down: it crashed and is not restarted; its last exit: {why}"),
    };
    let detail = format!(
        "{error}; its logs are kept; `start` again runs it again (with restart_on_app_exit \
         false its VM stays up for `diagnose` after its application exits)"
    );
    let mut finding = Finding::new(Kind::NodeDown, head, detail, logs_of_the_end(status));
    finding
        .facts
        .insert("restarts".to_string(), status.restarts as f64);
    Some(finding)
}

/// How the last run ended: its exit, and `; its last error: …` (the error of the run that
/// ended, never one a new run logged since), each cut to room for an error's lead and what
/// followed it (`logs::ExitError`).
fn run_end(status: &NodeStatus) -> (String, String) {
    let short = |t: &str| t.chars().take(320).collect::<String>();
    let why = short(status.last_exit.as_deref().unwrap_or("unknown"));
    let error = status
        .exit_error
        .as_deref()
        .or(status.last_error.as_deref())
        .map(|e| format!("; its last error: {}", short(e)))
        .unwrap_or_default();
    (why, error)
}

/// The log lines of a run's end: the line of its error (what died first), else the last
/// errors.
fn logs_of_the_end(status: &NodeStatus) -> Next {
    let args = match status.last_error_seq {
        Some(seq) => vec![("since", Arg::Text(seq.to_string())), ("tail", Arg::Int(1))],
        None => vec![
            ("min_level", Arg::Text("error".into())),
            ("tail", Arg::Int(10)),
        ],
    };
    Next::new("logs", args)
}

/// The node restarted by this server inside the history `diagnose` reads: when and why.
pub(super) fn node_restarted(status: &NodeStatus, span: Duration) -> Option<Finding> {
    let uptime = Duration::from_millis(status.uptime_ms?);
    if status.restarts == 0 || uptime > span.max(history::STEPS_WINDOW) {
        return None;
    }
    let (why, error) = run_end(status);
    let head = format!(
        "node restarted: os_sup_mcp restarted it {}× since it was started, the latest {} ago: \
         {why}",
        status.restarts,
        text::duration_text(uptime.as_secs_f64()).trim_start_matches('~')
    );
    // The log of an automatic restart keeps the run before it, its crash included.
    let mut finding = Finding::new(Kind::NodeRestart, head, error, logs_of_the_end(status));
    finding.facts.extend([
        ("restarts".to_string(), status.restarts as f64),
        ("uptime_ms".to_string(), uptime.as_millis() as f64),
    ]);
    Some(finding)
}
