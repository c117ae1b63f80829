//! Cause over consequence between the node's findings and the history's: the memory a long
//! mailbox holds grows with it, so a growth whose holder is a mailbox's holder is that
//! mailbox's; processes that pile up waiting on a contended process are that contention's.
//! Findings made by the same function are one cause (a file opened and never closed leaves
//! a descriptor and an I/O server process). Each is folded into its cause's line and
//! time to harm (one finding per cause, the cause first).

use super::finding::{Arg, Finding, Kind, Next};
use super::text;

/// Folds each growth held by the process of a mailbox finding into that finding: the mailbox
/// takes the growth's time to harm when it is sooner, and says how fast the memory grows.
pub(super) fn fold_into_mailboxes(findings: &mut Vec<Finding>) {
    let mailboxes: Vec<_> = findings
        .iter()
        .filter(|f| f.kind == Kind::Mailbox)
        .filter_map(|f| f.pid.clone())
        .collect();
    let (held, mut rest): (Vec<Finding>, Vec<Finding>) =
        std::mem::take(findings).into_iter().partition(|f| {
            f.kind == Kind::Growth && f.pid.as_ref().is_some_and(|p| mailboxes.contains(p))
        });
    for growth in held {
        if let Some(mailbox) = rest
            .iter_mut()
            .find(|f| f.kind == Kind::Mailbox && f.pid == growth.pid)
        {
            if let Some(trend) = &growth.trend {
                let when = trend
                    .to_limit
                    .map(|s| format!(", the limit in {}", text::duration_text(s)))
                    .unwrap_or_default();
                mailbox.line.push_str(&format!(
                    "; the node's memory grows with it: +{}/s{when}",
                    kilobytes(trend.rate)
                ));
            }
            mailbox.seconds_to_harm = mailbox.seconds_to_harm.min(growth.seconds_to_harm);
        }
    }
    *findings = rest;
}

/// Folds each growth of processes that wait on the process of a contention finding into that
/// finding: they pile up because of it, so it takes their time to harm and says how fast.
pub(super) fn fold_into_contention(findings: &mut Vec<Finding>) {
    let contended: Vec<_> = findings
        .iter()
        .filter(|f| f.kind == Kind::Contention)
        .filter_map(|f| f.pid.clone())
        .collect();
    let (held, mut rest): (Vec<Finding>, Vec<Finding>) =
        std::mem::take(findings).into_iter().partition(|f| {
            f.kind == Kind::Growth
                && f.holder_waits_on
                    .as_ref()
                    .is_some_and(|p| contended.contains(p))
        });
    for growth in held {
        if let Some(cause) = rest
            .iter_mut()
            .find(|f| f.kind == Kind::Contention && f.pid == growth.holder_waits_on)
        {
            if let Some(trend) = &growth.trend {
                let when = trend
                    .to_limit
                    .map(|s| format!(", full in {}", text::duration_text(s)))
                    .unwrap_or_default();
                // The node already said how they pile up: only the time to the limit is news.
                if cause.line.contains("; they pile up: ") {
                    cause
                        .line
                        .push_str(&format!("; {}{when}", trend.meter.label()));
                } else {
                    cause.line.push_str(&format!(
                        "; the processes waiting pile up: {} +{:.1}/s{when}",
                        trend.meter.label(),
                        trend.rate
                    ));
                }
            }
            cause.seconds_to_harm = cause.seconds_to_harm.min(growth.seconds_to_harm);
        }
    }
    *findings = rest;
}

/// Folds each finding whose next call reads the same function as a more urgent one's (the
/// code that makes both; a module's code may hold several causes) into it: `findings` are
/// ranked, the first keeps its line and gains the others' heads (their line to its first `; `).
pub(super) fn fold_same_code(findings: &mut Vec<Finding>) {
    let mut kept: Vec<Finding> = Vec::with_capacity(findings.len());
    for finding in std::mem::take(findings) {
        let first = reads_a_function(&finding.next)
            .then(|| kept.iter_mut().find(|k| k.next == finding.next))
            .flatten();
        match first {
            Some(first) => {
                let head = finding.line.split("; ").next().unwrap_or_default();
                first
                    .line
                    .push_str(&format!("; the same code also: {head}"));
                first.seconds_to_harm = first.seconds_to_harm.min(finding.seconds_to_harm);
            }
            None => kept.push(finding),
        }
    }
    *findings = kept;
}

/// `source` of a function (`Shop.Audit.log/1`), not of a whole module.
fn reads_a_function(next: &Next) -> bool {
    next.tool == "source"
        && next
            .args
            .iter()
            .any(|(key, arg)| key == "target" && matches!(arg, Arg::Text(t) if t.contains('/')))
}

