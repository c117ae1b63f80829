//! Cause over consequence between the node's findings and the history's: the memory a long
//! mailbox holds grows with it, so a growth whose holder is a mailbox's holder is that
//! mailbox's, folded into its line and time to harm (one finding per cause, the cause first).

use super::{Finding, Kind};
use crate::node::growth;

/// Folds each growth held by the process of a mailbox finding into that finding: the mailbox
/// takes the growth's time to harm when it is sooner, and says how fast the memory grows.
pub(super) fn fold_into_mailboxes(findings: &mut Vec<Finding>) {
    let mailboxes: Vec<String> = findings
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
            let rate = growth.facts.get("rate_per_s").and_then(|v| v.as_f64());
            let left = growth
                .facts
                .get("seconds_to_limit")
                .and_then(|v| v.as_f64());
            if let Some(rate) = rate {
                let when = left
                    .map(|s| format!(", the limit in {}", growth::duration_text(s)))
                    .unwrap_or_default();
                mailbox.line.push_str(&format!(
                    "; the node's memory grows with it: +{}/s{when}",
                    kilobytes(rate)
                ));
            }
            mailbox.seconds_to_harm = mailbox.seconds_to_harm.min(growth.seconds_to_harm);
        }
    }
    *findings = rest;
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
    use serde_json::json;

    fn finding(kind: &str, pid: &str, harm: f64) -> Finding {
        serde_json::from_value(json!({
            "kind": kind, "seconds_to_harm": harm, "line": kind, "pid": pid,
            "next": {"tool": "process_info"}, "rate_per_s": 81920.0, "seconds_to_limit": 259200.0
        }))
        .unwrap()
    }

    #[test]
    fn a_growth_held_by_a_mailbox_is_the_mailbox() {
        let mut findings = vec![
            finding("mailbox", "#PID<0.1.0>", 1e8),
            finding("growth", "#PID<0.1.0>", 259200.0),
            finding("growth", "#PID<0.2.0>", 1e5),
        ];
        fold_into_mailboxes(&mut findings);
        assert_eq!(findings.len(), 2);
        assert_eq!(findings[0].seconds_to_harm, 259200.0);
        assert_eq!(
            findings[0].line,
            "mailbox; the node's memory grows with it: +80 KB/s, the limit in ~3 days"
        );
        assert_eq!(findings[1].pid.as_deref(), Some("#PID<0.2.0>"));
    }
}
