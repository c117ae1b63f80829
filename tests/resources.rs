//! Resources, prompts and completion over a real MCP session (TCP) with a real demo node:
//! declared in `initialize`, listed, read, subscribed to (an update after a `Logger.error`
//! evaluated on the node), and completed.

mod common;

use common::{demo_node, Server};
use serde_json::{json, Value};
use std::time::Duration;

fn uris(list: &Value, key: &str, field: &str) -> Vec<String> {
    list["result"][key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {list}"))
        .iter()
        .map(|r| r[field].as_str().unwrap_or_default().to_string())
        .collect()
}

fn contents_text(read: &Value) -> String {
    read["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {read}"))
        .to_string()
}

fn error_message(response: &Value) -> String {
    response["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error, got {response}"))
        .to_string()
}

#[tokio::test]
async fn resources_are_declared_listed_and_read() {
    let server = Server::start();
    let mut client = server.client().await;
    let capabilities = &client.initialized["capabilities"];
    assert_eq!(
        capabilities["resources"]["subscribe"],
        json!(true),
        "{capabilities}"
    );
    assert!(capabilities["prompts"].is_object(), "{capabilities}");
    assert!(capabilities["completions"].is_object(), "{capabilities}");
    assert!(capabilities["tools"].is_object(), "{capabilities}");
    assert!(capabilities.get("logging").is_none(), "{capabilities}");

    client.start_demo("res").await;
    let list = client.request("resources/list", json!({})).await;
    let listed = uris(&list, "resources", "uri");
    assert_eq!(
        listed,
        ["beam://res/logs", "beam://res/tree", "beam://res/vitals"],
        "{list}"
    );
    let templates = client.request("resources/templates/list", json!({})).await;
    assert_eq!(
        uris(&templates, "resourceTemplates", "uriTemplate"),
        [
            "beam://{name}/logs",
            "beam://{name}/tree",
            "beam://{name}/vitals",
            "beam://{name}/profile/{pid}"
        ]
    );

    // The vital signs the server keeps: JSON columns, a sample every 2 s.
    let vitals = client.vitals_of_at_least("res", 2).await;
    let keys = vitals["keys"].as_array().unwrap();
    assert!(keys.contains(&json!("memory_binary")) && keys.contains(&json!("os_fds")));
    let rows = vitals["rows"].as_array().unwrap();
    assert!(rows.len() >= 2, "{vitals}");
    let total = keys.iter().position(|k| k == "memory_total").unwrap();
    assert!(
        rows.last().unwrap()[total].as_u64().unwrap() > 1_000_000,
        "{vitals}"
    );

    let tree = client.read_resource("beam://res/tree").await;
    let tree_text = contents_text(&tree);
    assert!(tree_text.contains("DemoApp.Supervisor"), "{tree_text}");
    let logs = client.read_resource("beam://res/logs").await;
    assert!(contents_text(&logs).contains("next since="), "{logs}");

    let unknown_node = client.read_resource("beam://nope/logs").await;
    let message = error_message(&unknown_node);
    assert!(
        message.contains("no node named `nope`") && message.contains("res"),
        "{message}"
    );
    let unknown_uri = client.read_resource("beam://res/heap").await;
    assert!(
        error_message(&unknown_uri).contains("beam://NAME/logs"),
        "{unknown_uri}"
    );
}

/// `beam://NAME/profile/PID`: where a busy process spends its time, in the folded-stacks
/// format (`root;…;leaf count` per line), by registered name or by pid (percent-escaped as a
/// client expanding the template sends it); a process that does not exist is an error that
/// says so, and a profile cannot be subscribed to.
#[tokio::test]
async fn a_profile_resource_folds_a_process_stacks() {
    let server = Server::start();
    let mut client = server.client().await;
    client.start_ailment("prof", "cpu").await;
    let read = client
        .read_resource("beam://prof/profile/Ailments.Indexer")
        .await;
    assert_eq!(
        read["result"]["contents"][0]["mimeType"],
        json!("text/plain"),
        "{read}"
    );
    let folded = contents_text(&read);
    let lines: Vec<(&str, u64)> = folded
        .lines()
        .map(|line| {
            let (stack, count) = line.rsplit_once(' ').expect("`stack count`");
            (stack, count.parse().expect("a count"))
        })
        .collect();
    assert!(!lines.is_empty(), "the indexer was caught running");
    assert!(
        lines.windows(2).all(|w| w[0].1 >= w[1].1),
        "most samples first: {folded}"
    );
    let in_rebuild: u64 = lines
        .iter()
        .filter(|(stack, _)| {
            stack
                .split(';')
                .any(|frame| frame == "Elixir.Ailments.Indexer:rebuild/1")
        })
        .map(|(_, count)| count)
        .sum();
    let all: u64 = lines.iter().map(|(_, count)| count).sum();
    assert!(
        in_rebuild * 2 > all,
        "rebuild/1 is on the stack in most samples ({in_rebuild} of {all}): {folded}"
    );

    let info = client
        .ok(
            "process_info",
            json!({"name": "prof", "pid": "Ailments.Indexer", "messages": 0}),
        )
        .await;
    let pid = info["pid"].as_str().expect("a pid").to_string();
    let escaped = pid
        .replace('#', "%23")
        .replace('<', "%3C")
        .replace('>', "%3E");
    let by_pid = client
        .read_resource(&format!("beam://prof/profile/{escaped}"))
        .await;
    assert!(
        contents_text(&by_pid).contains("Elixir.Ailments.Indexer:"),
        "{by_pid}"
    );

    let missing = client
        .read_resource("beam://prof/profile/Ailments.Nobody")
        .await;
    assert!(
        error_message(&missing).contains("no process is registered as Ailments.Nobody"),
        "{missing}"
    );
    let subscribed = client
        .request(
            "resources/subscribe",
            json!({"uri": "beam://prof/profile/Ailments.Indexer"}),
        )
        .await;
    assert!(
        error_message(&subscribed).contains("read it again"),
        "{subscribed}"
    );
}

