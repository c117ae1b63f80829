//! Every read tool on a node holding every pathology at once (the safety matrix, small): each
//! answer within its bound and saying what it left out, and the node as it was afterwards (the
//! large state read in place is still whole and still changing). What the reads cost the node
//! (its peak memory, its round trips) is measured by `scripts/bench.sh safety`.

mod common;

use common::matrix::{self, NODE};
use common::{text, wait_until, Server};
use serde_json::json;
use std::time::Duration;

/// 1/20 of the full matrix: a 10 MB state (over the 8 MB past which `get_state` reads a state
/// in place), 50,000 queued messages, 500,000 rows, a 25 MB binary, 5,000 monitors, a 250 KB
/// log line.
const SCALE: f64 = 0.05;
/// Bound on every answer here.
const MAX_ANSWER: usize = 8192;

/// The reads that fail (saying why): a server stuck in a callback, a suspended one.
const FAILS: [&str; 2] = ["get_state 1 M mailbox", "get_state suspended"];

/// What the answer of a read (by its label in `matrix::reads`) must say of what it left out
/// or why it failed.
fn says(label: &str) -> &'static [&'static str] {
    match label {
        "get_state 200 MB state" => &["largest parts first:", ":items: list of 625000"],
        "get_state 500 MB binary" => &["binary of 25000000 bytes"],
        "get_state 1 M mailbox" => &["did not answer sys:get_state within 2000 ms: it is busy"],
        "get_state suspended" => &["is suspended"],
        "process_info 1 M mailbox" => &["not read: 50000 messages queued"],
        "process_info 1 M mailbox, max_messages 100000" => &["{:event, _} × 50000"],
        "process_info 100 k monitors" => &["monitors: [#PID<", "× 5000]"],
        "process_info monitored 100 k times" => &["monitored_by: [#PID<", "× 5000]"],
        "ets matrix_rows" => &["first 10 of 500000 rows"],
        "logs" => &["…[+"],
        _ => &[],
    }
}

#[tokio::test]
async fn every_read_on_every_pathology_is_bounded_and_says_what_it_left_out() {
    let server = Server::start();
    let mut c = server.client().await;
    matrix::start(&mut c, SCALE).await;
    let catalog = "s = :sys.get_state(Ailments.Matrix.Catalog); {length(s.items), s.puts}";
    let before = c.eval(NODE, catalog).await["value"].clone();

    for (label, tool, args) in matrix::reads() {
        if tool == "trace" {
            // The node has one tracer: the message trace before this one ends first.
            wait_until(
                Duration::from_secs(10),
                "the message trace to end",
                async || text(&c.call("trace_results", json!({"name": NODE})).await),
                |t| t.contains("stopped:"),
            )
            .await;
        }
        let result = c.call(tool, args).await;
        let answer = text(&result);
        assert!(
            answer.len() <= MAX_ANSWER,
            "{label}: {} bytes:\n{answer}",
            answer.len()
        );
        let fails = FAILS.contains(&label);
        assert_eq!(result["isError"] == true, fails, "{label}:\n{answer}");
        for needle in says(label) {
            assert!(
                answer.contains(needle),
                "{label} says {needle:?}:\n{answer}"
            );
        }
    }

    // The trace of the heavy server's casts: its 40 calls, told without their arguments.
    let page = wait_until(
        Duration::from_secs(10),
        "the trace of 40 casts to end",
        async || c.call("trace_results", json!({"name": NODE})).await,
        |r| text(r).contains("stopped: max_events (40 calls) reached"),
    )
    .await;
    let answer = text(&page);
    assert!(
        answer.len() <= MAX_ANSWER,
        "{} bytes:\n{answer}",
        answer.len()
    );
    assert!(
        answer.contains(
            "40 without arguments and result (their process's heap is over 8 MB; \
             Ailments.Matrix.Catalog: "
        ),
        "{answer}"
    );

    // The state read in place is whole, and the server went on taking casts.
    let after = c.eval(NODE, catalog).await["value"].clone();
    let parse = |v: &serde_json::Value| -> (u64, u64) {
        let s = v.as_str().unwrap().trim_matches(|c| c == '{' || c == '}');
        let (items, puts) = s.split_once(", ").unwrap();
        (items.parse().unwrap(), puts.parse().unwrap())
    };
    let (items0, puts0) = parse(&before);
    let (items1, puts1) = parse(&after);
    assert_eq!((items0, items1), (625_000, 625_000), "{before} → {after}");
    assert!(puts1 > puts0, "the server took no cast: {before} → {after}");
    c.ok("stop", json!({"name": NODE})).await;
}
