//! The shape of each tool's data (`structuredContent`), checked on a real node: the keys an
//! agent (or the dashboard) reads are there. Rust passes the helper's data through as JSON and
//! types it only where it reads it, so this contract is where a changed reply shows. A new
//! tool checks its data's keys in its own test (`CONTRIBUTING.md`, "Adding a tool"); the
//! keys here are those the dashboard and the diagnose's next calls read of the older tools.

mod common;

use common::demo_node;
use serde_json::{json, Value};

/// Fails naming the tool and the missing keys of `data`.
fn has(tool: &str, data: &Value, keys: &[&str]) {
    let missing: Vec<_> = keys.iter().filter(|k| data.get(**k).is_none()).collect();
    assert!(missing.is_empty(), "{tool} lacks {missing:?}: {data}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_answers_data_of_its_shape() {
    let (_server, mut c) = demo_node("shape").await;
    let node = |extra: Value| {
        let mut args = json!({"name": "shape"});
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        args
    };
    let cases: Vec<(&str, Value, &[&str])> = vec![
        (
            "processes",
            node(json!({"limit": 3})),
            &[
                "rows",
                "sort_by",
                "window_ms",
                "total",
                "scanned",
                "duration_us",
            ],
        ),
        (
            "processes",
            node(json!({"group_by": "initial_call", "limit": 3})),
            &["groups", "rows", "total"],
        ),
        (
            "process_info",
            node(json!({"pid": "DemoApp.Counter"})),
            &[
                "pid",
                "registered_name",
                "status",
                "initial_call",
                "current_stacktrace",
                "parent",
                "links",
                "memory",
                "reductions",
                "message_queue_len",
                "messages",
                "mailbox",
                "heap_size",
            ],
        ),
        (
            "get_state",
            node(json!({"pid": "DemoApp.Counter"})),
            &["pid", "module", "behaviour", "state", "duration_us"],
        ),
        (
            "supervision_tree",
            node(json!({})),
            &["roots", "node_count", "truncated", "duration_us"],
        ),
        (
            "waits",
            node(json!({"window_ms": 100})),
            &["chains", "deadlocks", "window_ms", "duration_us", "mode"],
        ),
        (
            "diagnose",
            node(json!({"window_ms": 100})),
            &["findings", "figures", "healthy", "window_ms", "duration_ms"],
        ),
        (
            "system_info",
            node(json!({})),
            &[
                "memory",
                "limits",
                "schedulers",
                "run_queue",
                "otp_release",
                "node",
            ],
        ),
        ("applications", node(json!({})), &["applications"]),
        (
            "applications",
            node(json!({"app": "demo_app"})),
            &["name", "vsn", "running", "env"],
        ),
        ("ets", node(json!({"limit": 3})), &["tables", "total"]),
        (
            "ports",
            node(json!({"limit": 2})),
            &["kinds", "total", "port_limit", "scanned", "limit"],
        ),
        (
            "docs",
            node(json!({"target": "lists:seq/2"})),
            &["target", "module", "kind", "entries"],
        ),
        (
            "source",
            node(json!({"target": "DemoApp.Counter"})),
            &["target", "module", "kind", "file", "entries"],
        ),
        (
            "callers",
            node(json!({"target": "DemoApp.Counter"})),
            &["target", "direction", "rows", "partial", "truncated"],
        ),
        (
            "find",
            node(json!({"query": "Counter", "limit": 3})),
            &["query", "hits", "total", "truncated"],
        ),
        (
            "system_monitor",
            node(json!({})),
            &["active", "settings", "events", "dropped"],
        ),
        (
            "trace",
            node(json!({"module": "DemoApp.Counter", "max_events": 5, "duration_ms": 200})),
            &[
                "session",
                "type",
                "pattern",
                "state",
                "max_events",
                "duration_ms",
            ],
        ),
        ("trace_results", node(json!({})), &["sessions"]),
    ];
    for (tool, args, keys) in cases {
        let data = c.ok(tool, args).await;
        has(tool, &data, keys);
        if tool == "diagnose" {
            for finding in data["findings"].as_array().unwrap() {
                has(
                    "diagnose finding",
                    finding,
                    &["kind", "line", "next", "pid"],
                );
                assert!(finding["next"]["tool"].is_string(), "{finding}");
                assert!(finding["next"]["arguments"].is_object(), "{finding}");
                // Its numbers as numbers, each named with its unit.
                let facts = finding["facts"].as_object().expect("facts");
                assert!(facts.values().all(Value::is_number), "{finding}");
            }
        }
    }
    // Reading one session back.
    let sessions = c.ok("trace_results", json!({"name": "shape"})).await;
    let session = sessions["sessions"][0]["session"]
        .as_str()
        .unwrap()
        .to_string();
    let read = c
        .ok("trace_results", json!({"session": session, "stop": true}))
        .await;
    has("trace_results", &read, &["session", "next_seq", "calls"]);
}
