//! What `diagnose` reports, ranked once by time to harm.
//!
//! It holds the typed [`Finding`] (the node's, and those only this server
//! sees: the history's growth toward a limit, the node's restarts by this server), ranked once
//! by time to harm, and written out as the report's text and data.
//!
//! The node sends each next call as data (`{"tool", "args": [[key, value]…]}`) and its figures
//! line as the text; the next calls are written here with the node's name as the agent calls
//! it (`process_info {"name":"web","pid":"<0.1.0>"}`), so the name is never sent down.

mod cause;
mod concern;

use crate::node::growth::{self, Assessment, Trend};
use crate::node::vitals::Meter;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Findings written out in full; the others are counted (all are in the data).
const SHOWN: usize = 5;
/// The text's budget in bytes (lines past it are counted, not cut).
const TEXT_BYTES: usize = 2000;

/// What a finding is about: the node's kinds, and the two only this server sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Deadlock,
    Leak,
    Restarts,
    Lost,
    Ets,
    Mailbox,
    Contention,
    Cpu,
    RunQueue,
    Errors,
    /// This server restarted the node inside the history read.
    NodeRestart,
    /// A meter of the history grows or nears its limit.
    Growth,
}

/// The call to make next: a tool and its arguments (without the node's name).
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Next {
    tool: String,
    #[serde(default)]
    args: Vec<(String, Value)>,
}

fn next(tool: &str, args: &[(&str, &Value)]) -> Next {
    Next {
        tool: tool.into(),
        args: args
            .iter()
            .map(|(k, v)| (k.to_string(), (*v).clone()))
            .collect(),
    }
}

/// One finding, the node's or the history's: what it is, how soon it does harm (its rank),
/// the line of evidence, the holder and its code, and the next call.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Finding {
    kind: Kind,
    /// Seconds until it does harm (0: it does now).
    seconds_to_harm: f64,
    line: String,
    /// The holding process, and where its code is.
    #[serde(default)]
    pid: Option<String>,
    #[serde(default)]
    module: Option<String>,
    #[serde(default)]
    function: Option<String>,
    next: Next,
    /// What else it carries as data (a growth's meter, rate and limit).
    #[serde(flatten)]
    facts: Map<String, Value>,
}

impl Finding {
    /// As the answer's data has it: the next call written out with the node's `name`.
    pub(crate) fn to_data(&self, name: &str) -> Value {
        let mut data = self.facts.clone();
        data.insert("kind".into(), json!(self.kind));
        data.insert("seconds_to_harm".into(), json!(self.seconds_to_harm));
        data.insert("line".into(), json!(self.line));
        data.insert("pid".into(), json!(self.pid));
        data.insert("module".into(), json!(self.module));
        data.insert("function".into(), json!(self.function));
        data.insert("next".into(), json!(next_call(name, &self.next)));
        Value::Object(data)
    }
}

/// The node restarted by this server inside the history `diagnose` reads: when and why.
pub(crate) fn node_restarted(status: &crate::node::NodeStatus, span: Duration) -> Option<Finding> {
    let uptime = Duration::from_millis(status.uptime_ms?);
    if status.restarts == 0 || uptime > span.max(growth::STEPS_WINDOW) {
        return None;
    }
    let short = |t: &str| t.chars().take(240).collect::<String>();
    let why = short(status.last_exit.as_deref().unwrap_or("unknown"));
    let error = status
        .last_error
        .as_deref()
        .map(|e| format!("; its last error: {}", short(e)))
        .unwrap_or_default();
    let line = format!(
        "node restarted: os_sup_mcp restarted it {}× since it was started, the latest {} ago: \
         {why}{error}",
        status.restarts,
        growth::duration_text(uptime.as_secs_f64()).trim_start_matches('~')
    );
    Some(Finding {
        kind: Kind::NodeRestart,
        // A crash of the whole node: ranked with a crash lost for good.
        seconds_to_harm: 1e7,
        line,
        pid: None,
        module: None,
        function: None,
        // The log of an automatic restart keeps the run before it, its crash included.
        next: next(
            "logs",
            &[("min_level", &json!("error")), ("tail", &json!(10))],
        ),
        facts: Map::new(),
    })
}

