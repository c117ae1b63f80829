//! How a holder is written in a finding's line: its label and function, what made what it
//! holds (`made by …`, `written by …`), an OTP holder's state that grows, and the call that
//! reads it next. Shared by the concerns and the work findings.

use super::finding::{Arg, Next};
use super::holders::{Commonest, Holder, Made};

/// The holder's process, else the processes by memory.
pub(super) fn pid_next(h: &Holder) -> Next {
    match &h.pid {
        Some(pid) => Next::new("process_info", vec![("pid", Arg::Pid(pid.clone()))]),
        None => Next::new("processes", vec![("sort_by", Arg::Text("memory".into()))]),
    }
}

/// `, which keeps each of them too`: the other end of most of a process's monitors.
pub(super) fn both_ends(c: &Commonest) -> &'static str {
    match c.count * 2 >= c.read {
        true => ", which keeps each of them too",
        false => "",
    }
}

/// `; made by Relay.Jobs.run/1 lib/relay.ex:41 (…)`: the application function that makes
/// what the holder holds, from the node's short trace of its calls; the next call is that
/// function's code when one was found.
pub(super) fn made_by(holder: &Holder, line: &mut String) -> Option<Next> {
    // What an ETS table holds was written into it; anything else was made.
    made_line(holder.made_by.as_ref()?, holder.table.is_some(), line)
}

pub(super) fn made_line(made: &Made, written: bool, line: &mut String) -> Option<Next> {
    let verb = if written { "written by" } else { "made by" };
    match &made.target {
        Some(target) => {
            line.push_str(&format!("; {verb} {}", made.text));
            Some(Next::new(
                "source",
                vec![("target", Arg::Text(target.clone()))],
            ))
        }
        None => {
            line.push_str(&format!("; what makes them: {}", made.text));
            None
        }
    }
}

/// `; its state: :sessions 1838 entries (+49.8/s) …`: an OTP holder's state part that grows
/// and the function of its module that ran most, which is the next call when there is one.
pub(super) fn state_growth(holder: &Holder, line: &mut String) -> Option<Next> {
    let growth = holder.state_growth.as_ref()?;
    line.push_str(&format!("; {}", growth.text));
    let target = growth.target.clone()?;
    Some(Next::new("source", vec![("target", Arg::Text(target))]))
}

pub(super) fn label(holder: &Holder) -> &str {
    holder.label.as_deref().unwrap_or("?")
}

pub(super) fn in_function(holder: &Holder) -> String {
    holder
        .function
        .as_ref()
        .map(|f| format!(" (in {f})"))
        .unwrap_or_default()
}
