//! Timers as a resource: a process that starts a `:timer.send_interval/3` per visit and never
//! cancels one makes the node do more work each second while its traffic is flat. The vitals
//! count the `:timer` module's timers; once the history shows them rising (10 a second, or
//! only one), one `diagnose` call's first finding is that growth, naming the application
//! function that starts them with file:line and the process they message; a healthy node
//! has no such finding. Every node dies with its server, also when an assertion fails.

mod common;

use common::{
    ailments, demo_app, diagnose, history_span, next_of, text, wait_until, Client, Server,
};
use os_sup_mcp::node::diagnose::TREND_MIN_SPAN;
use serde_json::{json, Value};
use std::time::Duration;

async fn start_visits(c: &mut Client, name: &str, ailment: &str, per_s: u32) {
    c.ok(
        "start",
        json!({"name": name, "path": ailments(),
               "env": {"AILMENT": ailment, "VISITS_PER_S": per_s.to_string()}}),
    )
    .await;
}

/// The newest value of meter `key` in a node's vitals.
/// OTP 27 and later run each `:timer.send_interval` as a process of its own
/// (`:timer.interval_loop/5`, spawned by `:timer_server`); OTP 25 keeps only its row.
fn per_interval_process() -> bool {
    common::otp_release() >= 27
}

fn newest(vitals: &Value, key: &str) -> Option<u64> {
    let column = vitals["keys"].as_array()?.iter().position(|k| k == key)?;
    vitals["rows"].as_array()?.last()?[column].as_u64()
}

#[tokio::test]
async fn intervals_nobody_cancels_are_a_growth_traced_to_the_function_that_starts_them() {
    let server = Server::start();
    let mut c = server.client().await;
    start_visits(&mut c, "visits", "slow_timers", 10).await;
    start_visits(&mut c, "visits1", "slow_timers", 1).await;
    start_visits(&mut c, "none", "none", 10).await;
    // Enough history for a rate at 10 a second, and for one a second to climb over the
    // meter's floor a few times.
    for (name, span) in [
        ("visits", TREND_MIN_SPAN + Duration::from_secs(6)),
        ("visits1", TREND_MIN_SPAN + Duration::from_secs(30)),
        ("none", TREND_MIN_SPAN),
    ] {
        wait_until(
            Duration::from_secs(90),
            &format!("{name}: history enough for a rate"),
            async || history_span(&c.vitals(name).await),
            |kept| *kept >= span,
        )
        .await;
    }
    // The vitals count them.
    let vitals = c.vitals("visits").await;
    let timers = newest(&vitals, "timers").expect("a timers meter");
    assert!(timers >= 150, "{timers} timers: {vitals}");

    let (answer, report) = diagnose(&mut c, "visits").await;
    let finding = &report["findings"][0];
    let line = finding["line"].as_str().unwrap();
    if per_interval_process() {
        // Each interval is a process of its own too: they lead (processes have a limit), and
        // the timers are the same code's.
        assert_eq!(finding["kind"], "leak", "{answer}");
        for named in [
            "started for the application by Ailments.Visits.track/1 lib/ailments/visits.ex:29 (:timer.send_interval/3, ",
            "; the same code also: timers (:timer) +",
        ] {
            assert!(line.contains(named), "{named}: {line}");
        }
    } else {
        assert_eq!(finding["kind"], "growth", "{answer}");
        assert_eq!(finding["meter"], "timers", "{answer}");
        let rate = finding["rate_per_s"].as_f64().unwrap();
        assert!((5.0..=15.0).contains(&rate), "{rate}/s: {answer}");
        for named in [
            "made by Ailments.Visits.track/1 lib/ailments/visits.ex:29 (:timer.send_interval/3, ",
            "intervals message Ailments.Visits",
        ] {
            assert!(line.contains(named), "{named}: {line}");
        }
    }
    // Its next call shows the code that starts them.
    let next = &finding["next"];
    assert_eq!(
        *next,
        next_of(
            "source",
            json!({"name": "visits", "target": "Ailments.Visits.track/1"})
        ),
        "{answer}"
    );
    let code = text(&c.call_next(next).await);
    assert!(code.contains(":timer.send_interval(1000, self()"), "{code}");

    // One a second is growth too.
    let (answer, report) = diagnose(&mut c, "visits1").await;
    let finding = &report["findings"][0];
    let line = finding["line"].as_str().unwrap();
    // (with a process per interval, at one a second either meter may cross its floor first)
    let named = "Ailments.Visits.track/1 lib/ailments/visits.ex:29 (:timer.send_interval/3, ";
    match (finding["kind"].as_str(), finding["meter"].as_str()) {
        (Some("leak"), _) if per_interval_process() => {
            assert!(
                line.contains(&format!("started for the application by {named}")),
                "{line}"
            )
        }
        (Some("growth"), Some("processes")) if per_interval_process() => {
            // The interval processes' rise, told by their group; the timers, by the code
            // that starts them, follow as a finding of their own (not yet one cause:
            // issue #57).
            assert!(
                line.contains(":timer_server spawn → :timer.interval_loop/5"),
                "{line}"
            );
            let timers = &report["findings"][1];
            assert_eq!(timers["meter"], "timers", "{answer}");
            let line = timers["line"].as_str().unwrap();
            assert!(line.contains(&format!("made by {named}")), "{line}");
        }
        _ => {
            assert_eq!(finding["meter"], "timers", "{answer}");
            assert!(line.contains(&format!("made by {named}")), "{line}");
        }
    }

    // A healthy node: no such finding, and the timers were checked.
    let (answer, report) = diagnose(&mut c, "none").await;
    assert_eq!(report["findings"], json!([]), "{answer}");
    assert!(
        answer.contains("ETS tables and their rows, timers,"),
        "{answer}"
    );
    for name in ["visits", "visits1", "none"] {
        c.ok("stop", json!({"name": name})).await;
    }
}