/// What a healthy answer says it checked, over how much history, and which runs it covers
/// (history kept across a restart spans the run before it too).
pub(crate) fn healthy_line(
    span: Duration,
    samples: usize,
    uptime_ms: Option<u64>,
    steps: &[Trend],
) -> String {
    const WHAT: &str = "checked memory by type, processes, ports, atoms, ETS tables, run queue, \
                        OS memory, file descriptors and threads";
    if span < growth::TREND_MIN_SPAN {
        format!(
            "healthy so far: {WHAT} against their limits; only {} s of history yet, too little \
             for rates (ask again in a minute)",
            span.as_secs()
        )
    } else {
        let runs = match uptime_ms.map(Duration::from_millis) {
            Some(up) if up + Duration::from_secs(5) < span => format!(
                "; it spans the run before this one too (this one up {})",
                growth::duration_text(up.as_secs_f64()).trim_start_matches('~')
            ),
            _ => String::new(),
        };
        // A rise that ended is no finding, but the agent may be looking for what caused it.
        let past: String = past_steps(steps)
            .map(|(label, step)| format!("; {label} {step}"))
            .collect();
        format!(
            "healthy: {WHAT}, growth and limits over {} of history ({samples} samples){runs}{past}",
            growth::duration_text(span.as_secs_f64()).trim_start_matches('~')
        )
    }
}

/// Each meter's rise that ended, as `(its label, "rose by … ago; flat since")`.
pub(crate) fn past_steps(steps: &[Trend]) -> impl Iterator<Item = (&'static str, String)> + '_ {
    steps
        .iter()
        .filter_map(|t| Some((t.meter.label(), concern::past_step(t)?)))
}

/// The node's findings and the history's concerns (growth with its rate and time to the
/// limit, counts near their limit, each with the holder the node found), ranked once, soonest
/// harm first. A concern the node already explains (its leak, its growing table) is left out.
pub(crate) fn ranked(
    mut findings: Vec<Finding>,
    assessment: &Assessment,
    holders: &Value,
    os_pid: Option<u32>,
) -> Vec<Finding> {
    let has = |kind: Kind| findings.iter().any(|f| f.kind == kind);
    let (node_leak, node_ets) = (has(Kind::Leak), has(Kind::Ets));
    // The process memory the leaks add: growth of it they explain is theirs.
    let leaked_bytes: f64 = findings
        .iter()
        .filter(|f| f.kind == Kind::Leak)
        .filter_map(|f| f.facts.get("memory_per_s").and_then(Value::as_f64))
        .sum();
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
                    growth::duration_text(fds_left)
                ));
                finding.seconds_to_harm = finding.seconds_to_harm.min(fds_left);
            }
        }
        findings.push(finding);
    }
    // A leak of processes harms when the process table is full.
    if let Some(left) = growing(Meter::Processes).and_then(|t| t.to_limit) {
        for leak in findings.iter_mut().filter(|f| f.kind == Kind::Leak) {
            leak.line.push_str(&format!(
                "; processes full in {}",
                growth::duration_text(left)
            ));
            leak.seconds_to_harm = left;
        }
    }
    cause::fold_into_mailboxes(&mut findings);
    findings.sort_by(|a, b| a.seconds_to_harm.total_cmp(&b.seconds_to_harm));
    findings
}

/// The report's text: the findings, most urgent first, each with its next call, above the
/// node's `figures` line.
pub(crate) fn report(name: &str, findings: &[Finding], figures: String) -> String {
    if findings.is_empty() {
        return figures;
    }
    let count = findings.len();
    let mut lines = vec![format!(
        "{count} finding{}, most urgent first:",
        if count == 1 { "" } else { "s" }
    )];
    for (i, finding) in findings.iter().take(SHOWN).enumerate() {
        lines.push(format!("{}. {}", i + 1, finding.line));
        lines.push(format!("   next: {}", next_call(name, &finding.next)));
    }
    if count > SHOWN {
        lines.push(format!("({} more findings in data)", count - SHOWN));
    }
    lines.push(figures);
    within(lines, TEXT_BYTES)
}

