//! Unit tests of one finding per cause: findings made by hand, folded and ranked as `diagnose`
//! folds them.

use super::*;
use crate::node::diagnose::finding::Keys;
use crate::node::diagnose::history::Trend;
use crate::term::Pid;

fn pid(id: u32) -> Pid {
    Pid {
        node: "web@host".into(),
        id,
        serial: 0,
    }
}

fn finding(kind: Kind, head: &str, harm: f64) -> Finding {
    let mut f = Finding::new(
        kind,
        head.into(),
        String::new(),
        Next::new("process_info", vec![]),
    );
    f.seconds_to_harm = harm;
    f
}

fn growth(meter: Meter, rate: f64, to_limit: Option<f64>) -> Finding {
    let mut f = finding(Kind::Growth, meter.label(), to_limit.unwrap_or(1e9));
    f.trend = Some(Trend {
        meter,
        rate,
        current: 191,
        limit: Some(262_144),
        to_limit,
        growing: true,
        step: None,
    });
    f
}

fn kinds(findings: &[Finding]) -> Vec<Kind> {
    findings.iter().map(|f| f.kind).collect()
}

#[test]
fn a_growth_held_by_a_mailbox_is_the_mailbox() {
    let mut mailbox = finding(Kind::Mailbox, "mailbox", 1e8);
    mailbox.holder = Some(pid(1));
    let mut held = growth(Meter::MemoryProcesses, 81920.0, Some(259_200.0));
    held.holder = Some(pid(1));
    let mut other = growth(Meter::MemoryBinary, 1.0, Some(1e5));
    other.holder = Some(pid(2));
    let found = one_per_cause(vec![mailbox, held, other], &[]);
    assert_eq!(kinds(&found), [Kind::Growth, Kind::Mailbox]);
    assert_eq!(found[1].seconds_to_harm, 259_200.0);
    assert_eq!(
        found[1].joined,
        [Joined::MemoryGrows {
            per_s: 81920.0,
            to_limit: Some(259_200.0)
        }]
    );
}

#[test]
fn processes_piling_up_on_a_contended_process_are_its_finding() {
    let mut contention = finding(Kind::Contention, "contention: 123 waiting", 1e8);
    contention.holder = Some(pid(9));
    let mut leak = finding(Kind::Leak, "+5/s riders", 1e8);
    leak.keys = Keys {
        behind: Some(pid(9)),
        ..Keys::default()
    };
    leak.facts.insert("memory_bytes_per_s".into(), 4096.0);
    let mut grows = growth(Meter::Processes, 5.0, Some(52_560.0));
    grows.holder_waits_on = Some(pid(9));
    let mut memory = growth(Meter::MemoryProcesses, 4096.0, None);
    memory.holder = Some(pid(3));
    let found = one_per_cause(vec![grows, contention, leak, memory], &[]);
    // The leak, the processes and the memory they add: one finding, the contention's.
    assert_eq!(kinds(&found), [Kind::Contention]);
    assert_eq!(found[0].seconds_to_harm, 52_560.0);
    assert!(matches!(found[0].joined[0], Joined::Leak(_)));
    assert!(matches!(
        found[0].joined[1],
        Joined::PileUp { told: true, .. }
    ));
}

#[test]
fn restarts_of_a_deadlocks_members_and_their_crash_reports_are_the_deadlock() {
    let mut deadlock = finding(Kind::Deadlock, "DEADLOCK a → b", 0.0);
    deadlock.keys.members = vec!["A".into(), "B".into()];
    let mut restarts = finding(Kind::Restarts, "restarts: 6", 5e8);
    restarts.keys.children = vec![("A".into(), 4), ("B".into(), 2)];
    restarts.facts.insert("restarts_5m".into(), 6.0);
    let mut errors = finding(Kind::Errors, "errors: 12", 2e9);
    errors.facts.insert("errors_5m".into(), 12.0);
    let found = one_per_cause(vec![errors, restarts, deadlock], &[]);
    // The errors are the restarts' reports, the restarts the deadlock's.
    assert_eq!(kinds(&found), [Kind::Deadlock]);
    assert_eq!(found[0].joined, [Joined::MembersRestarted(6)]);
}

#[test]
fn a_log_flood_tells_its_handlers_backlog_and_its_errors() {
    let mut flood = finding(Kind::LogFlood, "log flood: 900 lines/s", 1e9);
    flood.keys.handlers = vec![pid(7)];
    flood.facts.insert("errors_per_s".into(), 1.0);
    let mut backlog = finding(Kind::Mailbox, "mailbox: logger_std_h_default", 1e8);
    backlog.holder = Some(pid(7));
    let mut errors = finding(Kind::Errors, "errors: 250", 2e9);
    errors.facts.insert("errors_5m".into(), 250.0);
    errors.facts.insert("errors".into(), 4000.0);
    let found = one_per_cause(vec![backlog, flood, errors], &[]);
    assert_eq!(kinds(&found), [Kind::LogFlood]);
    assert_eq!(found[0].joined, [Joined::FloodErrors(4000)]);
    // Its handler's backlog took the flood's urgency: it harms as soon.
    assert_eq!(found[0].seconds_to_harm, 1e8);
}

