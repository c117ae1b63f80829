//! The stdio transport: one session on stdin/stdout, nothing but protocol on stdout, and every
//! node stopped when the client closes stdin.

mod common;

use common::{tool_names, StdioServer};
use serde_json::{json, Value};

#[test]
fn stdio_session_starts_evals_and_cleans_up() {
    let mut server = StdioServer::start(&["--log-level", "debug"]);
    let tag = format!("_{:x}@127.0.0.1", server.child.id());
    server.send_initialize();
    let init = server.reply(1);
    assert_eq!(init["result"]["serverInfo"]["name"], "os_sup_mcp");
    let mut id = 1;
    let mut request = |method: &str, params: Value| -> Value {
        id += 1;
        server.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        server.reply(id)
    };
    let names = tool_names(&request("tools/list", json!({})));
    for tool in ["eval", "restart", "start", "status", "stop"] {
        assert!(
            names.iter().any(|n| n == tool),
            "{tool} missing from {names:?}"
        );
    }
    let started = request(
        "tools/call",
        json!({"name": "start", "arguments": {"name": "io", "path": common::demo_app()}}),
    );
    assert_eq!(
        started["result"]["structuredContent"]["state"], "running",
        "{started}"
    );
    let out = request(
        "tools/call",
        json!({"name": "eval", "arguments": {"name": "io", "code": "6 * 7"}}),
    );
    assert_eq!(out["result"]["structuredContent"]["value"], "42", "{out}");
    assert_eq!(common::beams_matching(&tag).len(), 1);

    let status = server.close(); // end of session: the server stops its nodes and exits
    assert!(
        status.is_some_and(|s| s.success()),
        "server exits cleanly after stdin closes"
    );
    assert!(
        common::beams_matching(&tag).is_empty(),
        "nodes are stopped with the server"
    );
}
