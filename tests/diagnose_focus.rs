//! `diagnose` with `focus`: the symptom the user names ("Ailments.Catalog.get/1 is slow") is
//! the first finding, with its calls' times over the window and where the time of the process
//! serving it went. On the ailments fixture's `gc_stall` the server's collections take the
//! time (its next call is its state); on `contention` the callers queue behind each other at
//! a server that sleeps (its next call is that code). A focus that names nothing is a clear
//! error, and a pid or a registered name is a focus too. Every node dies with its server,
//! also when an assertion fails.

mod common;

use common::{diagnose_with, next_call, start_ailing, wait_until, Client, Server};
use serde_json::{json, Value};
use std::time::Duration;

/// The answer's budget with a focus: the focus line comes on top of the usual report.
const FOCUS_BYTES: usize = 2400;

async fn focused(c: &mut Client, name: &str, focus: &str) -> (String, Value) {
    diagnose_with(c, json!({"name": name, "focus": focus}), FOCUS_BYTES).await
}

fn focus_line(report: &Value, answer: &str) -> String {
    let finding = &report["findings"][0];
    assert_eq!(finding["kind"], "focus", "{answer}");
    finding["line"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_slow_call_to_a_collecting_server_is_explained_by_its_collections() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "catalog", "gc_stall").await;
    // The catalog's map is built in its init/1; its collections begin with the writer.
    let (answer, report) = wait_until(
        Duration::from_secs(60),
        "the catalog's collections in the focus",
        // A 500 ms window: a pause the watch sees (50 ms or more) is a tenth of it.
        async || {
            let args = json!({"name": "catalog", "focus": "Ailments.Catalog.get/1",
                              "window_ms": 500});
            diagnose_with(&mut c, args, FOCUS_BYTES).await
        },
        |(_, report)| report["findings"][0]["facts"]["gc_pct"].as_u64() >= Some(10),
    )
    .await;
    let line = focus_line(&report, &answer);
    assert!(line.starts_with("focus Ailments.Catalog.get/1: "), "{line}");
    assert!(line.contains(" returned in "), "{line}");
    assert!(line.contains("% garbage collection ("), "{line}");
    assert!(line.contains("served by Ailments.Catalog"), "{line}");
    let finding = &report["findings"][0];
    assert!(finding["facts"]["calls"].as_u64() >= Some(1), "{answer}");
    let (tool, args) = next_call(&finding["next"]);
    assert_eq!(tool, "get_state", "{answer}");
    assert!(args["pid"].as_str().is_some(), "{answer}");
    // The other findings are still there, after it.
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .skip(1)
            .all(|f| f["kind"] != "focus"),
        "{answer}"
    );
    c.ok("stop", json!({"name": "catalog"})).await;
}

#[tokio::test]
async fn a_slow_call_that_queues_behind_other_callers_says_where_it_waits() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "shop", "contention").await;
    let (answer, report) = focused(&mut c, "shop", "Ailments.Pricer.price/1").await;
    let line = focus_line(&report, &answer);
    // Each call waits ~1.2 s behind eleven others: longer than the window.
    assert!(line.contains("still waiting at the end"), "{line}");
    assert!(line.contains("served by Ailments.Pricer"), "{line}");
    assert!(line.contains("messages queued ahead of a caller"), "{line}");
    assert!(
        line.contains("asleep in Ailments.Pricer.ask_price/2 lib/ailments/pricer.ex:"),
        "{line}"
    );
    let finding = &report["findings"][0];
    assert!(
        finding["facts"]["queue_max"].as_u64() >= Some(5),
        "{answer}"
    );
    let (tool, args) = next_call(&finding["next"]);
    assert_eq!(tool, "source", "{answer}");
    assert_eq!(args["target"], "Ailments.Pricer.ask_price/2", "{answer}");

    // A registered name is a focus (no calls timed, its process sampled); so is a pid.
    let (answer, report) = focused(&mut c, "shop", "Ailments.Pricer").await;
    assert!(focus_line(&report, &answer).contains("served by Ailments.Pricer"));
    let pid = c
        .ok(
            "eval",
            json!({"name": "shop", "code": "inspect(Process.whereis(Ailments.Pricer))"}),
        )
        .await["value"]
        .as_str()
        .unwrap()
        .trim_matches('"')
        .to_string();
    let (answer, report) = focused(&mut c, "shop", &pid).await;
    assert!(
        focus_line(&report, &answer).starts_with(&format!("focus {pid}: ")),
        "{answer}"
    );

    // A focus that names nothing says what a focus is.
    let refused = c
        .err(
            "diagnose",
            json!({"name": "shop", "focus": "Ailments.Nowhere.price/1"}),
        )
        .await;
    assert!(
        refused.contains("Ailments.Nowhere.price/1 names no function"),
        "{refused}"
    );
    assert!(refused.contains("Mod.fun/arity"), "{refused}");
    let refused = c
        .err(
            "diagnose",
            json!({"name": "shop", "focus": "Ailments.Pricer.nope/1"}),
        )
        .await;
    assert!(refused.contains("has no function nope/1"), "{refused}");
    c.ok("stop", json!({"name": "shop"})).await;
}