#[test]
fn what_the_node_explains_is_not_repeated_and_a_leak_harms_when_processes_run_out() {
    let mut leak = finding(Kind::Leak, "+300 workers", 1e8);
    leak.facts.insert("memory_bytes_per_s".into(), 1000.0);
    let found = one_per_cause(
        vec![
            finding(Kind::Errors, "errors: 2", 2e9),
            leak,
            growth(Meter::Processes, 5.0, Some(3600.0)),
            // The total grows by the binaries: one finding, the binaries'.
            growth(Meter::MemoryTotal, 5.0, Some(100.0)),
            growth(Meter::MemoryBinary, 5.0, None),
        ],
        &[],
    );
    let ranks: Vec<(Kind, f64)> = found.iter().map(|f| (f.kind, f.seconds_to_harm)).collect();
    assert_eq!(
        ranks,
        [
            (Kind::Leak, 3600.0),
            (Kind::Growth, 1e9),
            (Kind::Errors, 2e9)
        ]
    );
    assert_eq!(found[0].joined, [Joined::ProcessesFull(3600.0)]);
    assert_eq!(found[1].trend.as_ref().unwrap().meter, Meter::MemoryBinary);
}

#[test]
fn findings_whose_next_call_reads_one_function_are_one() {
    let next_is = |head: &str, tool: &str, target: &str, harm: f64| {
        let mut f = finding(Kind::Growth, head, harm);
        f.next = Next::new(tool, vec![("target", Arg::Text(target.into()))]);
        f
    };
    let found = one_per_cause(
        vec![
            next_is("fds +8.9/s", "source", "Shop.Audit.log/1", 2e3),
            next_is("leak: +9/s io servers", "source", "Shop.Audit.log/1", 3e4),
            next_is("atoms +2/s", "source", "Shop.Ids.new/0", 9e4),
            next_is("mailbox of a", "process_info", "x", 1e5),
            next_is("mailbox of b", "process_info", "x", 1.1e5),
            next_is("code: Shop.Ids differs", "source", "Shop.Ids", 1.2e5),
            next_is("growth; its state", "source", "Shop.Ids", 1.3e5),
        ],
        &[],
    );
    let heads: Vec<&str> = found.iter().map(|f| f.head.as_str()).collect();
    assert_eq!(
        heads,
        [
            "fds +8.9/s",
            "atoms +2/s",
            "mailbox of a",
            "mailbox of b",
            "code: Shop.Ids differs",
            "growth; its state",
        ]
    );
    assert!(matches!(&found[0].joined[..], [Joined::SameCode(f)] if f.head.starts_with("leak")));
    assert_eq!(found[0].seconds_to_harm, 2e3);
}

#[test]
fn growths_one_process_holds_are_one() {
    let mut memory = growth(Meter::MemoryEts, 80_000.0, Some(1e5));
    memory.holder = Some(pid(3));
    let mut tables = growth(Meter::EtsTables, 30.0, None);
    tables.holder = Some(pid(3));
    let mut other = growth(Meter::Atoms, 60.0, None);
    other.holder = Some(pid(4));
    let found = one_per_cause(vec![tables, memory, other], &[]);
    assert_eq!(found.len(), 2);
    assert!(
        matches!(&found[0].joined[..], [Joined::SameHolder(f)] if f.trend.as_ref().unwrap().meter == Meter::EtsTables)
    );
}

#[test]
fn what_a_paused_process_shows_meanwhile_is_its_stall_unless_its_mailbox_is_what_is_swept() {
    let mut stall = finding(Kind::Stall, "stall: Catalog paused", 1e8);
    stall.holder = Some(pid(1));
    let mut crowd = finding(Kind::Contention, "contention: 12 wait on Catalog", 1e8);
    crowd.holder = Some(pid(1));
    let mut elsewhere = finding(Kind::Cpu, "cpu: Other", 2e9);
    elsewhere.holder = Some(pid(2));
    let found = one_per_cause(vec![crowd, stall.clone(), elsewhere], &[]);
    assert_eq!(kinds(&found), [Kind::Stall, Kind::Cpu]);
    assert!(
        matches!(&found[0].joined[..], [Joined::WhileStalled(f)] if f.kind == Kind::Contention)
    );

    let mut swept = finding(Kind::Mailbox, "mailbox: Catalog 50000 msgs", 1e8);
    swept.holder = Some(pid(1));
    swept.facts.insert("queue".into(), 50_000.0);
    let found = one_per_cause(vec![stall, swept], &[]);
    assert_eq!(kinds(&found), [Kind::Mailbox]);
    assert!(matches!(&found[0].joined[..], [Joined::Pauses(f)] if f.kind == Kind::Stall));
}
