//! A concern of the node's history (a meter that grows, or a count near its limit) as a
//! finding: its line names the holder the node found inside (the process, table, port owner
//! or atom maker) and the code that makes what it holds, and its next call goes there.

use super::finding::{Arg, Finding, Kind, Next};
use super::history::Trend;
use super::holder_text::{in_function, label, made_by, made_line, pid_next, state_growth};
use super::holders::{Holder, Holders};
use super::process_holder::memory_holder;
use super::text::{bytes, duration_text};
use crate::node::proc_fs;
use crate::node::vitals::{Meter, Unit};

/// A concern of the history as a finding: its line with the holder and the code that makes
/// what it holds, and the next call. `processes_rise` is how fast the processes' memory rose
/// over the history (whether a growth of all memory is theirs).
pub(super) fn as_finding(
    t: &Trend,
    holders: &Holders,
    total: Option<&Trend>,
    processes_rise: Option<f64>,
    os_pid: Option<u32>,
) -> Finding {
    let (head, detail, next) = concern_line(t, holders, total, processes_rise, os_pid);
    let holder = first_holder(
        t.meter.suspects().first().copied().unwrap_or_default(),
        holders,
    );
    let mut finding = Finding::new(Kind::Growth, head, detail, next);
    finding.seconds_to_harm = t.to_limit.unwrap_or(Kind::Growth.urgency());
    finding.holder = holder.and_then(|h| h.pid.clone());
    // Its numbers, named by the meter and the unit (`memory_binary_bytes_per_s`, `ports`).
    let unit = match t.meter.unit() {
        Unit::Bytes => "_bytes",
        Unit::Count => "",
    };
    let key = t.meter.key();
    finding
        .facts
        .insert(format!("{key}{unit}"), t.current as f64);
    if t.growing {
        finding.facts.insert(format!("{key}{unit}_per_s"), t.rate);
    }
    if let Some(limit) = t.limit {
        finding
            .facts
            .insert(format!("{key}_limit{unit}"), limit as f64);
    }
    if let Some(left) = t.to_limit {
        finding.facts.insert("to_limit_ms".into(), left * 1000.0);
    }
    finding.trend = Some(t.clone());
    finding.holder_function = holder.and_then(|h| h.function.clone());
    finding.holder_waits_on = holder.and_then(|h| h.waits_on.clone());
    finding
}

/// The first holder the node found of a suspect's kind.
fn first_holder<'a>(suspect: &str, holders: &'a Holders) -> Option<&'a Holder> {
    let by_suspect: [(&str, &[Holder]); 6] = [
        ("binary", &holders.binary),
        ("process_memory", &holders.process_memory),
        ("process_groups", &holders.process_groups),
        ("ets_tables", &holders.ets_tables),
        ("ets_memory", &holders.ets_memory),
        ("ports", &holders.ports),
    ];
    if suspect == "timers" {
        // The process the most intervals message.
        return holders.timers.as_ref().and_then(|t| t.targets.first());
    }
    by_suspect
        .iter()
        .find(|(name, _)| *name == suspect)
        .and_then(|(_, found)| found.first())
}

/// One concern's head, the evidence after it and its next call (as data, like the node's).
fn concern_line(
    t: &Trend,
    holders: &Holders,
    total: Option<&Trend>,
    processes_rise: Option<f64>,
    os_pid: Option<u32>,
) -> (String, String, Next) {
    let head = head(t, total);
    let mut line = String::new();
    if let Some(step) = step_text(t) {
        line.push_str(&format!("; {step}"));
    }
    match (t.to_limit, t.limit) {
        (Some(left), Some(_)) => line.push_str(&format!(": full in {}", duration_text(left))),
        (Some(left), None) => line.push_str(&format!(
            ": the host's available memory gone in {}",
            duration_text(left)
        )),
        _ => {}
    }
    if t.meter == Meter::EtsTables {
        line.push_str(
            " (the VM enforces no table limit since OTP 20: each table costs memory and a \
             lookup in the table registry)",
        );
    }
    let next = holder_evidence(t, holders, processes_rise, os_pid, &mut line);
    (head, line, next)
}

/// What grows and how much: `ports +2.0/s, 120 of 65536 (0 %)`.
fn head(t: &Trend, total: Option<&Trend>) -> String {
    let amount = |v: f64| match t.meter.unit() {
        Unit::Bytes => bytes(v),
        Unit::Count => format!("{v:.0}"),
    };
    let mut head = if t.growing {
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
        head.push_str(&format!(" of {limit} ({share:.0} %)"));
    } else if let Some(total) =
        total.filter(|_| t.meter.unit() == Unit::Bytes && t.meter != Meter::MemoryTotal)
    {
        let share = t.current as f64 * 100.0 / total.current.max(1) as f64;
        head.push_str(&format!(" ({share:.0} % of all memory)"));
    }
    head
}

