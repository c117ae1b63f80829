//! The one place that ranks `diagnose`'s findings and decides what a healthy answer may say:
//! the node's findings and the history's concerns ranked once by time to harm, a concern the
//! node already explains left out, the checks that could not run named.

use super::concern;
use super::finding::{Arg, Finding, Kind, Next};
use super::history::{self, Assessment, Trend};
use super::holders::Holders;
use super::text;
use crate::node::vitals::Meter;
use crate::node::vitals::{Sample, Unit};
use crate::node::NodeStatus;
use std::time::Duration;

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
    let line = format!(
        "node restarted: os_sup_mcp restarted it {}× since it was started, the latest {} ago: \
         {why}{error}",
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
    Some(Finding::new(
        Kind::NodeRestart,
        line,
        Next::new("logs", next),
    ))
}

/// A rate of the history is checked against the window when it would have added this much
/// in it.
const WINDOW_EXPECTS: f64 = 20.0;
/// ... and, for memory, this many bytes.
const WINDOW_EXPECTS_BYTES: f64 = 64.0 * 1024.0 * 1024.0;

/// Rises the history still calls growing that the window, a second or more of the node's
/// own samples, saw flat (less than a tenth of what the rate would have added): they ended
/// between the last sample and now, and are past steps, with no rate and no time to a limit.
/// A count that stays near its limit stays a concern, as a level.
pub(super) fn ended_in_window(assessment: &mut Assessment, start: &Sample, end: &Sample) {
    let secs = end.at_ms.saturating_sub(start.at_ms) as f64 / 1000.0;
    if secs < 0.5 {
        return;
    }
    for trend in assessment.concerns.iter_mut().filter(|t| t.growing) {
        let expected = trend.rate * secs;
        // The node does not read its OS memory: what the VM holds is what it follows.
        let meter = match trend.meter {
            Meter::Rss => Meter::MemoryTotal,
            meter => meter,
        };
        let (Some(a), Some(b)) = (start.get(meter), end.get(meter)) else {
            continue;
        };
        // Memory moves by what a collection frees and by the walks' own reads (hundreds of
        // MB on a node of a million processes): only a large rise is judged, against half.
        let (least, share) = match trend.meter.unit() {
            Unit::Bytes => (WINDOW_EXPECTS_BYTES, 2.0),
            Unit::Count => (WINDOW_EXPECTS, 10.0),
        };
        if expected >= least && (b as f64 - a as f64) < expected / share {
            trend.growing = false;
            trend.rate = 0.0;
            trend.to_limit = None;
            if meter == trend.meter {
                trend.current = b;
            }
            // The rise so far is the step it made; it ended a window ago at least.
            if let Some(step) = trend.step.as_mut() {
                step.ago += secs;
            }
        }
    }
    let (concerns, ended): (Vec<Trend>, Vec<Trend>) = std::mem::take(&mut assessment.concerns)
        .into_iter()
        .partition(|t| t.growing || history::near_limit(t));
    assessment.concerns = concerns;
    assessment
        .steps
        .extend(ended.into_iter().filter(|t| t.step.is_some()));
}

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
    const WHAT: &str = "checked memory by type, processes, ports, atoms, ETS tables, timers, \
                        the work of the node and of its registered processes, run queue, OS \
                        memory, file descriptors and threads, calls between processes, \
                        mailboxes, CPU, restarts, errors, log volume and loaded code";
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
        .filter_map(|t| Some((t.meter.label(), concern::past_step(t)?)))
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
    let has = |kind: Kind| findings.iter().any(|f| f.kind == kind);
    let (node_leak, node_ets) = (has(Kind::Leak), has(Kind::Ets));
    // The process memory the leaks add (or the contention they pile up behind): growth of it
    // they explain is theirs.
    let leaked_bytes: f64 = findings.iter().filter_map(|f| f.facts.memory_per_s).sum();
    let growing = |m: Meter| {
        assessment
            .concerns
            .iter()
            .find(|t| t.meter == m && t.growing)
    };
    let specific_memory = [
        Meter::MemoryBinary,
        Meter::MemoryProcesses,
        Meter::MemoryEts,
        Meter::MemoryAtom,
    ]
    .into_iter()
    .any(|m| growing(m).is_some());
    let vm_memory = specific_memory || growing(Meter::MemoryTotal).is_some();
    let total = assessment
        .concerns
        .iter()
        .find(|t| t.meter == Meter::MemoryTotal);
    // Ports are file descriptors too (sockets): one finding, timed by what runs out first.
    let fds_of_ports = growing(Meter::Ports).and(growing(Meter::Fds));
    for trend in &assessment.concerns {
        let redundant = match trend.meter {
            Meter::MemoryTotal => specific_memory,
            Meter::Rss => vm_memory,
            Meter::MemoryEts => node_ets,
            Meter::Processes => node_leak,
            Meter::MemoryProcesses => trend.rate <= leaked_bytes * 1.5,
            Meter::Fds => fds_of_ports.is_some(),
            _ => false,
        };
        if redundant {
            continue;
        }
        let mut finding = concern::as_finding(trend, holders, total, os_pid);
        if let (Meter::Ports, Some(fds)) = (trend.meter, fds_of_ports) {
            if let Some(fds_left) = fds.to_limit {
                finding.line.push_str(&format!(
                    "; file descriptors +{:.1}/s, {} of {}: full in {}",
                    fds.rate,
                    fds.current,
                    fds.limit.unwrap_or_default(),
                    text::duration_text(fds_left)
                ));
                finding.seconds_to_harm = finding.seconds_to_harm.min(fds_left);
            }
        }
        findings.push(finding);
    }
    // Work that keeps rising: the timers' finding when intervals grow (their cause), else one
    // of its own.
    let timers = findings
        .iter_mut()
        .find(|f| f.trend.as_ref().is_some_and(|t| t.meter == Meter::Timers));
    match timers {
        Some(finding) => super::work::of_timers(&assessment.work, &mut finding.line),
        None => findings.extend(
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
        ),
    }
    // A leak of processes harms when the process table is full.
    if let Some(left) = growing(Meter::Processes).and_then(|t| t.to_limit) {
        for leak in findings.iter_mut().filter(|f| f.kind == Kind::Leak) {
            leak.line.push_str(&format!(
                "; processes full in {}",
                text::duration_text(left)
            ));
            leak.seconds_to_harm = left;
        }
    }
    super::cause::fold_into_mailboxes(&mut findings);
    super::cause::fold_into_contention(&mut findings);
    findings.sort_by(|a, b| a.seconds_to_harm.total_cmp(&b.seconds_to_harm));
    super::cause::fold_same_code(&mut findings);
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::diagnose::history::Step;

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

    fn history(concerns: Vec<Trend>) -> Assessment {
        Assessment {
            concerns,
            steps: vec![],
            history: Duration::from_secs(600),
            samples: 300,
            unanswered: 0,
            work: vec![],
            work_node: None,
        }
    }

    fn node_finding(kind: Kind, line: &str) -> Finding {
        let mut f = Finding::new(kind, line.into(), Next::new("logs", vec![]));
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

    #[test]
    fn what_the_node_explains_is_not_repeated_and_a_leak_harms_when_processes_run_out() {
        let mut leak = node_finding(Kind::Leak, "leak: 300 workers");
        leak.facts.memory_per_s = Some(1000.0);
        let findings = ranked(
            vec![node_finding(Kind::Errors, "errors: 2"), leak],
            &history(vec![
                Trend {
                    limit: Some(262_144),
                    ..growth(Meter::Processes, Some(3600.0))
                },
                // The total grows by the binaries: one finding, the binaries'.
                growth(Meter::MemoryTotal, Some(100.0)),
                growth(Meter::MemoryBinary, None),
            ]),
            &Holders::default(),
            None,
        );
        let ranks: Vec<(Kind, f64)> = findings
            .iter()
            .map(|f| (f.kind, f.seconds_to_harm))
            .collect();
        // Growth with no limit in sight ranks after the node's leak, before its errors.
        assert_eq!(
            ranks,
            [
                (Kind::Leak, 3600.0),
                (Kind::Growth, 1e9),
                (Kind::Errors, 2e9)
            ]
        );
        assert_eq!(
            findings[0].line,
            "leak: 300 workers; processes full in ~60 min"
        );
        assert_eq!(
            findings[1].trend.as_ref().unwrap().meter,
            Meter::MemoryBinary
        );
    }

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
    }
}

