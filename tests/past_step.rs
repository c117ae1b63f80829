//! A rate describes now: a node's process count that jumps by 50,000 and then stays flat is a
//! step that has ended, not a leak. 35 s after the jump (where a slope over the last minute
//! alone reads one jump as a steady rise) and again a minute after it, `diagnose` reports no
//! leak, no growth and no time to a limit, for the processes and for every meter that jumped
//! with them (their memory, the atoms of the code the spawn loaded). The waits are read off
//! the node's own history.

mod common;

use common::{ailments, text, Client, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Idle processes spawned at once, kept alive.
const SPAWNED: u64 = 50_000;

/// `(at_ms, processes)` of each sample in the history the server keeps of `name` that has
/// the node's own meters.
async fn process_counts(c: &mut Client, name: &str) -> Vec<(u64, u64)> {
    let uri = format!("beam://{name}/vitals");
    let read = c.request("resources/read", json!({"uri": uri})).await;
    let vitals: Value = serde_json::from_str(
        read["result"]["contents"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{uri}: {read}")),
    )
    .expect("the vitals are JSON");
    let keys = vitals["keys"].as_array().expect("keys");
    let column = keys
        .iter()
        .position(|k| k == "processes")
        .expect("processes");
    vitals["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|row| Some((row[0].as_u64()?, row[column].as_u64()?)))
        .collect()
}

/// Polls the history of `name` until `done` holds for it (within `limit`); the history.
async fn history_until(
    c: &mut Client,
    name: &str,
    limit: Duration,
    what: &str,
    done: impl Fn(&[(u64, u64)]) -> bool,
) -> Vec<(u64, u64)> {
    let deadline = Instant::now() + limit;
    loop {
        let counts = process_counts(c, name).await;
        if done(&counts) {
            return counts;
        }
        assert!(Instant::now() < deadline, "{what}: {counts:?}");
        // Clock: paces the polls of the history; the deadline above bounds them.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// How long the history is, from its first sample to its newest.
fn span(counts: &[(u64, u64)]) -> Duration {
    match (counts.first(), counts.last()) {
        (Some(a), Some(b)) => Duration::from_millis(b.0 - a.0),
        _ => Duration::ZERO,
    }
}

/// How long ago, by the node's own samples, the count first reached `level`.
fn since(counts: &[(u64, u64)], level: u64) -> Option<Duration> {
    let newest = counts.last()?.0;
    let reached = counts.iter().find(|(_, n)| *n >= level)?.0;
    Some(Duration::from_millis(newest - reached))
}

/// `diagnose`: no leak, no growth and no time to any limit.
async fn no_leak_nor_limit(c: &mut Client, name: &str, when: &str) -> String {
    let result = c.call("diagnose", json!({"name": name})).await;
    let answer = text(&result);
    assert_ne!(result["isError"], json!(true), "{answer}");
    eprintln!("diagnose {when}:\n{answer}");
    let report = &result["structuredContent"];
    for finding in report["findings"].as_array().expect("findings") {
        assert_ne!(finding["kind"], "leak", "{when}: {answer}");
        assert_ne!(finding["kind"], "growth", "{when}: {answer}");
        assert!(finding["seconds_to_limit"].is_null(), "{when}: {answer}");
    }
    assert!(!answer.contains("full in"), "{when}: {answer}");
    assert!(!answer.contains("gone in"), "{when}: {answer}");
    // The rise is said as what it was: past, with no rate.
    assert!(
        answer.contains("processes rose by") && answer.contains("flat since"),
        "{when}: {answer}"
    );
    answer
}

#[tokio::test]
async fn a_count_that_jumped_and_stayed_flat_is_a_past_step_not_a_leak() {
    let server = Server::start();
    let mut c = server.client().await;
    c.ok(
        "start",
        json!({"name": "step", "path": ailments(), "env": {"AILMENT": "none"}}),
    )
    .await;
    // History enough for a rate before the jump, so that the jump is read as one.
    let before = history_until(
        &mut c,
        "step",
        Duration::from_secs(60),
        "history for a rate",
        |counts| span(counts) >= Duration::from_secs(20),
    )
    .await;
    let base = before.last().expect("a sample").1;
    let spawned = c
        .eval(
            "step",
            &format!(
                "for _ <- 1..{SPAWNED}, do: spawn(fn -> receive do :never -> :ok end end); \
                 :erlang.system_info(:process_count)"
            ),
        )
        .await;
    eprintln!("processes after the spawn: {}", spawned["value"]);
    let level = base + SPAWNED * 9 / 10;

    // Older than the quiet after which a lone rise is past.
    history_until(
        &mut c,
        "step",
        Duration::from_secs(90),
        "the step 35 s old",
        |counts| since(counts, level).is_some_and(|age| age >= Duration::from_secs(35)),
    )
    .await;
    no_leak_nor_limit(&mut c, "step", "35 s after the step").await;

    // A minute after it.
    let counts = history_until(
        &mut c,
        "step",
        Duration::from_secs(90),
        "the step a minute old",
        |counts| since(counts, level).is_some_and(|age| age >= Duration::from_secs(60)),
    )
    .await;
    let flat = counts.iter().rev().take(5).all(|(_, n)| *n >= level);
    assert!(flat, "the processes stay: {counts:?}");
    no_leak_nor_limit(&mut c, "step", "a minute after the step").await;
    c.ok("stop", json!({"name": "step"})).await;
}
