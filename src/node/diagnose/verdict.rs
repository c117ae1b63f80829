//! What a diagnosis may say when it found nothing: the checks that could not run (then it is
//! not healthy), and the healthy line (what was checked, over how much history, the rises
//! that ended since).

use super::concern;
use super::history::{self, Assessment, Trend};
use super::text;
use std::time::Duration;

/// Vitals samples in a row the node must miss before its history has a gap.
const UNANSWERED_GAP: usize = 3;

/// What kept a check from running, each said: a scan cut short judges no leak, a node that
/// stopped answering its samples has no history of its own. Any of them and the answer is
/// not `healthy`.
pub(super) fn unchecked(figures: &serde_json::Value, assessment: &Assessment) -> Vec<String> {
    let mut out = Vec::new();
    if figures["scan_truncated"] == true {
        out.push(
            "the walk of the processes was cut short at its deadline, so no leak was judged"
                .to_string(),
        );
    }
    // A check that failed on this node (a surprise of its, or a bug of ours) checked nothing.
    for failed in figures["checks_failed"].as_array().into_iter().flatten() {
        out.push(format!(
            "the {} check failed ({})",
            failed["check"].as_str().unwrap_or("?"),
            failed["why"].as_str().unwrap_or("?")
        ));
    }
    // Pauses are seen only by the system monitor, which has one owner a node.
    if let Some(why) = figures["stalls_watched"].as_str() {
        out.push(format!("pauses are not watched: {why}"));
    }
    // One sample missed is a slow moment (a node still booting, a busy second); several in a
    // row are a gap in the history its rates would be read across.
    if assessment.unanswered >= UNANSWERED_GAP {
        out.push(format!(
            "the node did not answer its last {} vitals samples (frozen or overloaded?), so \
             its latest rates are unknown",
            assessment.unanswered
        ));
    }
    out
}

/// What a healthy answer says it checked, over how much history, and which runs it covers
/// (history kept across a restart spans the run before it too).
pub(super) fn healthy_line(
    span: Duration,
    samples: usize,
    uptime_ms: Option<u64>,
    steps: &[Trend],
) -> String {
    const WHAT: &str = "checked memory by type, processes, ports, atoms, ETS tables and their \
                        rows, timers, \
                        the work of the node and of its registered processes, run queue, OS \
                        memory, file descriptors and threads, calls between processes, \
                        mailboxes, CPU, pauses (long collections and schedules, busy ports), \
                        restarts, errors, log volume and loaded code";
    if span < history::TREND_MIN_SPAN {
        format!(
            "healthy so far: {WHAT} against their limits; only {} s of history yet, too little \
             for rates (ask again in a minute)",
            span.as_secs()
        )
    } else {
        let runs = match uptime_ms.map(Duration::from_millis) {
            Some(up) if up + Duration::from_secs(5) < span => format!(
                "; it spans the run before this one too (this one up {})",
                text::duration_text(up.as_secs_f64()).trim_start_matches('~')
            ),
            _ => String::new(),
        };
        // A rise that ended is no finding, but the agent may be looking for what caused it;
        // one that began while the node booted is the boot.
        let after_boot: Vec<Trend> = steps
            .iter()
            .filter(|t| !at_boot(t, uptime_ms))
            .cloned()
            .collect();
        let past: String = past_steps(&after_boot)
            .map(|(label, step)| format!("; {label} {step}"))
            .collect();
        format!(
            "healthy: {WHAT}, growth and limits over {} of history ({samples} samples){runs}{past}",
            text::duration_text(span.as_secs_f64()).trim_start_matches('~')
        )
    }
}

/// Seconds after its start within which a node's rises are its boot (loading its modules,
/// making its first atoms, starting its processes).
const BOOT_SECS: f64 = 20.0;

/// Whether a past step began while this run of the node booted (or before it).
fn at_boot(t: &Trend, uptime_ms: Option<u64>) -> bool {
    match (t.step, uptime_ms) {
        (Some(step), Some(up)) => up as f64 / 1000.0 - step.ago - step.took < BOOT_SECS,
        _ => false,
    }
}

/// Each meter's rise that ended, as `(its label, "rose by … ago; flat since")`.
pub fn past_steps(steps: &[Trend]) -> impl Iterator<Item = (&'static str, String)> + '_ {
    steps
        .iter()
        .filter_map(|t| Some((t.meter.label(), concern::step_text(t)?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::diagnose::history::Step;
    use crate::node::diagnose::rank::tests::history;
    use crate::node::vitals::Meter;

    #[test]
    fn a_healthy_answer_says_how_much_history_it_read() {
        assert!(healthy_line(Duration::from_secs(10), 5, None, &[])
            .ends_with("only 10 s of history yet, too little for rates (ask again in a minute)"));
        assert!(
            healthy_line(Duration::from_secs(600), 300, Some(600_000), &[])
                .ends_with("growth and limits over 10 min of history (300 samples)")
        );
        assert!(
            healthy_line(Duration::from_secs(600), 300, Some(60_000), &[]).ends_with(
                "(300 samples); it spans the run before this one too (this one up 60 s)"
            )
        );
        // A rise that ended is said, with no rate and no time to a limit.
        let step = Trend {
            meter: Meter::Processes,
            rate: 0.0,
            current: 50_070,
            limit: Some(262_144),
            to_limit: None,
            growing: false,
            step: Some(Step {
                by: 50_000.0,
                took: 2.0,
                ago: 36.0,
            }),
        };
        assert!(healthy_line(
            Duration::from_secs(90),
            45,
            None,
            std::slice::from_ref(&step)
        )
        .ends_with("(45 samples); processes rose by 50000 in 2 s, 36 s ago; flat since"));
        // The same rise 10 s after the node started is its boot.
        let line = healthy_line(Duration::from_secs(90), 45, Some(48_000), &[step]);
        assert!(!line.contains("rose by"), "{line}");
    }

    #[test]
    fn a_check_that_could_not_run_is_said() {
        let cut = serde_json::json!({"scan_truncated": true});
        let why = unchecked(&cut, &history(vec![]));
        assert!(why[0].contains("no leak was judged"), "{why:?}");
        assert!(unchecked(&serde_json::json!({}), &history(vec![])).is_empty());
        let failed = serde_json::json!({
            "checks_failed": [{"check": "rows", "why": "error:badarg at []"}],
            "stalls_watched": "the system monitor is <0.90.0>'s"
        });
        assert_eq!(
            unchecked(&failed, &history(vec![])),
            [
                "the rows check failed (error:badarg at [])",
                "pauses are not watched: the system monitor is <0.90.0>'s"
            ]
        );
    }
}