/// `process_info {"name":"web","pid":"<0.1.0>"}`, the node's `name` first.
fn next_call(name: &str, next: &Next) -> String {
    let mut pairs = vec![format!("\"name\":{}", Value::from(name))];
    for (key, value) in &next.args {
        pairs.push(format!("{}:{value}", Value::from(key.as_str())));
    }
    format!("{} {{{}}}", next.tool, pairs.join(","))
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
    use crate::node::growth::Trend;
    use serde_json::json;

    #[test]
    fn findings_are_ranked_once_and_written_with_their_next_call() {
        let node: Vec<Finding> = serde_json::from_value(json!([
            {"kind": "errors", "seconds_to_harm": 2e9, "line": "errors: 2", "pid": null,
             "next": {"tool": "logs", "args": [["min_level", "error"], ["tail", 10]]}},
            {"kind": "mailbox", "seconds_to_harm": 1e8, "line": "mailbox: x",
             "pid": "<0.1.0>", "next": {"tool": "waits", "args": [["pid", "<0.1.0>"]]}}
        ]))
        .unwrap();
        let history = Assessment {
            concerns: vec![Trend {
                meter: Meter::Atoms,
                rate: 5.0,
                current: 1000,
                limit: Some(2000),
                to_limit: Some(200.0),
                growing: true,
                step: None,
            }],
            steps: vec![],
            history: Duration::from_secs(60),
            samples: 60,
            unanswered: 0,
        };
        let findings = ranked(node, &history, &json!({}), None);
        let kinds: Vec<Kind> = findings.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [Kind::Growth, Kind::Mailbox, Kind::Errors]);
        let text = report("we\"b", &findings[1..], "figures: 1 process".into());
        assert_eq!(
            text,
            "2 findings, most urgent first:\n1. mailbox: x\n   next: waits \
             {\"name\":\"we\\\"b\",\"pid\":\"<0.1.0>\"}\n2. errors: 2\n   next: logs \
             {\"name\":\"we\\\"b\",\"min_level\":\"error\",\"tail\":10}\nfigures: 1 process"
        );
        let data = findings[2].to_data("web");
        assert_eq!(
            data["next"],
            "logs {\"name\":\"web\",\"min_level\":\"error\",\"tail\":10}"
        );
        assert_eq!(data["kind"], "errors");
        assert_eq!(findings[0].to_data("web")["seconds_to_limit"], 200.0);
        assert_eq!(report("web", &[], "healthy: ok".into()), "healthy: ok");
    }

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

    #[test]
    fn what_the_node_explains_is_not_repeated_and_a_leak_harms_when_processes_run_out() {
        let node: Vec<Finding> = serde_json::from_value(json!([
            {"kind": "errors", "seconds_to_harm": 2e9, "line": "errors: 2",
             "next": {"tool": "logs"}},
            {"kind": "leak", "seconds_to_harm": 1e8, "line": "leak: 300 workers",
             "memory_per_s": 1000.0, "next": {"tool": "processes"}}
        ]))
        .unwrap();
        let history = Assessment {
            concerns: vec![
                Trend {
                    limit: Some(262_144),
                    ..growth(Meter::Processes, Some(3600.0))
                },
                // The total grows by the binaries: one finding, the binaries'.
                growth(Meter::MemoryTotal, Some(100.0)),
                growth(Meter::MemoryBinary, None),
            ],
            steps: vec![],
            history: Duration::from_secs(600),
            samples: 300,
            unanswered: 0,
        };
        let findings = ranked(node, &history, &json!({}), None);
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
        assert_eq!(findings[1].facts["meter"], "memory_binary");
    }

    #[test]
    fn processes_that_grow_over_minutes_end_at_the_group_that_grew_in_the_window() {
        let history = Assessment {
            concerns: vec![Trend {
                limit: Some(262_144),
                ..growth(Meter::Processes, Some(7000.0))
            }],
            steps: vec![],
            history: Duration::from_secs(120),
            samples: 60,
            unanswered: 0,
        };
        let holders = json!({"process_groups": [{
            "pid": "<0.9.0>", "change": 9, "count": 300, "label": "Tasks",
            "group": "Sessions.TaskSup spawn → Sessions.Session.wait/1 lib/sessions/session.ex:7"
        }]});
        let findings = ranked(vec![], &history, &holders, None);
        assert!(
            findings[0].line.contains(
                "; the group that grew in the window: +9 to 300, Sessions.TaskSup spawn → \
                 Sessions.Session.wait/1 lib/sessions/session.ex:7"
            ),
            "{}",
            findings[0].line
        );
        assert_eq!(
            findings[0].to_data("web")["next"],
            "process_info {\"name\":\"web\",\"pid\":\"<0.9.0>\"}"
        );
        // No group grew in this window: a longer one is the next call.
        let none = ranked(vec![], &history, &json!({"process_groups": []}), None);
        assert_eq!(
            none[0].to_data("web")["next"],
            "processes {\"name\":\"web\",\"group_by\":\"initial_call\",\"window_ms\":10000}"
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
            step: Some(growth::Step {
                by: 50_000.0,
                took: 2.0,
                ago: 36.0,
            }),
        };
        assert!(healthy_line(Duration::from_secs(90), 45, None, &[step])
            .ends_with("(45 samples); processes rose by 50000 in 2 s, 36 s ago; flat since"));
    }

    #[test]
    fn the_text_stops_at_its_budget_and_counts_what_it_left_out() {
        let lines: Vec<String> = ["one", "two", "three"].map(String::from).to_vec();
        assert_eq!(within(lines.clone(), 100), "one\ntwo\nthree");
        assert_eq!(within(lines, 8), "one\ntwo\n...(truncated: 1 more lines)");
    }
}