fn kilobytes(v: f64) -> String {
    if v >= 1024.0 * 1024.0 {
        format!("{:.1} MB", v / (1024.0 * 1024.0))
    } else {
        format!("{:.0} KB", v / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::diagnose::finding::Next;
    use crate::node::diagnose::history::Trend;
    use crate::node::vitals::Meter;
    use crate::term::Pid;

    fn finding(kind: Kind, id: u32, harm: f64) -> Finding {
        let mut f = Finding::new(kind, format!("{kind:?}"), Next::new("process_info", vec![]));
        f.pid = Some(Pid {
            node: "web@host".into(),
            id,
            serial: 0,
        });
        f.seconds_to_harm = harm;
        if kind == Kind::Growth {
            f.trend = Some(Trend {
                meter: Meter::MemoryProcesses,
                rate: 81920.0,
                current: 1 << 20,
                limit: None,
                to_limit: Some(259_200.0),
                growing: true,
                step: None,
            });
        }
        f
    }

    #[test]
    fn a_growth_held_by_a_mailbox_is_the_mailbox() {
        let mut findings = vec![
            finding(Kind::Mailbox, 1, 1e8),
            finding(Kind::Growth, 1, 259_200.0),
            finding(Kind::Growth, 2, 1e5),
        ];
        fold_into_mailboxes(&mut findings);
        assert_eq!(findings.len(), 2);
        assert_eq!(findings[0].seconds_to_harm, 259_200.0);
        assert_eq!(
            findings[0].line,
            "Mailbox; the node's memory grows with it: +80 KB/s, the limit in ~3 days"
        );
        assert_eq!(findings[1].pid.as_ref().map(|p| p.id), Some(2));
    }
}

#[cfg(test)]
mod contention_tests {
    use super::*;
    use crate::node::diagnose::finding::Next;
    use crate::node::diagnose::history::Trend;
    use crate::node::vitals::Meter;
    use crate::term::Pid;

    fn pid(id: u32) -> Pid {
        Pid {
            node: "web@host".into(),
            id,
            serial: 0,
        }
    }

    #[test]
    fn processes_piling_up_on_a_contended_process_are_its_finding() {
        let mut contention = Finding::new(
            Kind::Contention,
            "contention: 123 processes waiting".into(),
            Next::new("source", vec![]),
        );
        contention.pid = Some(pid(9));
        let mut growth = Finding::new(
            Kind::Growth,
            "processes +5/s".into(),
            Next::new("x", vec![]),
        );
        growth.seconds_to_harm = 52_560.0;
        growth.holder_waits_on = Some(pid(9));
        growth.trend = Some(Trend {
            meter: Meter::Processes,
            rate: 5.0,
            current: 191,
            limit: Some(262_144),
            to_limit: Some(52_560.0),
            growing: true,
            step: None,
        });
        let mut findings = vec![growth, contention];
        fold_into_contention(&mut findings);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].kind, Kind::Contention);
        assert_eq!(findings[0].seconds_to_harm, 52_560.0);
        assert!(
            findings[0]
                .line
                .ends_with("; the processes waiting pile up: processes +5.0/s, full in ~14.6 h"),
            "{}",
            findings[0].line
        );
    }
}

#[cfg(test)]
mod same_code_tests {
    use super::*;

    fn next_is(line: &str, tool: &str, target: &str, harm: f64) -> Finding {
        let next = Next::new(tool, vec![("target", Arg::Text(target.into()))]);
        let mut f = Finding::new(Kind::Growth, line.into(), next);
        f.seconds_to_harm = harm;
        f
    }

    #[test]
    fn findings_whose_next_call_reads_one_function_are_one() {
        let mut findings = vec![
            next_is(
                "fds +8.9/s; made by Shop.Audit.log/1",
                "source",
                "Shop.Audit.log/1",
                2e3,
            ),
            next_is(
                "leak: +9/s io servers; started by",
                "source",
                "Shop.Audit.log/1",
                3e4,
            ),
            next_is(
                "atoms +2/s; made by Shop.Ids.new/0",
                "source",
                "Shop.Ids.new/0",
                9e4,
            ),
            next_is("mailbox of a", "process_info", "x", 1e5),
            next_is("mailbox of b", "process_info", "x", 1.1e5),
            next_is("code: Shop.Ids differs", "source", "Shop.Ids", 1.2e5),
            next_is("growth; its state", "source", "Shop.Ids", 1.3e5),
        ];
        fold_same_code(&mut findings);
        let lines: Vec<&str> = findings.iter().map(|f| f.line.as_str()).collect();
        assert_eq!(
            lines,
            [
                "fds +8.9/s; made by Shop.Audit.log/1; the same code also: leak: +9/s io servers",
                "atoms +2/s; made by Shop.Ids.new/0",
                "mailbox of a",
                "mailbox of b",
                "code: Shop.Ids differs",
                "growth; its state",
            ]
        );
        assert_eq!(findings[0].seconds_to_harm, 2e3);
    }
}
