//! `diagnose` on pauses: the ailments fixture's `gc_stall` keeps a large map on
//! Ailments.Catalog's heap and rewrites it 2000 times a second, so its full-sweep collections
//! pause it again and again. Nothing grows and no queue is long: one call names the paused
//! process with its pauses and heap, and its next call reads its state. A node whose system
//! monitor another process took cannot have its pauses watched: it is never called healthy,
//! and the answer says whose the monitor is. Every node dies with its server, also when an
//! assertion fails.

mod common;

use common::{diagnose, diagnose_until, first, next_call, start_ailing, text, Server};
use serde_json::json;

#[tokio::test]
async fn a_process_its_collections_pause_is_found_with_its_heap() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "stalled", "gc_stall").await;
    let (answer, report) = diagnose_until(&mut c, "stalled", "stall").await;
    let finding = first(&report, &answer, "stall", &["Ailments.Catalog"]);
    let line = finding["line"].as_str().unwrap();
    assert!(
        line.starts_with("stall: Ailments.Catalog paused "),
        "{line}"
    );
    assert!(line.contains(" garbage collection"), "{line}");
    assert!(line.contains("; heap "), "{line}");
    // Where it was, and what feeds it.
    assert!(
        line.contains("; in Ailments.Catalog.handle_cast/2 lib/ailments/catalog.ex:"),
        "{line}"
    );
    assert!(line.contains("{:put, _, _} ×"), "{line}");
    // Paused often, or once for long.
    let facts = &finding["facts"];
    assert!(
        facts["pauses"].as_u64() >= Some(3) || facts["pause_max_ms"].as_u64() >= Some(200),
        "{answer}"
    );
    assert!(
        finding["facts"]["heap_bytes"].as_u64() >= Some(4 << 20),
        "{answer}"
    );
    // The next call reads the paused process's state (in place: a summary, not a copy).
    let (tool, args) = next_call(&finding["next"]);
    assert_eq!(tool, "get_state", "{answer}");
    assert_eq!(args["pid"], finding["pid"], "{answer}");
    let state = text(&c.call_next(&finding["next"]).await);
    assert!(state.contains("MB"), "{state}");
    c.ok("stop", json!({"name": "stalled"})).await;
}

#[tokio::test]
async fn a_node_whose_system_monitor_is_taken_is_not_called_healthy() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "taken", "none").await;
    let owner = c
        .eval(
            "taken",
            r#"me = self()
            pid = spawn(fn -> :erlang.system_monitor(self(), [{:long_gc, 500}]); send(me, :taken); Process.sleep(:infinity) end)
            receive do :taken -> inspect(pid) after 5000 -> :timeout end"#,
        )
        .await;
    // `#PID<0.250.0>`: the numbers, as the answer writes them.
    let owner = owner["value"].as_str().unwrap();
    let owner = owner[owner.find('<').unwrap()..].trim_end_matches('"');
    let (answer, report) = diagnose(&mut c, "taken").await;
    assert_eq!(report["healthy"], false, "{answer}");
    assert!(!answer.starts_with("healthy"), "{answer}");
    assert!(
        answer.contains("pauses are not watched: the system monitor is ") && answer.contains(owner),
        "{answer}"
    );
    c.ok("stop", json!({"name": "taken"})).await;
}
