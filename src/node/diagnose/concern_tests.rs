//! Unit tests of a concern's line: holders made by hand, read as `diagnose` reads them.
use super::*;
use crate::term::Pid;

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
    let holder = |otp: bool, mailbox: u64| Holders {
        process_memory: vec![Holder {
            pid: Some(Pid {
                node: "web@host".into(),
                id: 9,
                serial: 0,
            }),
            label: Some("Tracker".into()),
            memory: Some(2e7),
            grew: Some(-1e5),
            heap_words: Some(2_400_000),
            mailbox: Some(mailbox),
            monitors: Some(0),
            links: Some(1),
            dictionary: Some(2),
            otp,
            ..Holder::default()
        }],
        ..Holders::default()
    };
    let (_, line, next) = concern_line(&growth, &holder(true, 0), None, None, None);
    assert!(line.contains("the largest process: Tracker"), "{line}");
    assert!(
        line.contains("at 19.1 MB -98 KB in the window (a GC)"),
        "{line}"
    );
    assert_eq!(next.tool, "get_state", "its state");
    let (_, _, next) = concern_line(&growth, &holder(true, 50_000), None, None, None);
    assert_eq!(next.tool, "process_info", "its mailbox");
    let (_, _, next) = concern_line(&growth, &holder(false, 0), None, None, None);
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
        step: Some(super::super::history::Step {
            by: 900_000.0,
            took: 30.0,
            ago: 125.0,
        }),
    };
    let (head, detail, _) = concern_line(&near, &Holders::default(), None, None, None);
    assert_eq!(head, "processes at 950300 of 1048576 (91 %)");
    assert_eq!(detail, "; rose by 900000 in 30 s, 2 min ago; flat since");
    let finding = as_finding(&near, &Holders::default(), None, None, None);
    assert_eq!(finding.trend.unwrap().step.unwrap().ago, 125.0);
    assert_eq!(finding.seconds_to_harm, Kind::Growth.urgency());
}

#[test]
fn sizes_read_in_the_unit_that_fits() {
    assert_eq!(bytes(12.0), "12 B");
    assert_eq!(bytes(-640.0 * 1024.0), "640 KB");
    assert_eq!(bytes(1.5 * 1024.0 * 1024.0), "1.5 MB");
    assert_eq!(bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.0 GB");
}

/// The OS's resident memory growing at 80 KB/s.
fn rss_growth() -> Trend {
    Trend {
        meter: Meter::Rss,
        rate: 80_000.0,
        current: 200 << 20,
        limit: None,
        to_limit: None,
        growing: true,
        step: None,
    }
}

#[test]
fn growth_is_outside_the_processes_only_when_their_memory_did_not_rise() {
    let rss = rss_growth();
    let holders = Holders {
        process_memory: vec![Holder {
            label: Some("Parking".into()),
            memory: Some(2e6),
            ..Holder::default()
        }],
        ..Holders::default()
    };
    let (_, line, next) = concern_line(&rss, &holders, None, Some(1000.0), None);
    assert!(line.contains("it is outside the processes"), "{line}");
    assert_eq!(next.tool, "system_info");
    // The processes' memory rose with it: a process grows in steps the window missed.
    let (_, line, next) = concern_line(&rss, &holders, None, Some(60_000.0), None);
    assert!(!line.contains("outside"), "{line}");
    assert!(
        line.contains("the processes' memory rose 59 KB/s"),
        "{line}"
    );
    assert_eq!(next.tool, "processes");
    // Too little history proves nothing.
    let (_, line, _) = concern_line(&rss, &holders, None, None, None);
    assert!(!line.contains("outside"), "{line}");
}

#[test]
fn table_memory_is_told_by_the_owner_whose_tables_grew() {
    let ets = Trend {
        meter: Meter::MemoryEts,
        rate: 84_000.0,
        current: 40 << 20,
        limit: None,
        to_limit: None,
        growing: true,
        step: None,
    };
    let holders = Holders {
        ets_memory: vec![Holder {
            pid: Some(Pid {
                node: "web@host".into(),
                id: 7,
                serial: 0,
            }),
            label: Some("Maker".into()),
            table: Some(":t".into()),
            rows: Some(10),
            bytes: Some(2048.0),
            ranked_by: Some("growth".into()),
            grew: Some(90_000.0),
            tables: Some(30),
            ..Holder::default()
        }],
        ..Holders::default()
    };
    let (_, line, next) = concern_line(&ets, &holders, None, None, None);
    assert!(
        line.contains("; grown in the window by 30 tables of Maker: +88 KB"),
        "{line}"
    );
    assert_eq!(next.tool, "process_info", "the owner that makes them");
}

#[test]
fn a_process_the_history_saw_grow_is_named_with_how_much_and_over_how_long() {
    let rss = rss_growth();
    let holders = Holders {
        process_memory: vec![Holder {
            label: Some("Parking".into()),
            memory: Some(9e6),
            grew: Some(7e6),
            over_ms: Some(180_000.0),
            ranked_by: Some("history".into()),
            ..Holder::default()
        }],
        ..Holders::default()
    };
    let (_, line, _) = concern_line(&rss, &holders, None, Some(1000.0), None);
    assert!(!line.contains("outside"), "{line}");
    assert!(
        line.contains("; grew most over the history: Parking +6.7 MB in 3 min, now 8.6 MB"),
        "{line}"
    );
}
