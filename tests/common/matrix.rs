//! The safety matrix node: the ailments fixture with `AILMENT=matrix`, every pathology a read
//! tool must survive at once (see its `lib/ailments/matrix.ex`), and the read calls made on it
//! by the safety test and bench.

use super::{ailments, Client};
use serde_json::{json, Value};

pub const NODE: &str = "matrix";

/// Starts the matrix node at `scale` (1.0: a 200 MB state, a 1 M-message mailbox...); its
/// VM's OS pid.
pub async fn start(c: &mut Client, scale: f64) -> u32 {
    c.ok(
        "start",
        json!({"name": NODE, "path": ailments(), "start_timeout_ms": 300_000,
               "env": {"AILMENT": "matrix", "MATRIX_SCALE": format!("{scale:.4}")}}),
    )
    .await;
    c.eval(NODE, "System.pid()").await["value"]
        .as_str()
        .unwrap()
        .trim_matches('"')
        .parse()
        .unwrap()
}

fn n(args: Value) -> Value {
    let mut args = args;
    args["name"] = json!(NODE);
    args
}

fn pi(pid: &str) -> Value {
    n(json!({"pid": pid}))
}

/// Every read tool on every pathology: `(label, tool, arguments)`, labels at full scale.
pub fn reads() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("status", "status", json!({})),
        ("diagnose", "diagnose", n(json!({}))),
        ("processes (memory)", "processes", n(json!({}))),
        (
            "processes (queue)",
            "processes",
            n(json!({"sort_by": "message_queue_len"})),
        ),
        ("supervision_tree", "supervision_tree", n(json!({}))),
        ("waits", "waits", n(json!({}))),
        ("system_info", "system_info", n(json!({}))),
        ("applications", "applications", n(json!({}))),
        ("ports", "ports", n(json!({}))),
        ("ets (tables)", "ets", n(json!({}))),
        ("ets matrix_rows", "ets", n(json!({"table": "matrix_rows"}))),
        ("logs", "logs", n(json!({"tail": 50}))),
        (
            "process_info 200 MB state",
            "process_info",
            pi("Ailments.Matrix.Catalog"),
        ),
        (
            "process_info 1 M mailbox",
            "process_info",
            pi("Ailments.Matrix.Inbox"),
        ),
        (
            "process_info 1 M mailbox, max_messages 100000",
            "process_info",
            n(json!({"pid": "Ailments.Matrix.Inbox", "max_messages": 100_000, "messages": 20})),
        ),
        (
            "process_info table owner",
            "process_info",
            pi("Ailments.Matrix.Rows"),
        ),
        (
            "process_info 500 MB binary",
            "process_info",
            pi("Ailments.Matrix.Blob"),
        ),
        (
            "process_info 100 k monitors",
            "process_info",
            pi("Ailments.Matrix.Watchers"),
        ),
        (
            "process_info monitored 100 k times",
            "process_info",
            pi("Ailments.Matrix.Watched"),
        ),
        (
            "process_info suspended",
            "process_info",
            pi("Ailments.Matrix.Frozen"),
        ),
        (
            "process_info busy loop",
            "process_info",
            pi("Ailments.Matrix.Spinner"),
        ),
        (
            "process_info busy loop, profile 500 ms",
            "process_info",
            n(json!({"pid": "Ailments.Matrix.Spinner", "profile_ms": 500})),
        ),
        (
            "get_state 200 MB state",
            "get_state",
            pi("Ailments.Matrix.Catalog"),
        ),
        (
            "get_state 500 MB binary",
            "get_state",
            pi("Ailments.Matrix.Blob"),
        ),
        (
            "get_state 1 M mailbox",
            "get_state",
            pi("Ailments.Matrix.Inbox"),
        ),
        (
            "get_state 100 k monitors",
            "get_state",
            pi("Ailments.Matrix.Watchers"),
        ),
        (
            "get_state suspended",
            "get_state",
            pi("Ailments.Matrix.Frozen"),
        ),
        ("waits 1 M mailbox", "waits", pi("Ailments.Matrix.Inbox")),
        (
            "trace_messages 200 MB state (40)",
            "trace_messages",
            n(json!({"pid": "Ailments.Matrix.Catalog", "max_events": 40, "duration_ms": 5000})),
        ),
        (
            "trace 200 MB state's casts (40, 5 s)",
            "trace",
            n(
                json!({"module": "Ailments.Matrix.Catalog", "function": "handle_cast",
                     "max_events": 40, "duration_ms": 5000}),
            ),
        ),
        (
            "eval of a 1 M-element list (code the agent runs)",
            "eval",
            n(json!({"code": "Enum.to_list(1..1_000_000)"})),
        ),
    ]
}
