//! `mix` tasks run for a project: `mix test` with each failure parsed (name, location,
//! message), a task name that is no task refused, a path with no project refused, and a task
//! that overruns its time stopped.

mod common;

use common::{demo_app, text, Server};
use serde_json::json;

#[tokio::test]
async fn mix_test_reports_each_failure() {
    let server = Server::start();
    let mut c = server.client().await;
    let result = c
        .call(
            "mix",
            json!({"path": demo_app(), "task": "test", "args": ["--include", "demo_failure"]}),
        )
        .await;
    assert_eq!(
        result["isError"], true,
        "a failing suite is an error: {result}"
    );
    let tests = &result["structuredContent"]["tests"];
    assert_eq!(tests["tests"], 3, "{result}");
    assert_eq!(tests["failures"], 1);
    let failure = &tests["failed"][0];
    assert_eq!(failure["name"], "test a deliberate failure (DemoAppTest)");
    assert!(failure["location"]
        .as_str()
        .unwrap()
        .starts_with("test/demo_app_test.exs:"));
    assert!(failure["message"].as_str().unwrap().contains("left:  2"));
    assert!(text(&result).contains("FAIL test a deliberate failure"));

    let passing = c
        .ok("mix", json!({"path": demo_app(), "task": "test"}))
        .await;
    assert_eq!(passing["exit_code"], 0);
    assert_eq!(passing["tests"]["failures"], 0);
    assert_eq!(passing["tests"]["excluded"], 1);

    let bad = c
        .err("mix", json!({"path": demo_app(), "task": "rm -rf"}))
        .await;
    assert!(bad.contains("invalid mix task"), "{bad}");
    let nowhere = c
        .err("mix", json!({"path": "/tmp", "task": "compile"}))
        .await;
    assert!(nowhere.contains("no mix.exs"), "{nowhere}");
    let slow = c
        .call("mix", json!({"path": demo_app(), "task": "run", "args": ["-e", ":timer.sleep(60_000)"], "timeout_ms": 1500}))
        .await;
    assert_eq!(slow["structuredContent"]["timed_out"], true, "{slow}");
}
