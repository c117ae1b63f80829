//! `diagnose` on a mailbox that fills: a plain `receive` loop (Ailments.Upstream) whose
//! clauses never take the `{:stats, _, _}` Ailments.Meter sends it 500 times a second. One
//! call names the holder, the receive that leaves the messages with its file:line, the shape
//! none of its clauses takes, and the function that sends them with its file:line; its next
//! call is that receive's code; once the history shows the memory the queue holds grow, that
//! growth is the mailbox's (its cause), not a finding of its own. Every node dies with its
//! server, also when an assertion fails.

mod common;

use common::{
    diagnose, diagnose_until, history_span, next_of, start_ailing, text, wait_until, Server,
};
use os_sup_mcp::node::diagnose::TREND_MIN_SPAN;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn a_mailbox_its_receive_leaves_is_found_with_the_shape_and_its_sender() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "jammed", "jammed").await;
    let (answer, report) = diagnose_until(&mut c, "jammed", "mailbox").await;
    let finding = &report["findings"][0];
    assert_eq!(finding["kind"], "mailbox", "{answer}");
    assert_eq!(finding["module"], "Ailments.Upstream", "{answer}");
    assert_eq!(finding["function"], "loop/1", "{answer}");
    let line = finding["line"].as_str().unwrap();
    // The holder, what is queued by shape, with its count.
    assert!(
        line.starts_with("mailbox: Ailments.Upstream has "),
        "{line}"
    );
    assert!(line.contains("{:stats, _, _} ×"), "{line}");
    // The receive it waits in, with its file:line, and what its clauses take.
    assert!(
        line.contains(
            "waiting in its receive at Ailments.Upstream.loop/1 lib/ailments/upstream.ex:16"
        ),
        "{line}"
    );
    assert!(line.contains("none takes {:stats, _, _}"), "{line}");
    // Who sends them: the process and its function, with file:line.
    assert!(
        line.contains("sent by Ailments.Meter (Ailments.Meter.report/1 lib/ailments/meter.ex:22, "),
        "{line}"
    );
    // Its next call is the receive's code, not `waits` (nothing to wait on).
    let next = &finding["next"];
    assert_eq!(
        *next,
        next_of(
            "source",
            json!({"name": "jammed", "target": "Ailments.Upstream.loop/1"})
        ),
        "{answer}"
    );
    let code = text(&c.call_next(next).await);
    assert!(code.contains("receive do"), "{code}");
    c.ok("stop", json!({"name": "jammed"})).await;
}

/// Once the history is long enough for rates, the memory the queue holds grows too: the
/// mailbox, its cause, stays the first finding.
#[tokio::test]
async fn the_mailbox_stays_first_when_the_history_shows_its_memory_grow() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "jammed", "jammed").await;
    wait_until(
        Duration::from_secs(60),
        "jammed: history enough for a rate",
        async || history_span(&c.vitals("jammed").await),
        |span| *span >= TREND_MIN_SPAN + Duration::from_secs(5),
    )
    .await;
    let (answer, report) = diagnose(&mut c, "jammed").await;
    let finding = &report["findings"][0];
    assert_eq!(finding["kind"], "mailbox", "{answer}");
    assert!(
        finding["line"]
            .as_str()
            .unwrap()
            .contains("; the node's memory grows with it: +"),
        "{answer}"
    );
    c.ok("stop", json!({"name": "jammed"})).await;
}
