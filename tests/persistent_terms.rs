//! `persistent_terms` on a real node: a large term put by the test comes first with its key and
//! size, the rest are counted, and `limit` is held to its range.

mod common;

use common::{demo_node, text};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_terms_largest_first() {
    let (_server, mut c) = demo_node("pterms").await;
    c.ok(
        "eval",
        json!({"name": "pterms", "code": ":persistent_term.put(:os_sup_big, List.duplicate(1, 10_000))"}),
    )
    .await;
    let result = c
        .call("persistent_terms", json!({"name": "pterms", "limit": 2}))
        .await;
    let answer = text(&result);
    eprintln!("{answer}");
    let data = &result["structuredContent"];
    for key in ["count", "memory", "limit", "terms"] {
        assert!(data.get(key).is_some(), "{key}: {data}");
    }
    let terms = data["terms"].as_array().unwrap();
    assert_eq!(terms.len(), 2, "{answer}");
    assert_eq!(terms[0]["key"], ":os_sup_big", "{answer}");
    // 10 000 cons cells of two words each.
    assert!(terms[0]["bytes"].as_u64() >= Some(160_000), "{answer}");
    assert!(data["count"].as_u64() > Some(2), "{answer}");
    assert!(answer.contains("more of"), "{answer}");

    let clamped = c
        .ok("persistent_terms", json!({"name": "pterms", "limit": 500}))
        .await;
    assert_eq!(clamped["limit"], 50, "{clamped}");
}
