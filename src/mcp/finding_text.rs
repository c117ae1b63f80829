//! A `diagnose` finding's line, written once from its record (a node's and a cluster's
//! report alike): its head, its evidence, then what is told as part of it.

use crate::node::diagnose::{duration_text, rate_text, Finding, Joined, Kind};

/// The most bytes of one line: the node cuts a finding's own evidence at 600; what is told
/// with it (a leak that piles up behind a contention) may add as much again, cut here.
const LINE_BYTES: usize = 900;

/// `finding`'s one line.
pub(crate) fn line(finding: &Finding) -> String {
    let mut line = format!("{}{}{}", lead(finding.kind), finding.head, finding.detail);
    for told in &finding.joined {
        line.push_str(&joined(told));
    }
    if line.len() > LINE_BYTES {
        let total = line.len();
        let mut at = LINE_BYTES;
        while !line.is_char_boundary(at) {
            at -= 1;
        }
        line.truncate(at);
        line.push_str(&format!("... (truncated: {total} bytes total)"));
    }
    line
}

/// What a kind's head starts with when the node leaves it to this server (a leak's head
/// is also told inside another finding, without it).
fn lead(kind: Kind) -> &'static str {
    match kind {
        Kind::Leak => "leak: ",
        _ => "",
    }
}

/// A finding told as part of another: its clause, led by its separator.
fn joined(told: &Joined) -> String {
    let within = |seconds: f64| duration_text(seconds);
    match told {
        Joined::MemoryGrows { per_s, to_limit } => format!(
            "; the node's memory grows with it: +{}/s{}",
            kilobytes(*per_s),
            to_limit
                .map(|s| format!(", the limit in {}", within(s)))
                .unwrap_or_default()
        ),
        Joined::PileUp {
            meter,
            per_s,
            to_limit,
            told,
        } => {
            let full = to_limit
                .map(|s| format!(", full in {}", within(s)))
                .unwrap_or_default();
            // A leak of them already says how they pile up: only the time to the limit is news.
            if *told {
                format!("; {meter}{full}")
            } else {
                format!("; the processes waiting pile up: {meter} +{per_s:.1}/s{full}")
            }
        }
        Joined::Leak(leak) => format!("; they pile up: {}{}", leak.head, leak.detail),
        Joined::MembersRestarted(times) => format!(
            "; its members were restarted {times}× (their calls time out in the cycle, and it \
             forms again)"
        ),
        Joined::CrashReports(errors) => {
            format!(" (the {errors} error events of the last 5 min are these crashes' reports)")
        }
        Joined::FloodErrors(total) => {
            format!("; they are the node's error events ({total} since start)")
        }
        Joined::DescriptorsFull {
            per_s,
            current,
            limit,
            to_limit,
        } => format!(
            "; file descriptors +{per_s:.1}/s, {current} of {limit}: full in {}",
            within(*to_limit)
        ),
        Joined::ProcessesFull(left) => format!("; processes full in {}", within(*left)),
        Joined::TimersWork(work) => {
            let each: Vec<String> = work
                .iter()
                .map(|r| format!("{} {} → {}", r.label(), rate_text(r.then), rate_text(r.now)))
                .collect();
            let over = work.first().map(|r| r.over).unwrap_or_default();
            format!(
                "; the work they make: {} reductions over {}",
                each.join(", "),
                duration_text(over).trim_start_matches('~')
            )
        }
        Joined::SameCode(other) => {
            format!("; the same code also: {}{}", lead(other.kind), other.head)
        }
        Joined::SameHolder(other) => format!("; the same process also: {}", other.head),
        Joined::WhileStalled(other) => format!("; meanwhile: {}", other.head),
        Joined::Pauses(stall) => format!("; its collections pause it: {}", stall.head),
    }
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
    use crate::node::diagnose::Next;

    #[test]
    fn a_line_is_its_head_its_evidence_and_what_is_told_with_it() {
        let mut leak = Finding::new(
            Kind::Leak,
            "+5/s riders".into(),
            "; its mailbox: 1× :go".into(),
            Next::new("process_info", vec![]),
        );
        leak.joined.push(Joined::ProcessesFull(3600.0));
        assert_eq!(
            line(&leak),
            "leak: +5/s riders; its mailbox: 1× :go; processes full in ~60 min"
        );
        let mut mailbox = Finding::new(
            Kind::Mailbox,
            "mailbox: x has 9 msgs".into(),
            String::new(),
            Next::new("process_info", vec![]),
        );
        mailbox.joined.push(Joined::MemoryGrows {
            per_s: 81920.0,
            to_limit: Some(259_200.0),
        });
        mailbox
            .joined
            .push(Joined::SameCode(Box::new(leak.clone())));
        assert_eq!(
            line(&mailbox),
            "mailbox: x has 9 msgs; the node's memory grows with it: +80 KB/s, the limit in \
             ~3 days; the same code also: leak: +5/s riders"
        );
        // A long one is cut where a character ends, saying how long it was.
        leak.head = "é".repeat(600);
        let cut = line(&leak);
        assert!(cut.ends_with("bytes total)"), "{cut}");
        assert!(cut.len() < LINE_BYTES + 40, "{}", cut.len());
    }
}
