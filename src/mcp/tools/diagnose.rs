//! `diagnose`: what is wrong with a node, in one call. The node samples itself over a short
//! window (`os_sup_health`) and answers with ranked findings (deadlocks, growing process
//! groups, restarts, growing ETS tables, long mailboxes, memory, limits, run queue, errors),
//! each one line of evidence and the next call to make; one line of figures when healthy.
//!
//! The node sends each finding's next call as data (`{"tool", "args": [[key, value]…]}`) and
//! its figures line as the text; this file writes the findings and their next calls, with the
//! node's name as the agent calls it (`process_info {"name":"web","pid":"<0.1.0>"}`), so no
//! JSON is written by hand on the node and the name is never sent down.

use crate::bounds::{DIAGNOSE_WINDOW_DEFAULT_MS, DIAGNOSE_WINDOW_MS};
use crate::mcp::output::success;
use crate::mcp::McpServer;
use crate::node::vitals::{self, Assessment, Meter, Sample, Trend, Unit};
use crate::node::{Lang, ToolCall};
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
            .plus(Duration::from_millis(window));
        Ok(match self.registry.call_tool(&input.name, &call).await {
            Ok(reply) => {
                let mut data = reply.data;
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
                if let Some(finding) = status.as_ref().and_then(|s| node_restarted(s, span)) {
                    if let Some(findings) = data["findings"].as_array_mut() {
                        findings.push(finding);
                    }
                }
                merge_trends(&mut data, &assessment, os_pid);
                let measured = ["healthy: ", "figures: "]
                    .iter()
                    .find_map(|p| reply.text.strip_prefix(p))
                    .unwrap_or(&reply.text);
                let figures = if data["findings"].as_array().is_some_and(|f| f.is_empty()) {
                    let uptime = status.as_ref().and_then(|s| s.uptime_ms);
                    format!("{}; {measured}", checked(span, count, uptime))
                } else {
                    format!("figures: {measured}")
                };
                let mut text = report(&input.name, &mut data, figures);
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
        .filter_map(|t| t.meter.suspect())
        .collect();
    suspects.sort_unstable();
    suspects.dedup();
    suspects
}

/// The node restarted by this server inside the history `diagnose` reads: when and why, as a
/// finding of the node's (`kind` `node_restart`).
fn node_restarted(status: &crate::node::NodeStatus, span: Duration) -> Option<Value> {
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
    // The log of an automatic restart keeps the run before it, its crash included.
    Some(json!({"kind": "node_restart", "line": line,
                "next": {"tool": "logs", "args": [["min_level", "error"], ["tail", 10]]}}))
}

/// What a healthy answer says it checked, over how much history, and which runs it covers
/// (history kept across a restart spans the run before it too).
fn checked(span: Duration, samples: usize, uptime_ms: Option<u64>) -> String {
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

/// Urgency of the node's finding kinds when ranked with the history's concerns (seconds to
/// harm: a deadlock is harm now; restarts and a growing table hurt without a limit in sight;
/// any other kind, errors, last).
const URGENCY: [(&str, f64); 9] = [
    ("deadlock", 0.0),
    ("leak", 1e8),
    ("mailbox", 1e8),
    ("contention", 1e8),
    ("run_queue", 1e8),
    ("lost", 1e7),
    ("node_restart", 1e7),
    ("restarts", 5e8),
    ("ets", 5e8),
];

fn urgency(kind: &str) -> f64 {
    URGENCY
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or(2e9, |(_, seconds)| *seconds)
}

/// The history's concerns (growth with its rate and time to the limit, counts near their
/// limit) as findings among the node's, with the holder the node found and the next call;
/// all ranked by urgency, soonest exhaustion first.
fn merge_trends(data: &mut Value, assessment: &Assessment, os_pid: Option<u32>) {
    let holders = data["holders"].clone();
    let node: Vec<Value> = data["findings"].as_array().cloned().unwrap_or_default();
    let kinds: Vec<&str> = node.iter().filter_map(|f| f["kind"].as_str()).collect();
    let specific_memory = assessment.concerns.iter().any(|t| {
        t.growing
            && matches!(
                t.meter,
                Meter::MemoryBinary | Meter::MemoryProcesses | Meter::MemoryEts | Meter::MemoryAtom
            )
    });
    let vm_memory = specific_memory
        || assessment
            .concerns
            .iter()
            .any(|t| t.growing && t.meter == Meter::MemoryTotal);
    let total = assessment
        .concerns
        .iter()
        .find(|t| t.meter == Meter::MemoryTotal);
    let growing = |m: Meter| {
        assessment
            .concerns
            .iter()
            .find(|t| t.meter == m && t.growing)
    };
    // Ports are file descriptors too (sockets): one finding, timed by what runs out first.
    let fds_of_ports = growing(Meter::Ports).and(growing(Meter::Fds));
    let mut ranked: Vec<(f64, Value)> = Vec::new();
    for trend in &assessment.concerns {
        let redundant = match trend.meter {
            Meter::MemoryTotal => specific_memory,
            Meter::Rss => vm_memory,
            Meter::MemoryEts => kinds.contains(&"ets"),
            Meter::Processes => kinds.contains(&"leak"),
            Meter::Fds => fds_of_ports.is_some(),
            _ => false,
        };
        if redundant {
            continue;
        }
        let (mut line, next) = concern_line(trend, &holders, total, os_pid);
        let mut left = trend.to_limit.unwrap_or(1e9);
        if let (Meter::Ports, Some(fds)) = (trend.meter, fds_of_ports) {
            if let Some(fds_left) = fds.to_limit {
                line.push_str(&format!(
                    "; file descriptors +{:.1}/s, {} of {}: full in {}",
                    fds.rate,
                    fds.current,
                    fds.limit.unwrap_or_default(),
                    vitals::duration_text(fds_left)
                ));
                left = left.min(fds_left);
            }
        }
        ranked.push((
            left,
            json!({"kind": "growth", "meter": trend.meter.key(), "line": line, "next": next,
                   "rate_per_s": trend.rate, "current": trend.current, "limit": trend.limit,
                   "seconds_to_limit": trend.to_limit}),
        ));
    }
    let processes = assessment
        .concerns
        .iter()
        .find(|t| t.meter == Meter::Processes && t.growing);
    for mut finding in node {
        let kind = finding["kind"].as_str().unwrap_or_default().to_string();
        let mut rank = urgency(&kind);
        if let (Some(t), "leak") = (processes, kind.as_str()) {
            if let (Some(left), Some(line)) = (t.to_limit, finding["line"].as_str()) {
                finding["line"] = Value::from(format!(
                    "{line}; processes full in {}",
                    vitals::duration_text(left)
                ));
                rank = left;
            }
        }
        ranked.push((rank, finding));
    }
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
    data["healthy"] = Value::Bool(ranked.is_empty());
    data["findings"] = Value::Array(ranked.into_iter().map(|(_, f)| f).collect());
    data["history"] = json!({"seconds": assessment.history.as_secs(),
                             "samples": assessment.samples,
                             "unanswered_last": assessment.unanswered});
}

/// One concern's line and its next call (as data, like the node's).
fn concern_line(
    t: &Trend,
    holders: &Value,
    total: Option<&Trend>,
    os_pid: Option<u32>,
) -> (String, Value) {
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
    } else if let Some(total) = total.filter(|_| t.meter.unit() == Unit::Bytes) {
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
    let suspect = t.meter.suspect().unwrap_or_default();
    let found = &holders[suspect];
    let first = &found[0];
    let pid_next = |pid: &Value| json!({"tool": "process_info", "args": [["pid", pid]]});
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
                json!({"tool": "ets", "args": [["table", first["table"]]]})
            } else if first["otp"] == true {
                json!({"tool": "get_state", "args": [["pid", first["pid"]]]})
            } else {
                pid_next(&first["pid"])
            }
        }
        "process_memory" if first.is_object() => {
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
                json!({"tool": "get_state", "args": [["pid", first["pid"]]]})
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
            json!({"tool": "ets", "args": [["table", first["table"]]]})
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
                found["next"].clone()
            }
        },
        _ if t.meter == Meter::Fds => {
            let kinds = os_pid
                .map(|pid| vitals::fd_kinds(pid, 3))
                .unwrap_or_default();
            if !kinds.is_empty() {
                let by: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
                line.push_str(&format!("; by kind: {}", by.join(", ")));
            }
            // Raw files and sockets opened through NIFs are no ports: a trace of the opening
            // functions names who opens them.
            json!({"tool": "trace", "args": [["module", "file"], ["function", "open"],
                                             ["max_events", 20], ["duration_ms", 5000]]})
        }
        _ => json!({"tool": "system_info", "args": []}),
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
fn made_by(holder: &Value, line: &mut String) -> Option<Value> {
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
            Some(json!({"tool": "source", "args": [["target", target]]}))
        }
        None => {
            line.push_str(&format!("; what makes them: {text}"));
            None
        }
    }
}

