//! Log volume is a resource: `diagnose` names a node that floods its log (the ailments
//! fixture's `flood`: a GenServer writing ~350 warnings a second, each an inspect of a 200-key
//! map) as its first finding, with the function that writes the lines, its file:line, level and
//! rate, and the source of that function as the next call; a healthy node, after a few tool
//! calls and an eval that logs hundreds of lines (the server's own work), has no log finding,
//! and its figures say the log's volume was looked at; errors logged by the thousand for
//! messages a GenServer has no clause for are that flood, one finding. Every node dies with its
//! server, also when an assertion fails.

mod common;

use common::{diagnose, next_call, shows_next, start_ailing, text, wait_until, Client, Server};
use serde_json::{json, Value};
use std::time::Duration;

/// Waits until at least `lines` lines of the node's log match `grep`.
async fn logged(c: &mut Client, name: &str, grep: &str, lines: u64) {
    let matched = async || {
        let logs = c
            .ok("logs", json!({"name": name, "grep": grep, "tail": 1}))
            .await;
        logs["matched"].as_u64().unwrap_or(0)
    };
    let what = format!("{lines} lines of {name}'s log matching {grep}");
    wait_until(Duration::from_secs(30), &what, matched, |n| *n >= lines).await;
}

/// Errors logged for messages a GenServer has no clause for (replies of tasks it never
/// awaits): one finding, the flood, which quotes the message and says these are the node's
/// errors; no second `errors` finding for the same lines.
#[tokio::test]
async fn errors_a_flood_is_made_of_are_the_flood() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "unhandled", "unhandled").await;
    logged(&mut c, "unhandled", "received unexpected message", 1000).await;
    let (answer, report) = diagnose(&mut c, "unhandled").await;
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings[0]["kind"], "log_flood", "{answer}");
    assert!(
        findings.iter().all(|f| f["kind"] != "errors"),
        "the errors are the flood's: {answer}"
    );
    let evidence = findings[0]["line"].as_str().unwrap();
    assert!(evidence.contains("(error, "), "{evidence}");
    assert!(evidence.contains("by Ailments.Exporter"), "{evidence}");
    assert!(evidence.contains(": \"no_handle_info: {"), "{evidence}");
    assert!(
        evidence.contains("they are the node's error events ("),
        "{evidence}"
    );
}

#[tokio::test]
async fn a_log_flood_is_the_first_finding_with_the_function_that_writes_it() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "flood", "flood").await;
    // Two seconds of the flood (~700 lines) are in the log: it has lasted a whole second.
    logged(&mut c, "flood", "stale price for", 700).await;

    let (answer, report) = diagnose(&mut c, "flood").await;
    assert_eq!(report["healthy"], false, "{answer}");
    let finding = &report["findings"][0];
    assert_eq!(finding["kind"], "log_flood", "{answer}");
    assert_eq!(finding["module"], "Ailments.Flood", "{answer}");
    assert_eq!(finding["function"], "warn_stale/2", "{answer}");
    let evidence = finding["line"].as_str().unwrap();
    assert!(evidence.starts_with("log flood: "), "{evidence}");
    assert!(
        evidence.contains("from Ailments.Flood.warn_stale/2 lib/ailments/flood.ex:"),
        "{evidence}"
    );
    assert!(evidence.contains("(warning, "), "{evidence}");
    assert!(evidence.contains("by Ailments.Flood"), "{evidence}");
    // Its rate: about 350 lines a second.
    let rate: u64 = evidence["log flood: ".len()..]
        .split(' ')
        .next()
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("a rate first: {evidence}"));
    assert!((200..=500).contains(&rate), "{evidence}");
    // The figures say so too: no `errors 0.0/s` alone for a node writing 350 warnings a second.
    let figures = report["figures"]["log_lines_per_s"].as_f64().unwrap();
    assert!(figures >= 100.0, "{answer}");
    assert!(answer.contains(" lines/s (warning "), "{answer}");

    // The next call is the source of the function that writes the lines.
    let next = &finding["next"];
    assert!(shows_next(&answer, next), "{answer}");
    let (tool, args) = next_call(next);
    assert_eq!(tool, "source", "{next}");
    assert_eq!(args["target"], "Ailments.Flood.warn_stale/2", "{next}");
    let source = text(&c.call(&tool, args).await);
    assert!(source.contains("Logger.warning("), "{source}");
    c.ok("stop", json!({"name": "flood"})).await;
}

#[tokio::test]
async fn a_healthy_node_has_no_log_finding_after_tool_calls_and_a_loud_eval() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "quiet", "none").await;
    c.ok("supervision_tree", json!({"name": "quiet"})).await;
    c.ok("processes", json!({"name": "quiet", "window_ms": 200}))
        .await;
    c.ok("logs", json!({"name": "quiet"})).await;
    // The server's own work: an eval that logs 400 warnings over a second and a half, up to
    // the diagnosis (its lines are the server's, not the application's).
    c.eval(
        "quiet",
        "require Logger; for i <- 1..400, do: (Logger.warning(\"probe #{i}\"); Process.sleep(4))",
    )
    .await;
    let (answer, report) = diagnose(&mut c, "quiet").await;
    let kinds: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["kind"])
        .collect();
    assert!(!kinds.contains(&&json!("log_flood")), "{answer}");
    assert_eq!(report["findings"], json!([]), "{answer}");
    assert!(answer.starts_with("healthy"), "{answer}");
    // The log's volume was looked at, and the eval's lines are not the application's.
    assert!(answer.contains(", logs 0.0 lines/s, "), "{answer}");
    c.ok("stop", json!({"name": "quiet"})).await;
}
