//! `diagnose` on a process that burns CPU without queueing, growing or failing anything
//! (Ailments.Auditor formats its big state with `inspect` and throws the text away, half a
//! scheduler or more): the finding is judged against the node (its share of the node's
//! reductions times the schedulers the node's work kept busy, or the reads of it that find it
//! running), not against a fixed count of reductions a second, and names the process and the
//! application function it runs, with file:line. A healthy idle node has no CPU finding (the
//! server's own walks are not the node's work). Every node dies with its server, also when an
//! assertion fails.

mod common;

use common::{diagnose, diagnose_until, start_ailing, Server};
use serde_json::json;

#[tokio::test]
async fn a_process_formatting_with_inspect_is_found_relative_to_the_node() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "busy", "busy_log").await;
    let (answer, report) = diagnose_until(&mut c, "busy", "cpu").await;
    let finding = &report["findings"][0];
    assert_eq!(finding["kind"], "cpu", "{answer}");
    assert_eq!(finding["module"], "Ailments.Auditor", "{answer}");
    let line = finding["line"].as_str().unwrap();
    assert!(line.starts_with("cpu: Ailments.Auditor "), "{line}");
    assert!(line.contains(" of a scheduler: "), "{line}");
    assert!(line.contains("% of the node's reductions"), "{line}");
    assert!(line.contains("lib/ailments/auditor.ex:"), "{line}");
    let next = &finding["next"];
    assert_eq!(next["tool"], "source", "{answer}");
    assert_eq!(next["arguments"]["name"], "busy", "{answer}");
    assert!(
        next["arguments"]["target"]
            .as_str()
            .unwrap()
            .starts_with("Ailments.Auditor."),
        "{answer}"
    );
    c.ok("stop", json!({"name": "busy"})).await;
}

#[tokio::test]
async fn an_idle_node_has_no_cpu_finding() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "idle", "none").await;
    for _ in 0..3 {
        let (answer, report) = diagnose(&mut c, "idle").await;
        let findings = report["findings"].as_array().cloned().unwrap_or_default();
        assert!(findings.iter().all(|f| f["kind"] != "cpu"), "{answer}");
    }
    c.ok("stop", json!({"name": "idle"})).await;
}
