//! The edit–compile–test loop and logs: `mix` tasks with parsed test results, and the log of a
//! running and of a crashed node.

mod common;

use common::{demo_app, kill, text, Server};
use serde_json::json;
use std::time::Duration;

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

#[tokio::test]
async fn logs_keep_output_and_logger_events_after_a_crash() {
    let server = Server::start();
    let mut c = server.client().await;
    let status = c
        .ok(
            "start",
            json!({"name": "logs", "path": demo_app(), "max_restarts": 0}),
        )
        .await;
    c.eval(
        "logs",
        r#"IO.puts(:user, "printed to stdout"); require Logger; Logger.error("logged by eval")"#,
    )
    .await;
    // A logger event from the application itself (not an eval): a crashing GenServer.
    c.eval(
        "logs",
        r#"spawn(fn -> GenServer.call(DemoApp.Counter, :no_such_call) end); :ok"#,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let events = c
        .ok("logs", json!({"name": "logs", "source": "logger"}))
        .await;
    let lines = events["lines"].as_array().unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l["text"].as_str().unwrap().contains("logged by eval") && l["eval"] == true),
        "{events}"
    );
    let errors = c
        .ok("logs", json!({"name": "logs", "min_level": "error", "skip_eval": true, "grep": "Counter|no_such_call"}))
        .await;
    assert!(
        errors["matched"].as_u64().unwrap() >= 1,
        "the crash report is logged: {errors}"
    );

    // After a crash (no restarts allowed) the log and exit stay readable.
    kill(status["os_pid"].as_u64().unwrap() as u32, libc::SIGKILL);
    let node = c
        .wait_status("logs", Duration::from_secs(20), |n| n["state"] == "failed")
        .await;
    assert_eq!(node["state"], "failed", "{node}");
    assert!(node["last_exit"].as_str().unwrap().contains("SIGKILL"));
    assert!(
        node["last_error"].as_str().is_some(),
        "status shows the last error: {node}"
    );
    let after = c
        .ok(
            "logs",
            json!({"name": "logs", "grep": "printed to stdout", "source": "stdout"}),
        )
        .await;
    assert_eq!(after["matched"], 1, "{after}");
    let since = c
        .ok("logs", json!({"name": "logs", "since": "10m", "tail": 5}))
        .await;
    assert!(since["lines"].as_array().unwrap().len() <= 5);
    let bad = c.err("logs", json!({"name": "logs", "grep": "("})).await;
    assert!(bad.contains("regular expression"), "{bad}");
}