/// The holder the node found of what grows, said after `line`, and the call to make next:
/// what makes it, where its code is, else the holder itself.
fn holder_evidence(
    t: &Trend,
    holders: &Holders,
    processes_rise: Option<f64>,
    os_pid: Option<u32>,
    line: &mut String,
) -> Next {
    let suspect = t.meter.suspects().first().copied().unwrap_or_default();
    let first = first_holder(suspect, holders);
    match (suspect, first) {
        ("binary", Some(first)) => binary_holder(first, line),
        // Most of the VM's memory in persistent terms (filed under `system`): who puts them.
        ("process_memory", _)
            if holders
                .persistent_terms
                .as_ref()
                .is_some_and(|t| t.share >= 25)
                && t.meter != Meter::MemoryProcesses =>
        {
            persistent_terms(holders, line)
        }
        ("process_memory", Some(first)) => memory_holder(t, first, processes_rise, line),
        // Too little in one window to be a leak on its own, but the history says processes
        // grow: the group that grew in the window is where they are.
        ("process_groups", Some(first)) => {
            line.push_str(&format!(
                "; the group that grew in the window: +{} to {}, {}",
                first.change.unwrap_or(0),
                first.count.unwrap_or(0),
                first.group.as_deref().unwrap_or("?")
            ));
            pid_next(first)
        }
        ("process_groups", None) => Next::new(
            "processes",
            vec![
                ("group_by", Arg::Text("initial_call".into())),
                ("window_ms", Arg::Int(10_000)),
            ],
        ),
        ("ets_tables", Some(first)) => {
            line.push_str(&format!(
                "; owner of the most: {}{} with {} tables (e.g. {})",
                label(first),
                in_function(first),
                first.tables.unwrap_or(0),
                first.examples.first().map_or("?", String::as_str)
            ));
            made_by(first, line).unwrap_or_else(|| pid_next(first))
        }
        ("ets_memory", Some(first)) => {
            let table = first.table.clone().unwrap_or_else(|| "?".into());
            let (rows, size) = (first.rows.unwrap_or(0), bytes(first.bytes.unwrap_or(0.0)));
            let tables = first.tables.unwrap_or(1);
            if first.ranked_by.as_deref() == Some("growth") {
                // The owner whose tables grew in the window: many made are its doing, one
                // table growing is that table's.
                line.push_str(&format!(
                    "; grown in the window by {} tables of {}{}: +{}, the most {table} ({rows} \
                     rows, {size})",
                    tables,
                    label(first),
                    in_function(first),
                    bytes(first.grew.unwrap_or(0.0)),
                ));
                if tables > 1 {
                    return pid_next(first);
                }
            } else {
                line.push_str(&format!(
                    "; largest table {table} ({rows} rows, {size}), owner {}",
                    first.owner.as_deref().unwrap_or("?")
                ));
            }
            Next::new("ets", vec![("table", Arg::Text(table))])
        }
        ("ports", Some(first)) => {
            line.push_str(&format!(
                "; {} × {} owned by {}{}",
                first.count.unwrap_or(0),
                first.name.as_deref().unwrap_or("?"),
                label(first),
                in_function(first)
            ));
            made_by(first, line).unwrap_or_else(|| pid_next(first))
        }
        ("atoms", _) if holders.atoms.is_some() => {
            let atoms = holders.atoms.as_ref().expect("checked above");
            match atoms
                .made_by
                .as_ref()
                .and_then(|made| made_line(made, false, line))
            {
                Some(next) => next,
                None => {
                    line.push_str(&format!(
                        "; {}",
                        atoms
                            .note
                            .as_deref()
                            .unwrap_or("no scan names an atom's creator")
                    ));
                    atoms
                        .next
                        .clone()
                        .unwrap_or_else(|| Next::new("system_info", vec![]))
                }
            }
        }
        ("timers", _) => timers_line(holders.timers.as_ref(), line),
        _ if t.meter == Meter::Fds => open_files(holders, os_pid, line),
        _ => Next::new("system_info", vec![]),
    }
}

