//! `diagnose`: what is wrong with a node, in one call. The node samples itself over a short
//! window (`os_sup_health`) and answers with its findings (deadlocks, growing process groups,
//! restarts, growing ETS tables, long mailboxes, crowds, CPU, run queue, errors), each typed
//! with how soon it does harm, its holder and code, one line of evidence and the next call.
//! This file adds what only the server sees (the history's growth toward a limit with its
//! holders, the node's restarts by this server), ranks all of them once by time to harm, and
//! writes the report: the findings with their next calls, or the healthy line.
//!
//! The node sends each next call as data (`{"tool", "args": [[key, value]…]}`) and its figures
//! line as the text; the next calls are written here with the node's name as the agent calls
//! it (`process_info {"name":"web","pid":"<0.1.0>"}`), so the name is never sent down.

use crate::bounds::{DIAGNOSE_WINDOW_DEFAULT_MS, DIAGNOSE_WINDOW_MS};
use crate::mcp::output::success;
use crate::mcp::McpServer;
use crate::node::vitals::{self, Assessment, Meter, Sample, Trend, Unit};
use crate::node::{Lang, ToolCall};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
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
struct Finding {
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
    fn to_data(&self, name: &str) -> Value {
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
            .map(|v| v.recent(vitals::STEPS_WINDOW))
            .unwrap_or_default();
        let room = vitals::memory_available();
        let suspects = suspects(&vitals::assess(&kept, room));
        let call = ToolCall::new("diagnose")
            .int("window_ms", Some(window))
            .choices("suspects", &suspects)
            .format(input.format)
            .with_window(Duration::from_millis(window));
        Ok(match self.registry.call_tool(&input.name, &call).await {
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
                let assessment = vitals::assess(&samples, room);
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
                    format!("{}; {}", healthy_line(span, count, uptime), reply.text)
                } else {
                    format!("figures: {}", reply.text)
                };
                let mut text = report(&input.name, &findings, figures);
                data["healthy"] = Value::Bool(findings.is_empty());
                data["findings"] = findings.iter().map(|f| f.to_data(&input.name)).collect();
                data["history"] = json!({"seconds": assessment.history.as_secs(),
                                         "samples": assessment.samples,
                                         "unanswered_last": assessment.unanswered});
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

/// The node restarted by this server inside the history `diagnose` reads: when and why.
fn node_restarted(status: &crate::node::NodeStatus, span: Duration) -> Option<Finding> {
    let uptime = Duration::from_millis(status.uptime_ms?);
    if status.restarts == 0 || uptime > span.max(vitals::STEPS_WINDOW) {
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
        vitals::duration_text(uptime.as_secs_f64()).trim_start_matches('~')
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
fn healthy_line(span: Duration, samples: usize, uptime_ms: Option<u64>) -> String {
    const WHAT: &str = "checked memory by type, processes, ports, atoms, ETS tables, run queue, \
                        OS memory, file descriptors and threads";
    if span < vitals::TREND_MIN_SPAN {
        format!(
            "healthy so far: {WHAT} against their limits; only {} s of history yet, too little \
             for rates (ask again in a minute)",
            span.as_secs()
        )
    } else {
        let runs = match uptime_ms.map(Duration::from_millis) {
            Some(up) if up + Duration::from_secs(5) < span => format!(
                "; it spans the run before this one too (this one up {})",
                vitals::duration_text(up.as_secs_f64()).trim_start_matches('~')
            ),
            _ => String::new(),
        };
        format!(
            "healthy: {WHAT}, growth and limits over {} of history ({samples} samples){runs}",
            vitals::duration_text(span.as_secs_f64()).trim_start_matches('~')
        )
    }
}

/// The node's findings and the history's concerns (growth with its rate and time to the
/// limit, counts near their limit, each with the holder the node found), ranked once, soonest
/// harm first. A concern the node already explains (its leak, its growing table) is left out.
fn ranked(
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
        let mut finding = concern(trend, holders, total, os_pid);
        if let (Meter::Ports, Some(fds)) = (trend.meter, fds_of_ports) {
            if let Some(fds_left) = fds.to_limit {
                finding.line.push_str(&format!(
                    "; file descriptors +{:.1}/s, {} of {}: full in {}",
                    fds.rate,
                    fds.current,
                    fds.limit.unwrap_or_default(),
                    vitals::duration_text(fds_left)
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
                vitals::duration_text(left)
            ));
            leak.seconds_to_harm = left;
        }
    }
    findings.sort_by(|a, b| a.seconds_to_harm.total_cmp(&b.seconds_to_harm));
    findings
}

/// A concern of the history as a finding: its line with the holder and the code that makes
/// what it holds, and the next call.
fn concern(t: &Trend, holders: &Value, total: Option<&Trend>, os_pid: Option<u32>) -> Finding {
    let (line, next) = concern_line(t, holders, total, os_pid);
    let holder = &holders[t.meter.suspects().first().copied().unwrap_or_default()][0];
    let mut facts = Map::new();
    facts.insert("meter".into(), json!(t.meter.key()));
    facts.insert("rate_per_s".into(), json!(t.rate));
    facts.insert("current".into(), json!(t.current));
    facts.insert("limit".into(), json!(t.limit));
    facts.insert("seconds_to_limit".into(), json!(t.to_limit));
    Finding {
        kind: Kind::Growth,
        // Growth with no limit in sight ranks after what has one.
        seconds_to_harm: t.to_limit.unwrap_or(1e9),
        line,
        pid: holder["pid"].as_str().map(String::from),
        module: None,
        function: holder["function"].as_str().map(String::from),
        next,
        facts,
    }
}

/// One concern's line and its next call (as data, like the node's).
fn concern_line(
    t: &Trend,
    holders: &Value,
    total: Option<&Trend>,
    os_pid: Option<u32>,
) -> (String, Next) {
    let amount = |v: f64| match t.meter.unit() {
        Unit::Bytes => bytes(v),
        Unit::Count => format!("{v:.0}"),
    };
    let mut line = if t.growing {
        let rate = match t.meter.unit() {
            Unit::Bytes => format!("+{}/s", bytes(t.rate)),
            Unit::Count => format!("+{:.1}/s", t.rate),
        };
        format!("{} {rate}, {}", t.meter.label(), amount(t.current as f64))
    } else {
        format!("{} at {}", t.meter.label(), amount(t.current as f64))
    };
    if let Some(limit) = t.limit {
        let share = t.current as f64 * 100.0 / limit.max(1) as f64;
        line.push_str(&format!(" of {limit} ({share:.0} %)"));
    } else if let Some(total) =
        total.filter(|_| t.meter.unit() == Unit::Bytes && t.meter != Meter::MemoryTotal)
    {
        let share = t.current as f64 * 100.0 / total.current.max(1) as f64;
        line.push_str(&format!(" ({share:.0} % of all memory)"));
    }
    match (t.to_limit, t.limit) {
        (Some(left), Some(_)) => {
            line.push_str(&format!(": full in {}", vitals::duration_text(left)))
        }
        (Some(left), None) => line.push_str(&format!(
            ": the host's available memory gone in {}",
            vitals::duration_text(left)
        )),
        _ => {}
    }
    if t.meter == Meter::EtsTables {
        line.push_str(
            " (the VM enforces no table limit since OTP 20: each table costs memory and a \
             lookup in the table registry)",
        );
    }
    let suspect = t.meter.suspects().first().copied().unwrap_or_default();
    let found = &holders[suspect];
    let first = &found[0];
    let pid_next = |pid: &Value| next("process_info", &[("pid", pid)]);
    let next = match suspect {
        "binary" if first.is_object() => {
            let referenced = first["refc_bytes"].as_f64().unwrap_or(0.0);
            let own = first["heap_bytes"].as_f64().unwrap_or(0.0);
            let held = match first["refc_count"].as_u64() {
                Some(n) if n > 0 => format!(
                    "{n} refc binaries of ~{} each, {} referenced",
                    bytes(referenced / n as f64),
                    bytes(referenced)
                ),
                _ => format!("{} of refc binaries referenced", bytes(referenced)),
            };
            let whose = match first["owner"].as_str() {
                // An ETS table: its owner and rows, and its own memory (ETS counts no binary).
                Some(owner) => format!(
                    " (owner {owner}, {} rows): {held}, table memory {}",
                    first["rows"],
                    bytes(own)
                ),
                None => format!("{}: {held}, own memory {}", in_function(first), bytes(own)),
            };
            line.push_str(&format!("; held most by {}{whose}", label(first)));
            // Far more referenced than the process could hold itself: it keeps small parts
            // (sub-binaries) that each pin a whole binary.
            if referenced > 10.0 * own.max(1.0) {
                line.push_str(
                    "; it keeps small parts of large binaries (each part pins its whole \
                     binary: :binary.copy/1 the part it keeps)",
                );
            }
            if let Some(next) = made_by(first, &mut line) {
                next
            } else if let Some(next) = state_growth(first, &mut line) {
                next
            } else if first["table"].is_string() {
                next("ets", &[("table", &first["table"])])
            } else if first["otp"] == true {
                next("get_state", &[("pid", &first["pid"])])
            } else {
                pid_next(&first["pid"])
            }
        }
        // Most of the VM's memory in persistent terms (filed under `system`): who puts them.
        "process_memory"
            if holders["persistent_terms"]["share"].as_u64().unwrap_or(0) >= 25
                && t.meter != Meter::MemoryProcesses =>
        {
            let terms = &holders["persistent_terms"];
            line.push_str(&format!(
                "; persistent terms hold {} of it ({} terms, {} % of all memory; each one put \
                 stays until erased)",
                bytes(terms["bytes"].as_f64().unwrap_or(0.0)),
                terms["count"],
                terms["share"]
            ));
            made_by(terms, &mut line)
                .unwrap_or_else(|| next("eval", &[("code", &json!(":persistent_term.info()"))]))
        }
        "process_memory" if first.is_object() => {
            // Growth of all memory that no process grew by, and the largest holds little of:
            // naming that process would send the agent the wrong way.
            let largest = first["ranked_by"] != "growth";
            let memory = first["memory"].as_f64().unwrap_or(0.0);
            if largest && t.meter != Meter::MemoryProcesses && memory * 20.0 < t.current as f64 {
                line.push_str(&format!(
                    "; no process grew in the window, and the largest ({} at {}) holds little \
                     of it: it is outside the processes",
                    label(first),
                    bytes(memory)
                ));
                return (line, next("system_info", &[]));
            }
            line.push_str(&process_holder(first));
            if let Some(next) = made_by(first, &mut line) {
                return (line, next);
            }
            if let Some(next) = state_growth(first, &mut line) {
                return (line, next);
            }
            // Its state, when that is where the memory is (an OTP process whose heap grows,
            // not its mailbox or what it monitors).
            let heap = first["heap_words"].as_f64().unwrap_or(0.0) * 8.0;
            let in_heap = heap * 2.0 >= first["memory"].as_f64().unwrap_or(0.0);
            if first["otp"] == true && first["mailbox"].as_u64().unwrap_or(0) < 1000 && in_heap {
                next("get_state", &[("pid", &first["pid"])])
            } else {
                pid_next(&first["pid"])
            }
        }
        "ets_tables" if first.is_object() => {
            line.push_str(&format!(
                "; owner of the most: {}{} with {} tables (e.g. {})",
                first["label"].as_str().unwrap_or("?"),
                in_function(first),
                first["tables"],
                first["examples"][0].as_str().unwrap_or("?")
            ));
            made_by(first, &mut line).unwrap_or_else(|| pid_next(&first["pid"]))
        }
        "ets_memory" if first.is_object() => {
            line.push_str(&format!(
                "; largest table {} ({} rows, {}), owner {}",
                first["table"].as_str().unwrap_or("?"),
                first["rows"],
                bytes(first["bytes"].as_f64().unwrap_or(0.0)),
                first["owner"].as_str().unwrap_or("?")
            ));
            next("ets", &[("table", &first["table"])])
        }
        "ports" if first.is_object() => {
            line.push_str(&format!(
                "; {} × {} owned by {}{}",
                first["count"],
                first["name"].as_str().unwrap_or("?"),
                first["label"].as_str().unwrap_or("?"),
                in_function(first)
            ));
            made_by(first, &mut line).unwrap_or_else(|| pid_next(&first["pid"]))
        }
        "atoms" if found.is_object() => match made_by(found, &mut line) {
            Some(next) => next,
            None => {
                line.push_str(&format!(
                    "; {}",
                    found["note"]
                        .as_str()
                        .unwrap_or("no scan names an atom's creator")
                ));
                serde_json::from_value(found["next"].clone())
                    .unwrap_or_else(|_| next("system_info", &[]))
            }
        },
        _ if t.meter == Meter::Fds => {
            let kinds = os_pid
                .map(|pid| vitals::fd_kinds(pid, 3))
                .unwrap_or_default();
            if !kinds.is_empty() {
                let by: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
                line.push_str(&format!("; open: {}", by.join(", ")));
            }
            // Files and sockets opened through NIFs are no ports: the node's short trace of
            // the opening functions names the application function that opens them.
            if let Some(next) = made_by(found, &mut line) {
                return (line, next);
            }
            next(
                "trace",
                &[
                    ("module", &json!("file")),
                    ("function", &json!("open")),
                    ("max_events", &json!(20)),
                    ("duration_ms", &json!(5000)),
                ],
            )
        }
        _ => next("system_info", &[]),
    };
    (line, next)
}

/// `; grew most: Tracker (in …) +8.6 MB in the window, now 8.7 MB: 4000 monitors (3998 of
/// <0.9.0>), heap …`: who holds growing process memory and what it is made of (only the
/// parts it has), ranked by growth when the node could tell, else by size.
fn process_holder(first: &Value) -> String {
    let by_growth = first["ranked_by"] == "growth";
    let grew = match first["grew"].as_f64() {
        Some(g) if g > 0.0 => format!(" +{} in the window", bytes(g)),
        Some(g) if g < 0.0 => format!(" -{} in the window (a GC)", bytes(-g)),
        _ => String::new(),
    };
    let size = bytes(first["memory"].as_f64().unwrap_or(0.0));
    let head = if by_growth {
        format!(
            "; grew most: {}{}{grew}, now {size}",
            label(first),
            in_function(first)
        )
    } else {
        format!(
            "; the largest process: {}{} at {size}{grew}",
            label(first),
            in_function(first)
        )
    };
    let count = |key: &str| first[key].as_u64().unwrap_or(0);
    // `(4000 on X)`, `(10000 of the first 10000 by Y)`: the commonest other end.
    let top = |key: &str, by: &str| {
        let of = &first[format!("{key}_top")];
        match (
            of["count"].as_u64(),
            of["read"].as_u64(),
            of["target"].as_str(),
        ) {
            (Some(n), Some(read), Some(target)) if n > 1 && read < count(key) => {
                format!(" ({n} of the first {read} {by} {target})")
            }
            (Some(n), _, Some(target)) if n > 1 => format!(" ({n} {by} {target})"),
            (Some(1), _, _) if count(key) > 1 => format!(" (each {by} a different process)"),
            _ => String::new(),
        }
    };
    let mut parts = vec![format!("heap {} words", first["heap_words"])];
    for (key, what, by) in [
        ("mailbox", "queued messages", ""),
        ("monitors", "monitors", "on"),
        ("monitored_by", "monitored by", "by"),
        ("links", "links", ""),
        ("dictionary", "dictionary keys", ""),
    ] {
        let n = count(key);
        if n > 0 {
            let detail = if !by.is_empty() {
                top(key, by)
            } else if key == "dictionary" && count("dictionary_bytes") > 0 {
                format!(" ({})", bytes(count("dictionary_bytes") as f64))
            } else {
                String::new()
            };
            parts.push(format!("{what} {n}{detail}"));
        }
    }
    if count("refc_count") > 0 {
        parts.push(format!(
            "{} refc binaries referenced ({})",
            count("refc_count"),
            bytes(first["refc_bytes"].as_f64().unwrap_or(0.0))
        ));
    }
    format!("{head} ({})", parts.join(", "))
}

/// `; made by Relay.Jobs.run/1 lib/relay.ex:41 (…)`: the application function that makes
/// what the holder holds, from the node's short trace of its calls; the next call is that
/// function's code when one was found.
fn made_by(holder: &Value, line: &mut String) -> Option<Next> {
    let made = &holder["made_by"];
    let text = made["text"].as_str()?;
    // What an ETS table holds was written into it; anything else was made.
    let verb = if holder["table"].is_string() {
        "written by"
    } else {
        "made by"
    };
    match made["target"].as_str() {
        Some(target) => {
            line.push_str(&format!("; {verb} {text}"));
            Some(next("source", &[("target", &json!(target))]))
        }
        None => {
            line.push_str(&format!("; what makes them: {text}"));
            None
        }
    }
}

/// `; its state: :sessions 1838 entries (+49.8/s) …`: an OTP holder's state part that grows
/// and the function of its module that ran most, which is the next call when there is one.
fn state_growth(holder: &Value, line: &mut String) -> Option<Next> {
    let growth = &holder["state_growth"];
    line.push_str(&format!("; {}", growth["text"].as_str()?));
    let target = growth["target"].as_str()?;
    Some(next("source", &[("target", &json!(target))]))
}

fn label(holder: &Value) -> &str {
    holder["label"].as_str().unwrap_or("?")
}

fn in_function(holder: &Value) -> String {
    holder["function"]
        .as_str()
        .map(|f| format!(" (in {f})"))
        .unwrap_or_default()
}

/// `1.5 MB`, `640 KB`, `12 B`.
fn bytes(v: f64) -> String {
    let v = v.abs();
    if v >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} GB", v / (1024.0 * 1024.0 * 1024.0))
    } else if v >= 1024.0 * 1024.0 {
        format!("{:.1} MB", v / (1024.0 * 1024.0))
    } else if v >= 1024.0 {
        format!("{:.0} KB", v / 1024.0)
    } else {
        format!("{v:.0} B")
    }
}

/// The report's text: the findings, most urgent first, each with its next call, above the
/// node's `figures` line.
fn report(name: &str, findings: &[Finding], figures: String) -> String {
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
/// `os_sup_render:lines/2` does).
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
            }],
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

    #[test]
    fn a_growing_process_is_looked_at_where_its_memory_is() {
        let growth = Trend {
            meter: Meter::MemoryProcesses,
            rate: 400_000.0,
            current: 30 << 20,
            limit: None,
            to_limit: Some(3600.0),
            growing: true,
        };
        let holder = |otp: bool, mailbox: u64| {
            json!({"process_memory": [{"pid": "<0.9.0>", "label": "Tracker", "memory": 2e7,
                   "grew": -1e5, "heap_words": 2_400_000, "mailbox": mailbox, "monitors": 0,
                   "links": 1, "dictionary": 2, "otp": otp}]})
        };
        let (line, next) = concern_line(&growth, &holder(true, 0), None, None);
        assert!(line.contains("the largest process: Tracker"), "{line}");
        assert!(
            line.contains("at 19.1 MB -98 KB in the window (a GC)"),
            "{line}"
        );
        assert_eq!(next.tool, "get_state", "its state");
        let (_, next) = concern_line(&growth, &holder(true, 50_000), None, None);
        assert_eq!(next.tool, "process_info", "its mailbox");
        let (_, next) = concern_line(&growth, &holder(false, 0), None, None);
        assert_eq!(next.tool, "process_info", "not an OTP process");
    }
}