/// Work that grows with nothing counted growing: a process walks a list that gains ten
/// subscribers a second on each of its ticks (VM timers, which no table shows). Once the
/// history holds a minute of its work, `diagnose` names it with its rate then and now, and
/// its next call is the callback that takes its messages; where intervals grow, the work they make is said with them
/// (one finding per cause); healthy nodes' work (the demo app's too) does not rise.
#[tokio::test]
async fn work_that_rises_on_flat_input_is_a_finding_and_the_timers_say_theirs() {
    let server = Server::start();
    let mut c = server.client().await;
    start_visits(&mut c, "feeds", "slow_work", 10).await;
    c.ok(
        "start",
        json!({"name": "anon", "path": ailments(),
               "env": {"AILMENT": "slow_work", "FEEDS_NAMED": "false"}}),
    )
    .await;
    start_visits(&mut c, "visits", "slow_timers", 10).await;
    start_visits(&mut c, "none", "none", 10).await;
    c.ok("start", json!({"name": "demo", "path": demo_app()}))
        .await;
    for name in ["feeds", "anon", "visits", "none", "demo"] {
        wait_until(
            Duration::from_secs(150),
            &format!("{name}: a minute of work"),
            async || history_span(&c.vitals(name).await),
            |kept| *kept >= Duration::from_secs(85),
        )
        .await;
    }
    let (answer, report) = diagnose(&mut c, "feeds").await;
    let finding = &report["findings"][0];
    assert_eq!(finding["kind"], "work", "{answer}");
    let line = finding["line"].as_str().unwrap();
    assert!(
        line.starts_with("work: the reductions of Ailments.Feeds rose from "),
        "{line}"
    );
    assert!(line.contains("with the node's input flat"), "{line}");
    // What drives it: the same ticks, each costing more.
    assert!(line.contains("messages in "), "{line}");
    assert!(line.contains("(:tick ×"), "{line}");
    // Its work is its messages: next, the callback that takes them.
    let next = &finding["next"];
    assert_eq!(
        *next,
        next_of(
            "source",
            json!({"name": "feeds", "target": "Ailments.Feeds.handle_info/2"})
        ),
        "{answer}"
    );
    let code = text(&c.call_next(next).await);
    assert!(code.contains("lib/ailments/feeds.ex"), "{code}");

    // Not registered: the node's work rises, and the window names the process.
    let (answer, report) = diagnose(&mut c, "anon").await;
    let finding = &report["findings"][0];
    assert_eq!(finding["kind"], "work", "{answer}");
    let line = finding["line"].as_str().unwrap();
    assert!(
        line.starts_with("work: the reductions of the node rose from "),
        "{line}"
    );
    assert!(line.contains("; busiest in the window: "), "{line}");
    assert!(line.contains("Ailments.Feeds"), "{line}");
    assert_eq!(
        finding["next"],
        next_of(
            "source",
            json!({"name": "anon", "target": "Ailments.Feeds.handle_info/2"})
        ),
        "{answer}"
    );

    let (answer, report) = diagnose(&mut c, "visits").await;
    let finding = &report["findings"][0];
    let line = finding["line"].as_str().unwrap();
    if per_interval_process() {
        // (the interval processes lead; the timers are the same code's)
        assert_eq!(finding["kind"], "leak", "{answer}");
        assert!(
            line.contains("; the same code also: timers (:timer) +"),
            "{line}"
        );
    } else {
        assert_eq!(finding["meter"], "timers", "{answer}");
        let work = line.split_once("; the work they make: ").map(|w| w.1);
        assert!(
            work.is_some_and(|w| w.contains("Ailments.Visits ")),
            "{line}"
        );
    }
    // One finding per cause: the work is the timers'.
    assert!(!answer.contains("work: Ailments.Visits"), "{answer}");

    for name in ["none", "demo"] {
        let (answer, report) = diagnose(&mut c, name).await;
        assert_eq!(report["findings"], json!([]), "{answer}");
    }
    for name in ["feeds", "anon", "visits", "none", "demo"] {
        c.ok("stop", json!({"name": name})).await;
    }
}