/// A process's (or a table's) refc binaries, and whether it keeps small parts of large ones.
fn binary_holder(first: &Holder, line: &mut String) -> Next {
    let referenced = first.refc_bytes.unwrap_or(0.0);
    let own = first.heap_bytes.unwrap_or(0.0);
    let held = match first.refc_count {
        Some(n) if n > 0 => format!(
            "{n} refc binaries of ~{} each, {} referenced",
            bytes(referenced / n as f64),
            bytes(referenced)
        ),
        _ => format!("{} of refc binaries referenced", bytes(referenced)),
    };
    let whose = match &first.owner {
        // An ETS table: its owner and rows, and its own memory (ETS counts no binary).
        Some(owner) => format!(
            " (owner {owner}, {} rows): {held}, table memory {}",
            first.rows.unwrap_or(0),
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
    if let Some(next) = made_by(first, line) {
        next
    } else if let Some(next) = state_growth(first, line) {
        next
    } else if let Some(table) = &first.table {
        Next::new("ets", vec![("table", Arg::Text(table.clone()))])
    } else if let (true, Some(pid)) = (first.otp, &first.pid) {
        Next::new("get_state", vec![("pid", Arg::Pid(pid.clone()))])
    } else {
        pid_next(first)
    }
}

/// Persistent terms that hold most of the memory, and who puts them.
fn persistent_terms(holders: &Holders, line: &mut String) -> Next {
    let terms = holders.persistent_terms.as_ref().expect("checked above");
    line.push_str(&format!(
        "; persistent terms hold {} of it ({} terms, {} % of all memory; each one put \
         stays until erased)",
        bytes(terms.bytes),
        terms.count,
        terms.share
    ));
    terms
        .made_by
        .as_ref()
        .and_then(|made| made_line(made, false, line))
        .unwrap_or_else(|| {
            Next::new(
                "eval",
                vec![("code", Arg::Text(":persistent_term.info()".into()))],
            )
        })
}

/// The descriptors the OS says are open, and the function the node's trace saw open them.
fn open_files(holders: &Holders, os_pid: Option<u32>, line: &mut String) -> Next {
    let kinds = os_pid
        .map(|pid| proc_fs::fd_kinds(pid, 3))
        .unwrap_or_default();
    if !kinds.is_empty() {
        let by: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
        line.push_str(&format!("; open: {}", by.join(", ")));
    }
    // Files and sockets opened through NIFs are no ports: the node's short trace of
    // the opening functions names the application function that opens them.
    let traced = holders.files.as_ref().and_then(|f| f.made_by.as_ref());
    if let Some(next) = traced.and_then(|made| made_line(made, false, line)) {
        return next;
    }
    Next::new(
        "trace",
        vec![
            ("module", Arg::Text("file".into())),
            ("function", Arg::Text("open".into())),
            ("max_events", Arg::Int(20)),
            ("duration_ms", Arg::Int(5000)),
        ],
    )
}

/// `; made by Visits.track/1 lib/visits.ex:28 (:timer.send_interval/3, …); 1080 of 1085
/// intervals message Visits: …`: who starts the timers (the application's caller of the
/// `timer` functions, or of `timer_server`) and whom they make work for; the next call is
/// that function's code, else a longer trace of the calls that start them.
fn timers_line(timers: Option<&super::holders::Timers>, line: &mut String) -> Next {
    let made = timers.and_then(|t| t.made_by.as_ref());
    let next = made.and_then(|made| made_line(made, false, line));
    if let Some(first) = timers.and_then(|t| t.targets.first()) {
        let of = timers
            .and_then(|t| t.intervals)
            .map(|n| format!(" of {n}"))
            .unwrap_or_default();
        line.push_str(&format!(
            "; {}{of} intervals message {}{}",
            first.count.unwrap_or(0),
            label(first),
            in_function(first)
        ));
    }
    line.push_str(
        ": an interval nobody cancels fires for good, so the work they make grows with them \
         (erlang:send_after timers are not counted)",
    );
    next.unwrap_or_else(|| {
        Next::new(
            "trace",
            vec![
                ("module", Arg::Text("timer".into())),
                ("function", Arg::Text("send_interval".into())),
                ("max_events", Arg::Int(20)),
                ("duration_ms", Arg::Int(5000)),
            ],
        )
    })
}

/// `rose by 50000 in 2 s, 36 s ago; flat since`: the step a meter that no longer grows last
/// rose by.
pub(super) fn step_text(t: &Trend) -> Option<String> {
    let step = t.past_step()?;
    let by = match t.meter.unit() {
        Unit::Bytes => bytes(step.by),
        Unit::Count => format!("{:.0}", step.by),
    };
    let time = |s: f64| duration_text(s).trim_start_matches('~').to_string();
    Some(format!(
        "rose by {by} in {}, {} ago; flat since",
        time(step.took),
        time(step.ago)
    ))
}

#[cfg(test)]
#[path = "concern_tests.rs"]
mod tests;
