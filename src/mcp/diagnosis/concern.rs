//! A concern of the node's history (a meter that grows, or a count near its limit) as a
//! finding: its line names the holder the node found inside (the process, table, port owner
//! or atom maker) and the code that makes what it holds, and its next call goes there.

use super::{next, Finding, Kind, Next};
use crate::node::growth::{self, Trend};
use crate::node::proc_fs;
use crate::node::vitals::{Meter, Unit};
use serde_json::{json, Map, Value};

/// A concern of the history as a finding: its line with the holder and the code that makes
/// what it holds, and the next call.
pub(super) fn as_finding(
    t: &Trend,
    holders: &Value,
    total: Option<&Trend>,
    os_pid: Option<u32>,
) -> Finding {
    let (line, next) = concern_line(t, holders, total, os_pid);
    let holder = &holders[t.meter.suspects().first().copied().unwrap_or_default()][0];
    let mut facts = Map::new();
    facts.insert("meter".into(), json!(t.meter.key()));
    facts.insert("rate_per_s".into(), json!(t.rate));
    facts.insert("current".into(), json!(t.current));
    facts.insert("limit".into(), json!(t.limit));
    facts.insert("seconds_to_limit".into(), json!(t.to_limit));
    if let Some(step) = t.step {
        facts.insert(
            "past_step".into(),
            json!({"by": step.by, "took_s": step.took, "ago_s": step.ago}),
        );
    }
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
    if let Some(step) = past_step(t) {
        line.push_str(&format!("; {step}"));
    }
    match (t.to_limit, t.limit) {
        (Some(left), Some(_)) => {
            line.push_str(&format!(": full in {}", growth::duration_text(left)))
        }
        (Some(left), None) => line.push_str(&format!(
            ": the host's available memory gone in {}",
            growth::duration_text(left)
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
        // Too little in one window to be a leak on its own, but the history says processes
        // grow: the group that grew in the window is where they are.
        "process_groups" if first.is_object() => {
            line.push_str(&format!(
                "; the group that grew in the window: +{} to {}, {}",
                first["change"],
                first["count"],
                first["group"].as_str().unwrap_or("?")
            ));
            pid_next(&first["pid"])
        }
        "process_groups" => next(
            "processes",
            &[
                ("group_by", &json!("initial_call")),
                ("window_ms", &json!(10_000)),
            ],
        ),
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
                .map(|pid| proc_fs::fd_kinds(pid, 3))
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

/// `rose by 50000 in 2 s, 36 s ago; flat since`: the step a meter that no longer grows last
/// rose by.
pub(super) fn past_step(t: &Trend) -> Option<String> {
    let step = t.step?;
    let by = match t.meter.unit() {
        Unit::Bytes => bytes(step.by),
        Unit::Count => format!("{:.0}", step.by),
    };
    let time = |s: f64| growth::duration_text(s).trim_start_matches('~').to_string();
    Some(format!(
        "rose by {by} in {}, {} ago; flat since",
        time(step.took),
        time(step.ago)
    ))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_growing_process_is_looked_at_where_its_memory_is() {
        let growth = Trend {
            meter: Meter::MemoryProcesses,
            rate: 400_000.0,
            current: 30 << 20,
            limit: None,
            to_limit: Some(3600.0),
            growing: true,
            step: None,
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

    #[test]
    fn a_count_near_its_limit_says_the_step_it_came_by() {
        let near = Trend {
            meter: Meter::Processes,
            rate: 0.0,
            current: 950_300,
            limit: Some(1_048_576),
            to_limit: None,
            growing: false,
            step: Some(growth::Step {
                by: 900_000.0,
                took: 30.0,
                ago: 125.0,
            }),
        };
        let (line, _) = concern_line(&near, &json!({}), None, None);
        assert_eq!(
            line,
            "processes at 950300 of 1048576 (91 %); rose by 900000 in 30 s, 2 min ago; flat since"
        );
        let finding = as_finding(&near, &json!({}), None, None);
        assert_eq!(finding.facts["past_step"]["ago_s"], 125.0);
        assert_eq!(finding.facts["seconds_to_limit"], Value::Null);
    }

    #[test]
    fn sizes_read_in_the_unit_that_fits() {
        assert_eq!(bytes(12.0), "12 B");
        assert_eq!(bytes(-640.0 * 1024.0), "640 KB");
        assert_eq!(bytes(1.5 * 1024.0 * 1024.0), "1.5 MB");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.0 GB");
    }
}