/// `; its state: :sessions 1838 entries (+49.8/s) …`: an OTP holder's state part that grows
/// and the function of its module that ran most, which is the next call when there is one.
fn state_growth(holder: &Value, line: &mut String) -> Option<Value> {
    let growth = &holder["state_growth"];
    line.push_str(&format!("; {}", growth["text"].as_str()?));
    let target = growth["target"].as_str()?;
    Some(json!({"tool": "source", "args": [["target", target]]}))
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
/// node's `figures` line. Each finding's `next` becomes that call's text in `data` too.
fn report(name: &str, data: &mut Value, figures: String) -> String {
    let Some(findings) = data["findings"].as_array_mut().filter(|f| !f.is_empty()) else {
        return figures;
    };
    let count = findings.len();
    let mut lines = vec![format!(
        "{count} finding{}, most urgent first:",
        if count == 1 { "" } else { "s" }
    )];
    for (i, finding) in findings.iter_mut().enumerate() {
        let next = next_call(name, &finding["next"]);
        if i < SHOWN {
            let line = finding["line"].as_str().unwrap_or_default();
            lines.push(format!("{}. {line}", i + 1));
            lines.push(format!("   next: {next}"));
        }
        finding["next"] = Value::String(next);
    }
    if count > SHOWN {
        lines.push(format!("({} more findings in data)", count - SHOWN));
    }
    lines.push(figures);
    within(lines, TEXT_BYTES)
}

/// `process_info {"name":"web","pid":"<0.1.0>"}` from `{"tool": "process_info", "args":
/// [["pid", "<0.1.0>"]]}`, the node's `name` first.
fn next_call(name: &str, next: &Value) -> String {
    let tool = next["tool"].as_str().unwrap_or_default();
    let mut pairs = vec![format!("\"name\":{}", Value::from(name))];
    for pair in next["args"].as_array().into_iter().flatten() {
        if let (Some(key), Some(value)) = (pair[0].as_str(), pair.get(1)) {
            pairs.push(format!("{}:{value}", Value::from(key)));
        }
    }
    format!("{tool} {{{}}}", pairs.join(","))
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
    fn findings_are_written_with_their_next_call() {
        let mut data = json!({"findings": [
            {"line": "mailbox: x", "next": {"tool": "waits", "args": [["pid", "<0.1.0>"]]}},
            {"line": "errors: 2", "next": {"tool": "logs",
                "args": [["min_level", "error"], ["tail", 10]]}}
        ]});
        let text = report("we\"b", &mut data, "figures: 1 process".into());
        assert_eq!(
            text,
            "2 findings, most urgent first:\n1. mailbox: x\n   next: waits \
             {\"name\":\"we\\\"b\",\"pid\":\"<0.1.0>\"}\n2. errors: 2\n   next: logs \
             {\"name\":\"we\\\"b\",\"min_level\":\"error\",\"tail\":10}\nfigures: 1 process"
        );
        assert_eq!(
            data["findings"][1]["next"],
            "logs {\"name\":\"we\\\"b\",\"min_level\":\"error\",\"tail\":10}"
        );
        let mut healthy = json!({"findings": []});
        assert_eq!(
            report("web", &mut healthy, "healthy: ok".into()),
            "healthy: ok"
        );
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
        assert_eq!(next["tool"], "get_state", "its state");
        let (_, next) = concern_line(&growth, &holder(true, 50_000), None, None);
        assert_eq!(next["tool"], "process_info", "its mailbox");
        let (_, next) = concern_line(&growth, &holder(false, 0), None, None);
        assert_eq!(next["tool"], "process_info", "not an OTP process");
    }
}