#[cfg(test)]
mod window_tests {
    use super::*;
    use crate::node::diagnose::history::Step;

    #[test]
    fn a_rate_the_window_saw_flat_has_ended_and_gives_no_time_to_a_limit() {
        let rising = |current| Trend {
            meter: Meter::Processes,
            rate: 58_962.0,
            current,
            limit: Some(2_000_000),
            to_limit: Some(19.0),
            growing: true,
            step: None,
        };
        let sample = |at_ms, processes| {
            let mut s = Sample::new(at_ms);
            s.set(Meter::Processes, processes);
            s
        };
        let mut flat = Assessment {
            concerns: vec![rising(1_000_051)],
            steps: vec![],
            history: Duration::from_secs(60),
            samples: 30,
            unanswered: 0,
            work: vec![],
            work_node: None,
        };
        ended_in_window(&mut flat, &sample(0, 1_000_051), &sample(1000, 1_000_051));
        assert!(flat.concerns.is_empty(), "{:?}", flat.concerns);
        // The rise so far is told as the step it made, ended at least a window ago.
        let mut spawned = Assessment {
            concerns: vec![Trend {
                step: Some(Step {
                    by: 1_000_000.0,
                    took: 17.0,
                    ago: 0.5,
                }),
                ..rising(1_000_051)
            }],
            ..flat.clone()
        };
        ended_in_window(
            &mut spawned,
            &sample(0, 1_000_051),
            &sample(1000, 1_000_051),
        );
        assert!(spawned.concerns.is_empty());
        let step = spawned.steps[0].step.unwrap();
        assert_eq!((step.by, step.ago), (1_000_000.0, 1.5));
        assert_eq!(
            past_steps(&spawned.steps).next().unwrap().1,
            "rose by 1000000 in 17 s, 2 s ago; flat since"
        );
        // Still rising in the window: the rate stands.
        let mut still = Assessment {
            concerns: vec![rising(1_000_051)],
            ..flat.clone()
        };
        ended_in_window(&mut still, &sample(0, 1_000_051), &sample(1000, 1_050_000));
        assert_eq!(still.concerns[0].to_limit, Some(19.0));
        // Near its limit, a level that stopped is still said, with no time to the limit.
        let mut near = Assessment {
            concerns: vec![rising(1_900_000)],
            ..flat.clone()
        };
        ended_in_window(&mut near, &sample(0, 1_900_000), &sample(1000, 1_900_000));
        assert_eq!(near.concerns[0].to_limit, None);
        assert!(!near.concerns[0].growing);
        // OS memory that rose with the VM's (1 M processes spawned) ended when the VM's did.
        let mut rss = Assessment {
            concerns: vec![Trend {
                meter: Meter::Rss,
                rate: 196.8e6,
                current: 2_800_000_000,
                limit: None,
                to_limit: Some(104.0),
                growing: true,
                step: None,
            }],
            ..flat.clone()
        };
        let vm = |at_ms, bytes| {
            let mut s = Sample::new(at_ms);
            s.set(Meter::MemoryTotal, bytes);
            s
        };
        ended_in_window(&mut rss, &vm(0, 2_818_000_000), &vm(1000, 2_818_100_000));
        assert!(rss.concerns.is_empty(), "{:?}", rss.concerns);
    }
}
