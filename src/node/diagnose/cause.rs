//! One finding per cause, decided once ([`one_per_cause`]), on the findings' facts and keys:
//! a finding another one causes is told as part of its cause ([`Joined`]) and leaves the
//! list, the cause taking its time to harm when that is sooner. The memory a long mailbox
//! holds grows with it; processes that pile up waiting on a contended process are that
//! contention's; a deadlock's members time out and are restarted; crashes log the error
//! events; a log flood's handlers back up; a growth of one meter is another's (the total of
//! its memory types, the OS's of the VM's); findings made by the same function are one cause
//! (a file opened and never closed leaves a descriptor and an I/O server process). Then the
//! findings are ranked, soonest harm first.

use super::finding::{Arg, Finding, Joined, Kind, Next};
use super::history::Rising;
use crate::node::vitals::Meter;

/// `findings` (the node's and this server's, each with its kind's urgency or its growth's
/// time to harm) one per cause, ranked soonest harm first. `work` is the work that rises,
/// told with the timers' growth when intervals grow (their cause).
pub(super) fn one_per_cause(findings: Vec<Finding>, work: &[Rising]) -> Vec<Finding> {
    let mut findings = findings;
    errors_of_restarts(&mut findings);
    restarts_of_deadlocks(&mut findings);
    consequences_of_a_flood(&mut findings);
    leaks_behind_contention(&mut findings);
    consequences_of_a_stall(&mut findings);
    processes_of_leaks(&mut findings);
    growth_told_by_another(&mut findings);
    descriptors_of_ports(&mut findings);
    work_of_timers(&mut findings, work);
    growth_of_mailboxes(&mut findings);
    growth_behind_contention(&mut findings);
    findings.sort_by(|a, b| a.seconds_to_harm.total_cmp(&b.seconds_to_harm));
    same_code(&mut findings);
    same_holder(&mut findings);
    findings
}

/// Moves each finding `of` says belongs to another into that one (the index `of` returns),
/// as what `joined` makes of it; the cause takes its time to harm when sooner.
fn fold(
    findings: &mut Vec<Finding>,
    of: impl Fn(&Finding, &[Finding]) -> Option<usize>,
    joined: impl Fn(Finding, &Finding) -> Option<Joined>,
) {
    let mut i = 0;
    while i < findings.len() {
        match of(&findings[i], findings) {
            Some(cause) if cause != i => {
                let consequence = findings.remove(i);
                let cause = if cause > i { cause - 1 } else { cause };
                let harm = consequence.seconds_to_harm;
                if let Some(told) = joined(consequence, &findings[cause]) {
                    findings[cause].joined.push(told);
                }
                let cause = &mut findings[cause];
                cause.seconds_to_harm = cause.seconds_to_harm.min(harm);
            }
            _ => i += 1,
        }
    }
}

fn position(findings: &[Finding], test: impl Fn(&Finding) -> bool) -> Option<usize> {
    findings.iter().position(test)
}

/// When every child restarted is a member of a deadlock (its calls time out in the cycle, it
/// crashes, it is restarted and deadlocks again), the deadlock says how often.
fn restarts_of_deadlocks(findings: &mut Vec<Finding>) {
    let members: Vec<String> = findings
        .iter()
        .filter(|f| f.kind == Kind::Deadlock)
        .flat_map(|f| f.keys.members.clone())
        .collect();
    let of_members = |f: &Finding| {
        f.kind == Kind::Restarts
            && !f.keys.gave_up
            && !f.keys.children.is_empty()
            && f.keys.children.iter().all(|(c, _)| members.contains(c))
    };
    if findings.iter().filter(|f| of_members(f)).count() != 1 {
        return;
    }
    fold(
        findings,
        |f, all| of_members(f).then(|| position(all, |d| d.kind == Kind::Deadlock))?,
        |restarts, _| {
            let times = restarts.keys.children.iter().map(|(_, n)| n).sum();
            Some(Joined::MembersRestarted(times))
        },
    );
}

/// Error events no more than the restarts' own reports (a crash logs its report, and its
/// supervisor one) are those crashes: the restarts finding says them.
fn errors_of_restarts(findings: &mut Vec<Finding>) {
    let restarts: f64 = findings
        .iter()
        .filter(|f| f.kind == Kind::Restarts)
        .filter_map(|f| f.fact("restarts_5m"))
        .sum();
    fold(
        findings,
        |f, all| {
            let errors = f.fact("errors_5m")?;
            (f.kind == Kind::Errors && restarts > 0.0 && errors <= 2.0 * restarts)
                .then(|| position(all, |r| r.kind == Kind::Restarts))
                .flatten()
        },
        |errors, _| Some(Joined::CrashReports(errors.fact("errors_5m")? as u64)),
    );
}

/// A mailbox this long is what a process's collections sweep: the cause of its pauses.
const SWEPT_QUEUE: f64 = 10_000.0;