#[tokio::test]
async fn recompile_hot_loads_changes_and_reports_errors() {
    // Work on a copy: the test edits source files.
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("demo_app");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(demo_app())
        .arg(&project)
        .status()
        .unwrap();
    assert!(copied.success());
    let server = Server::start();
    let mut c = server.client().await;
    c.ok("start", json!({"name": "hot", "path": project})).await;

    let nothing = c.ok("recompile", json!({"name": "hot"})).await;
    assert_eq!(nothing["status"], "noop", "{nothing}");

    let counter = project.join("lib/demo_app/counter.ex");
    let source = std::fs::read_to_string(&counter).unwrap();
    let edited = source.replacen(
        "use GenServer",
        "use GenServer\n\n  def hello, do: :hot_loaded",
        1,
    );
    assert_ne!(source, edited);
    std::fs::write(&counter, &edited).unwrap();
    let done = c.ok("recompile", json!({"name": "hot"})).await;
    assert_eq!(done["status"], "ok", "{done}");
    assert!(
        done["reloaded"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "DemoApp.Counter"),
        "{done}"
    );
    assert_eq!(
        c.eval("hot", "DemoApp.Counter.hello()").await["value"],
        ":hot_loaded"
    );

    std::fs::write(&counter, edited.replacen("def hello", "def hello(", 1)).unwrap();
    let broken = c.call("recompile", json!({"name": "hot"})).await;
    assert_eq!(broken["isError"], true, "{broken}");
    let data = &broken["structuredContent"];
    assert_eq!(data["status"], "error");
    let diagnostic = &data["diagnostics"][0];
    assert_eq!(diagnostic["severity"], "error");
    assert!(
        diagnostic["file"].as_str().unwrap().ends_with("counter.ex"),
        "{diagnostic}"
    );
    // The node keeps running its previous code.
    assert_eq!(
        c.eval("hot", "DemoApp.Counter.hello()").await["value"],
        ":hot_loaded"
    );
    let _ = text(&broken);
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn readiness_by_log_line_port_and_url_and_fast_failure() {
    let server = Server::start();
    let mut c = server.client().await;

    let by_log = json!({"name": "bylog", "ready": {"log": "listening n[o]w"},
        "command": ["erl", "-noshell", "-eval", "timer:sleep(300), io:format(\"listening now~n\")"]});
    let started = c.ok("start", by_log).await;
    assert_eq!(started["state"], "running");
    let seen = c
        .ok("logs", json!({"name": "bylog", "grep": "listening"}))
        .await;
    assert_eq!(
        seen["matched"], 1,
        "ready only once the line was there: {seen}"
    );

    let port = free_port();
    let listen = format!(
        "spawn(fun() -> timer:sleep(300), {{ok, L}} = gen_tcp:listen({port}, [{{reuseaddr, true}}, {{ip, {{127,0,0,1}}}}]), timer:sleep(infinity), L end)"
    );
    let by_port = json!({"name": "byport", "ready": {"port": port}, "command": ["erl", "-noshell", "-eval", listen]});
    c.ok("start", by_port).await;
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    let again = c
        .ok(
            "wait_ready",
            json!({"name": "byport", "ready": {"port": port}, "timeout_ms": 5000}),
        )
        .await;
    assert_eq!(again["state"], "running");

    let http_port = free_port();
    let http = format!(
        "spawn(fun() -> {{ok, L}} = gen_tcp:listen({http_port}, [binary, {{active, false}}, {{reuseaddr, true}}, {{ip, {{127,0,0,1}}}}]), \
         Loop = fun Loop() -> {{ok, S}} = gen_tcp:accept(L), _ = gen_tcp:recv(S, 0, 1000), \
         ok = gen_tcp:send(S, <<\"HTTP/1.0 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok\">>), gen_tcp:close(S), Loop() end, Loop() end)"
    );
    let url = format!("http://127.0.0.1:{http_port}/health");
    let by_url = json!({"name": "byurl", "ready": {"url": url}, "command": ["erl", "-noshell", "-eval", http]});
    c.ok("start", by_url).await;

    // A node that exits while `start` waits fails fast, with its exit status and last lines.
    let dying = json!({"name": "dying", "ready": {"log": "never printed"}, "start_timeout_ms": 60000,
        "command": ["erl", "-noshell", "-eval", "io:format(\"about to die~n\"), timer:sleep(500), halt(3)"]});
    let begun = std::time::Instant::now();
    let failed = c.err("start", dying).await;
    assert!(begun.elapsed() < Duration::from_secs(15), "failed fast");
    assert!(failed.contains("exit status 3"), "{failed}");
    assert!(failed.contains("about to die"), "{failed}");
    let bad = c
        .err(
            "wait_ready",
            json!({"name": "bylog", "ready": {"url": "https://x"}}),
        )
        .await;
    assert!(bad.contains("http://"), "{bad}");
}

#[tokio::test]
async fn the_log_survives_automatic_restarts() {
    let server = Server::start();
    let mut c = server.client().await;
    let first = c.start_demo("relog").await["os_pid"].as_u64().unwrap();
    c.eval("relog", r#"IO.puts(:user, "said before the crash")"#)
        .await;
    kill(first as u32, libc::SIGKILL);
    let node = c
        .wait_status("relog", Duration::from_secs(60), |n| {
            n["state"] == "running" && n["os_pid"].as_u64() != Some(first)
        })
        .await;
    assert_eq!(node["state"], "running", "{node}");
    let kept = c
        .ok(
            "logs",
            json!({"name": "relog", "grep": "said before the crash|restarting after"}),
        )
        .await;
    assert_eq!(kept["matched"], 2, "{kept}");
}
