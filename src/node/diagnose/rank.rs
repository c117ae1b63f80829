//! The findings of a diagnosis, made once: the node's with its kind's urgency, the
//! history's concerns and rising work as findings, then one per cause and ranked by time to
//! harm (`cause`); and the holders to look for inside the node (`suspects`).

use super::concern;
use super::finding::Finding;
use super::history::Assessment;
use super::holders::Holders;
use crate::node::vitals::Meter;

/// The holders to look for inside the node: those of the meters growing in the history.
pub(super) fn suspects(history: &Assessment) -> Vec<&'static str> {
    let mut suspects: Vec<&'static str> = history
        .concerns
        .iter()
        .filter(|t| t.growing)
        .flat_map(|t| t.meter.suspects().iter().copied())
        .collect();
    // Work that rises: are intervals nobody cancels aimed at it? And the processes busiest in
    // the window, with what the first receives (the node's own work: who does it).
    if !history.work.is_empty() || history.work_node.is_some() {
        suspects.push("timers");
    }
    if !history.work.is_empty() || history.work_node.is_some() {
        suspects.push("work");
    }
    suspects.sort_unstable();
    suspects.dedup();
    suspects
}

/// The node's findings and the history's concerns (growth with its rate and time to the
/// limit, counts near their limit, each with the holder the node found), ranked once, soonest
/// harm first. A concern the node already explains (its leak, its growing table) is left out.
pub(super) fn ranked(
    mut findings: Vec<Finding>,
    assessment: &Assessment,
    holders: &Holders,
    os_pid: Option<u32>,
) -> Vec<Finding> {
    for finding in &mut findings {
        finding.seconds_to_harm = finding.kind.urgency();
    }
    // A memory type's share of all memory is said beside it.
    let total = assessment
        .concerns
        .iter()
        .find(|t| t.meter == Meter::MemoryTotal);
    findings.extend(assessment.concerns.iter().map(|trend| {
        concern::as_finding(trend, holders, total, assessment.processes_rise, os_pid)
    }));
    // Work that keeps rising: the two that rose most, else the node's own.
    findings.extend(
        assessment
            .work
            .iter()
            .take(2)
            .chain(
                assessment
                    .work
                    .is_empty()
                    .then_some(())
                    .and(assessment.work_node.as_ref()),
            )
            .map(|r| super::work::finding(r, holders)),
    );
    super::cause::one_per_cause(findings, &assessment.work)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::node::diagnose::finding::{Kind, Next};
    use crate::node::diagnose::history::Trend;
    use std::time::Duration;

    fn growth(meter: Meter, to_limit: Option<f64>) -> Trend {
        Trend {
            meter,
            rate: 5.0,
            current: 1000,
            limit: None,
            to_limit,
            growing: true,
            step: None,
        }
    }

    /// An assessment of 10 min of history with these concerns.
    pub(in crate::node::diagnose) fn history(concerns: Vec<Trend>) -> Assessment {
        Assessment {
            concerns,
            steps: vec![],
            history: Duration::from_secs(600),
            samples: 300,
            unanswered: 0,
            work: vec![],
            work_node: None,
            processes_rise: None,
        }
    }

    fn node_finding(kind: Kind, line: &str) -> Finding {
        let mut f = Finding::new(kind, line.into(), String::new(), Next::new("logs", vec![]));
        // As decoded from the node: no rank yet.
        f.seconds_to_harm = 0.0;
        f
    }

    #[test]
    fn findings_are_ranked_once_by_time_to_harm() {
        let atoms = Trend {
            limit: Some(2000),
            ..growth(Meter::Atoms, Some(200.0))
        };
        let findings = ranked(
            vec![
                node_finding(Kind::Errors, "errors: 2"),
                node_finding(Kind::Mailbox, "mailbox: x"),
            ],
            &history(vec![atoms]),
            &Holders::default(),
            None,
        );
        let kinds: Vec<Kind> = findings.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [Kind::Growth, Kind::Mailbox, Kind::Errors]);
        assert_eq!(findings[0].seconds_to_harm, 200.0);
    }
}