/// A process the VM pauses (long collections of a large heap, schedules that do not yield)
/// causes what is seen of it meanwhile: callers piling up on it, its mailbox, its work. A
/// mailbox long enough to be most of the heap swept is the cause instead, and tells the
/// pauses.
fn consequences_of_a_stall(findings: &mut Vec<Finding>) {
    let swept = |f: &Finding| f.kind == Kind::Mailbox && f.fact("queue") >= Some(SWEPT_QUEUE);
    fold(
        findings,
        |f, all| {
            let held = matches!(f.kind, Kind::Contention | Kind::Mailbox | Kind::Cpu);
            (held && f.holder.is_some() && !swept(f))
                .then(|| position(all, |s| s.kind == Kind::Stall && s.holder == f.holder))?
        },
        |consequence, _| Some(Joined::WhileStalled(Box::new(consequence))),
    );
    fold(
        findings,
        |f, all| {
            (f.kind == Kind::Stall && f.holder.is_some())
                .then(|| position(all, |m| swept(m) && m.holder == f.holder))?
        },
        |stall, _| Some(Joined::Pauses(Box::new(stall))),
    );
}

/// The seconds of error events a log flood's error lines are compared with (the `errors`
/// finding counts the last 5 minutes).
const ERRORS_WINDOW_S: f64 = 300.0;

/// A log flood causes what is found of its handlers' processes (their long mailbox, callers
/// blocked on one in `sync` mode; its text names their backlog) and the error events, when
/// its own error lines are as many.
fn consequences_of_a_flood(findings: &mut Vec<Finding>) {
    let Some(flood) = position(findings, |f| f.kind == Kind::LogFlood) else {
        return;
    };
    let handlers = findings[flood].keys.handlers.clone();
    let errors_per_s = findings[flood].fact("errors_per_s").unwrap_or(0.0);
    let of_handlers = |f: &Finding| {
        f.kind != Kind::LogFlood && f.holder.as_ref().is_some_and(|p| handlers.contains(p))
    };
    fold(
        findings,
        |f, all| of_handlers(f).then(|| position(all, |f| f.kind == Kind::LogFlood))?,
        |_, _| None,
    );
    fold(
        findings,
        |f, all| {
            let errors = f.fact("errors_5m")?;
            (f.kind == Kind::Errors && errors <= errors_per_s * ERRORS_WINDOW_S)
                .then(|| position(all, |f| f.kind == Kind::LogFlood))?
        },
        |errors, _| Some(Joined::FloodErrors(errors.fact("errors")? as u64)),
    );
}

/// A leak whose processes wait on a contended process piles up behind it: the contention
/// says how fast, and takes the process memory it adds.
fn leaks_behind_contention(findings: &mut Vec<Finding>) {
    fold(
        findings,
        |f, all| {
            let server = f.keys.behind.as_ref()?;
            (f.kind == Kind::Leak).then(|| {
                position(all, |c| {
                    c.kind == Kind::Contention && c.holder.as_ref() == Some(server)
                })
            })?
        },
        |leak, _| Some(Joined::Leak(Box::new(leak))),
    );
}

/// The process memory the node's findings explain (a leak's processes, told alone or as part
/// of a contention).
fn explained_process_memory(findings: &[Finding]) -> f64 {
    let leak = |f: &Finding| f.fact("memory_bytes_per_s").unwrap_or(0.0);
    findings
        .iter()
        .map(|f| {
            leak(f)
                + f.joined
                    .iter()
                    .map(|j| match j {
                        Joined::Leak(l) => leak(l),
                        _ => 0.0,
                    })
                    .sum::<f64>()
        })
        .sum()
}

/// The meter of a growth finding, when it grows.
fn growing(f: &Finding) -> Option<Meter> {
    f.trend.as_ref().filter(|t| t.growing).map(|t| t.meter)
}

/// A growth another finding already says: the total memory when a type of it grows, the
/// OS's memory when the VM's does, ETS memory when the node found a table that grows,
/// processes when it found a leak, process memory its findings account for. It goes, with
/// nothing said: its cause says more.
fn growth_told_by_another(findings: &mut Vec<Finding>) {
    let has = |kind: Kind| findings.iter().any(|f| f.kind == kind);
    let (node_leak, node_ets) = (has(Kind::Leak), has(Kind::Ets));
    let leaked_bytes = explained_process_memory(findings);
    let grows = |m: Meter| findings.iter().any(|f| growing(f) == Some(m));
    let specific_memory = [
        Meter::MemoryBinary,
        Meter::MemoryProcesses,
        Meter::MemoryEts,
        Meter::MemoryAtom,
    ]
    .into_iter()
    .any(grows);
    let vm_memory = specific_memory || grows(Meter::MemoryTotal);
    findings.retain(|f| {
        let Some(trend) = f.trend.as_ref().filter(|_| f.kind == Kind::Growth) else {
            return true;
        };
        !match trend.meter {
            Meter::MemoryTotal => specific_memory,
            Meter::Rss => vm_memory,
            Meter::MemoryEts => node_ets,
            Meter::Processes => node_leak,
            Meter::MemoryProcesses => trend.rate <= leaked_bytes * 1.5,
            _ => false,
        }
    });
}

