//! `diagnose` on rows that only grow: the ailments fixture's `registry_leak` has five
//! Ailments.Room register under "room:lobby" in a duplicate-key Registry on every join (4 a
//! second) and never unregister. Its bytes grow below any memory floor and its rows far below
//! the window's 100 a second; the keeper of the tables' rows (a reading every 2 s here) sees
//! them only grow: one call names the Registry's partition, the key, the rooms its rows name
//! and the function that writes them, and `ets` opens the table by the name it printed.
//! Every node dies with its server, also when an assertion fails.

mod common;

use common::{ailments, diagnose_until, next_call, Server};
use serde_json::json;

#[tokio::test]
async fn a_registry_key_that_only_grows_is_found_with_its_writer() {
    let server = Server::start();
    let mut c = server.client().await;
    c.ok(
        "start",
        json!({"name": "chat", "path": ailments(),
               "env": {"AILMENT": "registry_leak", "OS_SUP_HISTORY_EVERY_MS": "2000"}}),
    )
    .await;
    let (answer, report) = diagnose_until(&mut c, "chat", "rows").await;
    let finding = &report["findings"][0];
    assert_eq!(finding["kind"], "rows", "{answer}");
    let line = finding["line"].as_str().unwrap();
    assert!(
        line.starts_with("rows: Ailments.ChatRegistry.KeyPartition0 (unnamed, #Reference<"),
        "{line}"
    );
    assert!(line.contains(" duplicate_bag +"), "{line}");
    assert!(line.contains("; key \"room:lobby\" "), "{line}");
    assert!(
        line.contains(", naming 5 processes, Ailments.Room"),
        "{line}"
    );
    assert!(
        line.contains("; written by Ailments.Room.handle_cast/2 lib/ailments/chat.ex:"),
        "{line}"
    );
    let (tool, args) = next_call(&finding["next"]);
    assert_eq!(tool, "source", "{answer}");
    assert_eq!(args["target"], "Ailments.Room.handle_cast/2", "{answer}");
    // The table opens by the name the line printed.
    let printed = &line["rows: ".len()..line.find(") duplicate_bag").unwrap() + 1];
    let table = c.ok("ets", json!({"name": "chat", "table": printed})).await;
    assert_eq!(table["info"]["type"], "duplicate_bag", "{table}");
    c.ok("stop", json!({"name": "chat"})).await;
}
