//! `diagnose` on a hidden queue: the ailments fixture's `postponed` has Ailments.Parking, a
//! gen_statem, stay :closed and postpone every {:park, _} it is cast (200 a second). Its
//! mailbox stays empty while the events pile up in its loop: one call names the process, how
//! many it holds by shape, the state and the state function that keeps them, file:line, and
//! its next call is that function's code. Every node dies with its server, also when an
//! assertion fails.

mod common;

use common::{diagnose_until, first, next_call, start_ailing, text, Server};
use serde_json::json;

#[tokio::test]
async fn a_gen_statems_postponed_events_are_its_queue() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "parking", "postponed").await;
    let (answer, report) = diagnose_until(&mut c, "parking", "queue").await;
    let finding = first(&report, &answer, "queue", &["Ailments.Parking"]);
    let line = finding["line"].as_str().unwrap();
    assert!(
        line.starts_with("queue: Ailments.Parking (gen_statem, state :closed) holds "),
        "{line}"
    );
    assert!(
        line.contains(" postponed events, 0 in its mailbox: $gen_cast {:park, _} ×"),
        "{line}"
    );
    assert!(
        line.contains(
            "kept by its state function Ailments.Parking.closed/3 lib/ailments/parking.ex:"
        ),
        "{line}"
    );
    assert!(
        finding["facts"]["postponed"].as_u64() >= Some(1000),
        "{answer}"
    );
    assert_eq!(finding["function"], "closed/3", "{answer}");
    let (tool, args) = next_call(&finding["next"]);
    assert_eq!(tool, "source", "{answer}");
    assert_eq!(args["target"], "Ailments.Parking.closed/3", "{answer}");
    let code = text(&c.call_next(&finding["next"]).await);
    assert!(code.contains(":postpone"), "{code}");
    // get_state shows the hidden queue beside the mailbox.
    let state = c
        .ok(
            "get_state",
            json!({"name": "parking", "pid": "Ailments.Parking"}),
        )
        .await;
    assert!(
        state["queue"]["postponed"].as_u64() >= Some(1000),
        "{state}"
    );
    assert_eq!(state["queue"]["mailbox"], 0, "{state}");
    c.ok("stop", json!({"name": "parking"})).await;
}