/// Ports are file descriptors too (sockets): one finding, the ports', timed by what runs out
/// first.
fn descriptors_of_ports(findings: &mut Vec<Finding>) {
    if !findings.iter().any(|f| growing(f) == Some(Meter::Ports)) {
        return;
    }
    fold(
        findings,
        |f, all| {
            (growing(f) == Some(Meter::Fds))
                .then(|| position(all, |p| growing(p) == Some(Meter::Ports)))?
        },
        |fds, _| {
            let t = fds.trend?;
            Some(Joined::DescriptorsFull {
                per_s: t.rate,
                current: t.current,
                limit: t.limit.unwrap_or_default(),
                to_limit: t.to_limit?,
            })
        },
    );
}

/// A leak of processes harms when the process table is full, which the history times.
fn processes_of_leaks(findings: &mut [Finding]) {
    let full = findings
        .iter()
        .filter(|f| growing(f) == Some(Meter::Processes))
        .find_map(|f| f.trend.as_ref()?.to_limit);
    let Some(left) = full else {
        return;
    };
    for leak in findings.iter_mut().filter(|f| f.kind == Kind::Leak) {
        leak.joined.push(Joined::ProcessesFull(left));
        leak.seconds_to_harm = left;
    }
}

/// Work that keeps rising while intervals grow is the timers' (their cause): told with them,
/// not as findings of its own.
fn work_of_timers(findings: &mut Vec<Finding>, work: &[Rising]) {
    let Some(timers) = position(findings, |f| growing(f) == Some(Meter::Timers)) else {
        return;
    };
    if !work.is_empty() {
        findings[timers]
            .joined
            .push(Joined::TimersWork(work.to_vec()));
    }
    findings.retain(|f| f.kind != Kind::Work);
}

/// A growth held by the process of a mailbox or a hidden queue (a `gen_statem`'s postponed
/// events) is that queue's: the memory grows with it.
fn growth_of_mailboxes(findings: &mut Vec<Finding>) {
    let queue = |f: &Finding| matches!(f.kind, Kind::Mailbox | Kind::Queue);
    fold(
        findings,
        |f, all| {
            (f.kind == Kind::Growth && f.holder.is_some())
                .then(|| position(all, |m| queue(m) && m.holder == f.holder))?
        },
        |growth, _| {
            let t = growth.trend?;
            Some(Joined::MemoryGrows {
                per_s: t.rate,
                to_limit: t.to_limit,
            })
        },
    );
}

/// A growth of processes that wait on a contended process: they pile up because of it.
fn growth_behind_contention(findings: &mut Vec<Finding>) {
    fold(
        findings,
        |f, all| {
            let server = f.holder_waits_on.as_ref()?;
            (f.kind == Kind::Growth).then(|| {
                position(all, |c| {
                    c.kind == Kind::Contention && c.holder.as_ref() == Some(server)
                })
            })?
        },
        |growth, cause| {
            let t = growth.trend?;
            Some(Joined::PileUp {
                meter: t.meter.label(),
                per_s: t.rate,
                to_limit: t.to_limit,
                told: cause.joined.iter().any(|j| matches!(j, Joined::Leak(_))),
            })
        },
    );
}

/// Each finding whose next call reads the same function as a more urgent one's (the code
/// that makes both; a module's code may hold several causes) is told by that one.
fn same_code(findings: &mut Vec<Finding>) {
    fold(
        findings,
        |f, all| reads_a_function(&f.next).then(|| position(all, |k| k.next == f.next))?,
        |other, _| Some(Joined::SameCode(Box::new(other))),
    );
}

/// Growths one process holds (the memory of the tables it makes, and their count) are one
/// cause, told by the more urgent.
fn same_holder(findings: &mut Vec<Finding>) {
    let grown = |f: &Finding| f.kind == Kind::Growth && f.holder.is_some();
    fold(
        findings,
        |f, all| grown(f).then(|| position(all, |k| grown(k) && k.holder == f.holder))?,
        |other, _| Some(Joined::SameHolder(Box::new(other))),
    );
}

/// `source` of a function (`Shop.Audit.log/1`), not of a whole module.
fn reads_a_function(next: &Next) -> bool {
    next.tool == "source"
        && next
            .args
            .iter()
            .any(|(key, arg)| key == "target" && matches!(arg, Arg::Text(t) if t.contains('/')))
}

#[cfg(test)]
#[path = "cause_tests.rs"]
mod tests;
