//! The process that holds growing memory, as a finding's line says it: the one that grew
//! (in the window, or over the history the helper keeps), else the largest, with what it is
//! made of; and when no process holds it, whether the history proves it is outside them.

use super::finding::{Arg, Next};
use super::history::Trend;
use super::holder_text::{both_ends, in_function, label, made_by, pid_next, state_growth};
use super::holders::Holder;
use super::text::{bytes, duration_text};
use crate::node::vitals::Meter;

/// The process whose memory grows, or that the growth is outside the processes: said only
/// when the history proves it (the processes' memory rose by less than a tenth as fast).
pub(super) fn memory_holder(
    t: &Trend,
    first: &Holder,
    processes_rise: Option<f64>,
    line: &mut String,
) -> Next {
    // Growth of all memory that no process grew by in the window, and the largest holds
    // little of: naming that process would send the agent the wrong way.
    let largest = first.ranked_by.is_none();
    let memory = first.memory.unwrap_or(0.0);
    if largest && t.meter != Meter::MemoryProcesses && memory * 20.0 < t.current as f64 {
        let lead = format!(
            "; no process grew in the window, and the largest ({} at {}) holds little of it",
            label(first),
            bytes(memory)
        );
        match processes_rise {
            Some(rise) if rise * 10.0 < t.rate => {
                line.push_str(&format!(
                    "{lead}: it is outside the processes (theirs rose {}/s)",
                    bytes(rise)
                ));
                return Next::new("system_info", vec![]);
            }
            Some(rise) => line.push_str(&format!(
                "{lead}, but the processes' memory rose {}/s over the history: one grows in \
                 steps a window misses (a heap grows by half when full), the largest first",
                bytes(rise)
            )),
            None => line.push_str(&format!(
                "{lead}; too little history to tell whether it is in the processes"
            )),
        }
        return Next::new("processes", vec![("sort_by", Arg::Text("memory".into()))]);
    }
    line.push_str(&process_holder(first));
    if let Some(next) = made_by(first, line) {
        return next;
    }
    if let Some(next) = state_growth(first, line) {
        return next;
    }
    // Its state, when that is where the memory is (an OTP process whose heap grows,
    // not its mailbox or what it monitors).
    let heap = first.heap_words.unwrap_or(0) as f64 * 8.0;
    let in_heap = heap * 2.0 >= memory;
    match &first.pid {
        Some(pid) if first.otp && first.mailbox.unwrap_or(0) < 1000 && in_heap => {
            Next::new("get_state", vec![("pid", Arg::Pid(pid.clone()))])
        }
        _ => pid_next(first),
    }
}

/// `; grew most: Tracker (in …) +8.6 MB in the window, now 8.7 MB: 4000 monitors (3998 of
/// <0.9.0>), heap …`: who holds growing process memory and what it is made of (only the
/// parts it has), ranked by growth when the node could tell, else by size.
fn process_holder(first: &Holder) -> String {
    let by_growth = first.ranked_by.as_deref() == Some("growth");
    let grew = match first.grew {
        Some(g) if g > 0.0 => format!(" +{} in the window", bytes(g)),
        Some(g) if g < 0.0 => format!(" -{} in the window (a GC)", bytes(-g)),
        _ => String::new(),
    };
    let size = bytes(first.memory.unwrap_or(0.0));
    let head = if first.ranked_by.as_deref() == Some("history") {
        format!(
            "; grew most over the history: {}{} +{} in {}, now {size}",
            label(first),
            in_function(first),
            bytes(first.grew.unwrap_or(0.0)),
            duration_text(first.over_ms.unwrap_or(0.0) / 1000.0).trim_start_matches('~'),
        )
    } else if by_growth {
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
    // `(4000 on X)`, `(10000 of the first 10000 by Y)`: the commonest other end. A monitor is
    // kept at both ends: an end that has most of them grows as much (said, so that its growth
    // is not taken for a second leak).
    let top = |n_all: u64, of: &Option<super::holders::Commonest>, by: &str| match of {
        Some(c) if c.count > 1 && c.read < n_all => {
            format!(
                " ({} of the first {} {by} {}{})",
                c.count,
                c.read,
                c.target,
                both_ends(c)
            )
        }
        Some(c) if c.count > 1 => format!(" ({} {by} {}{})", c.count, c.target, both_ends(c)),
        Some(c) if c.count == 1 && n_all > 1 => format!(" (each {by} a different process)"),
        _ => String::new(),
    };
    let mut parts = vec![format!("heap {} words", first.heap_words.unwrap_or(0))];
    let mailbox = first.mailbox.unwrap_or(0);
    if mailbox > 0 {
        parts.push(format!("queued messages {mailbox}"));
    }
    let monitors = first.monitors.unwrap_or(0);
    if monitors > 0 {
        parts.push(format!(
            "monitors {monitors}{}",
            top(monitors, &first.monitors_top, "on")
        ));
    }
    let by = first.monitored_by.unwrap_or(0);
    if by > 0 {
        parts.push(format!(
            "monitored by {by}{}",
            top(by, &first.monitored_by_top, "by")
        ));
    }
    let links = first.links.unwrap_or(0);
    if links > 0 {
        parts.push(format!("links {links}"));
    }
    let keys = first.dictionary.unwrap_or(0);
    if keys > 0 {
        let size = match first.dictionary_bytes.unwrap_or(0) {
            0 => String::new(),
            b => format!(" ({})", bytes(b as f64)),
        };
        parts.push(format!("dictionary keys {keys}{size}"));
    }
    let refc = first.refc_count.unwrap_or(0);
    if refc > 0 {
        parts.push(format!(
            "{refc} refc binaries referenced ({})",
            bytes(first.refc_bytes.unwrap_or(0.0))
        ));
    }
    format!("{head} ({})", parts.join(", "))
}
