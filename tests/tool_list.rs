//! What every client reads first: the `tools/list` result, over a real TCP session. Its size
//! (compact JSON) is held to a budget per tool — a maximum for each tool's entry and for the
//! average entry, so a new tool fits without trimming others — and printed per tool and per
//! toolset; `--tools` picks toolsets, composes with `--read-only`, and refuses an unknown set
//! by listing the valid ones.

mod common;

use common::Server;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// Most bytes of compact JSON one tool's entry may take (the largest but `start` are ~700).
const MAX_PER_TOOL: usize = 800;
/// Most bytes the entries take on average (~410 with 30 tools): a new tool of average size
/// fits, and one up to the maximum fits while the others leave room.
const MAX_AVERAGE: usize = 450;
/// `start`'s own maximum (~1,345 B): its arguments are the whole start spec (`StartSpec`, also
/// a `[[node]]` of the configuration file): the project, how it runs, when it is ready, how it
/// restarts, a cluster. Without its six restart arguments it would still take ~945 B.
const START_MAX: usize = 1_400;
/// The whole list, every toolset included: a ceiling with room for ~8 more tools of average
/// size.
const MAX_TOTAL: usize = 16_000;

async fn list(server: &Server) -> Value {
    let mut c = server.client().await;
    let response = c.request("tools/list", json!({})).await;
    response["result"].clone()
}

fn size(value: &Value) -> usize {
    serde_json::to_string(value).expect("json").len()
}

fn names(list: &Value) -> BTreeSet<String> {
    common::names(&list["tools"])
        .into_iter()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn every_tool_fits_its_budget_and_every_schema_is_portable() {
    let server = Server::start();
    let list = list(&server).await;
    let tools = list["tools"].as_array().expect("tools");
    let total = size(&list);
    let mut sized: Vec<(usize, &str)> = tools
        .iter()
        .map(|tool| (size(tool), tool["name"].as_str().unwrap_or("?")))
        .collect();
    sized.sort_unstable_by(|a, b| b.cmp(a));
    let average = sized.iter().map(|(bytes, _)| bytes).sum::<usize>() / sized.len();
    let mut report = format!(
        "tools/list: {total} bytes (max {MAX_TOTAL}) for {} tools, {average} bytes a tool on \
         average (max {MAX_AVERAGE}); each at most {MAX_PER_TOOL} (start {START_MAX})\n",
        tools.len()
    );
    let mut over = Vec::new();
    for (bytes, name) in &sized {
        report += &format!("  {name:<18} {bytes:>5}\n");
        let max = if *name == "start" {
            START_MAX
        } else {
            MAX_PER_TOOL
        };
        if *bytes > max {
            over.push(format!("{name} is {bytes} bytes, over its {max}"));
        }
    }
    eprintln!("{report}");
    assert!(
        over.is_empty(),
        "a tool's entry is over its maximum: shorten its description or its arguments' \
         docs, or group arguments:\n{}\n{report}",
        over.join("\n")
    );
    assert!(
        average <= MAX_AVERAGE,
        "tools take {average} bytes on average, over {MAX_AVERAGE}:\n{report}"
    );
    assert!(
        total <= MAX_TOTAL,
        "tools/list is {total} bytes, over {MAX_TOTAL}:\n{report}"
    );
    for tool in tools {
        let text = tool.to_string();
        for banned in [
            "\"$ref\"",
            "\"$schema\"",
            "\"$defs\"",
            "\"format\":\"",
            "\"title\"",
        ] {
            assert!(!text.contains(banned), "{banned} in {text}");
        }
        assert!(tool.get("outputSchema").is_none(), "{text}");
        assert_eq!(tool["inputSchema"]["type"], "object", "{text}");
        let description = tool["description"].as_str().unwrap_or_default();
        assert!(
            !description.is_empty() && !description.contains('\n'),
            "{text}"
        );
        single_types(&tool["inputSchema"], &text);
        // Described once, in the server's instructions.
        assert!(
            tool["inputSchema"]["properties"].get("format").is_none(),
            "{text}"
        );
    }
    // ...and still taken where it applies, refused where it does not.
    let mut c = server.client().await;
    let unknown_node = c
        .err("processes", json!({"name": "nowhere", "format": "erlang"}))
        .await;
    assert!(unknown_node.contains("no node named"), "{unknown_node}");
    let not_taken = c.err("status", json!({"format": "erlang"})).await;
    assert!(not_taken.contains("unknown argument format"), "{not_taken}");
}

/// Every `type` in a schema is one string (no `["string", "null"]`).
fn single_types(schema: &Value, tool: &str) {
    match schema {
        Value::Object(object) => {
            for (key, value) in object {
                if key == "type" {
                    assert!(value.is_string(), "type {value} in {tool}");
                } else {
                    single_types(value, tool);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| single_types(item, tool)),
        _ => {}
    }
}

#[tokio::test]
async fn toolsets_pick_tools_and_compose_with_read_only() {
    let all = names(&list(&Server::start()).await);
    let mut sizes = String::new();
    let mut seen = BTreeSet::new();
    for set in ["core", "introspect", "trace", "dev", "code"] {
        let server = Server::start_with(&["--tools", set]);
        let list = list(&server).await;
        let offered = names(&list);
        assert!(
            offered.contains("status") && offered.contains("eval"),
            "{set}: {offered:?}"
        );
        sizes += &format!(
            "  --tools {set:<10} {:>2} tools {:>5} bytes\n",
            offered.len(),
            size(&list)
        );
        seen.extend(offered);
    }
    eprintln!("toolsets (core always in):\n{sizes}");
    assert_eq!(seen, all, "every tool is in some toolset");

    let core = names(&list(&Server::start_with(&["--tools", "core"])).await);
    assert!(
        !core.contains("trace") && !core.contains("processes"),
        "{core:?}"
    );
    let trace = names(&list(&Server::start_with(&["--tools", "trace"])).await);
    assert!(
        trace.contains("trace") && trace.contains("start"),
        "{trace:?}"
    );
    assert!(
        !trace.contains("processes") && !trace.contains("mix"),
        "{trace:?}"
    );

    let server = Server::start_with(&["--tools", "trace,introspect", "--read-only"]);
    let offered = names(&list(&server).await);
    for expected in ["status", "logs", "processes", "trace_results"] {
        assert!(offered.contains(expected), "{expected}: {offered:?}");
    }
    for absent in ["eval", "start", "trace", "mix", "docs"] {
        assert!(!offered.contains(absent), "{absent}: {offered:?}");
    }
    // What is not offered cannot be called either.
    let mut c = server.client().await;
    let response = c
        .request(
            "tools/call",
            json!({"name": "mix", "arguments": {"task": "test"}}),
        )
        .await;
    assert!(
        response.get("error").is_some() || response["result"]["isError"] == json!(true),
        "{response}"
    );
}

#[test]
fn an_unknown_toolset_is_refused_with_the_valid_ones() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_os_sup_mcp"))
        .args(["--tools", "core,tracing", "--stdio"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown toolset `tracing`; valid: core, introspect, trace, dev, code"),
        "{stderr}"
    );
}