#[tokio::test]
async fn a_subscription_hears_of_new_error_lines() {
    let (_server, mut client) = demo_node("sub").await;
    let refused = client
        .request("resources/subscribe", json!({"uri": "beam://ghost/logs"}))
        .await;
    assert!(
        error_message(&refused).contains("no node named `ghost`"),
        "{refused}"
    );

    let subscribed = client
        .request("resources/subscribe", json!({"uri": "beam://sub/logs"}))
        .await;
    assert!(subscribed.get("result").is_some(), "{subscribed}");
    client
        .eval(
            "sub",
            r#"require Logger; Logger.error("resource-update-marker")"#,
        )
        .await;
    let update = client
        .notification("notifications/resources/updated", common::CALL_TIMEOUT)
        .await
        .expect("an update notification after an error line");
    assert_eq!(
        update["params"]["uri"],
        json!("beam://sub/logs"),
        "{update}"
    );
    let logs = client.read_resource("beam://sub/logs").await;
    assert!(
        contents_text(&logs).contains("resource-update-marker"),
        "{logs}"
    );

    let unsubscribed = client
        .request("resources/unsubscribe", json!({"uri": "beam://sub/logs"}))
        .await;
    assert!(unsubscribed.get("result").is_some(), "{unsubscribed}");
    // Once the throttle window has passed and what was sent before is read, an unsubscribed
    // resource stays quiet.
    // Clock: the 1 s throttle window must pass.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let updated = "notifications/resources/updated";
    while client
        .notification(updated, Duration::from_millis(100))
        .await
        .is_some()
    {}
    client
        .eval(
            "sub",
            r#"require Logger; Logger.error("after-unsubscribe")"#,
        )
        .await;
    let quiet = client.notification(updated, Duration::from_secs(2)).await;
    assert!(quiet.is_none(), "no update after unsubscribe: {quiet:?}");
}

#[tokio::test]
async fn prompts_are_listed_fetched_and_node_names_completed() {
    let (_server, mut client) = demo_node("prompted").await;

    let list = client.request("prompts/list", json!({})).await;
    let names = uris(&list, "prompts", "name");
    for prompt in ["diagnose_crash", "find_bottleneck", "fix_failing_test"] {
        assert!(names.iter().any(|n| n == prompt), "{prompt} in {list}");
    }
    let got = client
        .request(
            "prompts/get",
            json!({"name": "diagnose_crash", "arguments": {"name": "prompted"}}),
        )
        .await;
    let text = got["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no prompt text: {got}"))
        .to_string();
    assert!(text.contains("node `prompted` is running"), "{text}");
    for tool in ["`status`", "`logs`", "`supervision_tree`", "`process_info`"] {
        assert!(text.contains(tool), "{tool} in {text}");
    }
    let with_test = client
        .request(
            "prompts/get",
            json!({"name": "fix_failing_test", "arguments": {"name": "prompted", "test": "test/demo_test.exs:3"}}),
        )
        .await;
    assert!(
        with_test
            .to_string()
            .contains(r#"args [\"test/demo_test.exs:3\"]"#),
        "{with_test}"
    );
    let missing = client
        .request(
            "prompts/get",
            json!({"name": "find_bottleneck", "arguments": {}}),
        )
        .await;
    assert!(error_message(&missing).contains("`name`"), "{missing}");
    let unknown = client
        .request("prompts/get", json!({"name": "nope", "arguments": {}}))
        .await;
    assert!(
        error_message(&unknown).contains("diagnose_crash"),
        "{unknown}"
    );

    let complete = |reference: Value, value: &str| json!({"ref": reference, "argument": {"name": "name", "value": value}});
    let prompt_ref = json!({"type": "ref/prompt", "name": "find_bottleneck"});
    let done = client
        .request("completion/complete", complete(prompt_ref.clone(), "pro"))
        .await;
    assert_eq!(
        done["result"]["completion"]["values"],
        json!(["prompted"]),
        "{done}"
    );
    let none = client
        .request("completion/complete", complete(prompt_ref, "zz"))
        .await;
    assert_eq!(none["result"]["completion"]["values"], json!([]), "{none}");
    let template_ref = json!({"type": "ref/resource", "uri": "beam://{name}/tree"});
    let done = client
        .request("completion/complete", complete(template_ref, ""))
        .await;
    assert_eq!(
        done["result"]["completion"]["values"],
        json!(["prompted"]),
        "{done}"
    );
}
