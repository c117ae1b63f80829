//! The walking skeleton end to end: the real server binary, real MCP sessions over TCP, real
//! child nodes from the fixture Mix projects. `eval` answers (and names errors as the language
//! prints them) without a slow eval blocking a fast one, `status` reports every field, bad
//! requests and unknown arguments get clear errors, and no child touches the user's cookie
//! file.

mod common;

use common::{demo_app, demo_node, fixture, text, timed, wait_until, Server};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn eval_on_a_started_mix_project() {
    let server = Server::start();
    let mut c = server.client().await;
    let user_flags = "-kernel demo_flag true";
    let status = c
        .ok(
            "start",
            json!({"name": "demo", "path": demo_app(), "env": {"ERL_AFLAGS": user_flags}}),
        )
        .await;
    assert_eq!(status["state"], "running");
    let os_pid = status["os_pid"].as_u64().unwrap();

    // The injection is invisible to the project: its own ERL_AFLAGS is back, ours are gone,
    // and the cookie is on no command line.
    let env = c
        .eval("demo", r#"{System.get_env("ERL_AFLAGS"), System.get_env("OS_SUP_COOKIE"), Application.get_env(:kernel, :demo_flag)}"#)
        .await;
    assert_eq!(env["value"], format!("{{\"{user_flags}\", nil, true}}"));
    let cookie = c.eval("demo", "Node.get_cookie()").await["value"]
        .as_str()
        .unwrap()
        .trim_start_matches(':')
        .to_string();
    assert!(cookie.len() >= 20, "{cookie}");
    let cmdline = std::fs::read(format!("/proc/{os_pid}/cmdline")).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains(&cookie));

    let out = c.eval("demo", "1 + 1").await;
    assert_eq!(out["value"], "2");
    assert_eq!(out["lang"], "elixir");

    let out = c
        .eval("demo", r#"IO.puts("hello from the node"); :done"#)
        .await;
    assert_eq!(out["value"], ":done");
    assert_eq!(out["output"], "hello from the node\n");

    // The project's own code is loaded and its app running.
    let out = c.eval("demo", "DemoApp.Counter.value()").await;
    assert!(
        out["value"].as_str().unwrap().parse::<i64>().is_ok(),
        "{out}"
    );

    let out = c
        .ok(
            "eval",
            json!({"name": "demo", "code": "lists:reverse([1,2,3])", "lang": "erlang"}),
        )
        .await;
    assert_eq!(out["value"], "[3,2,1]");

    // Pids, ports and references pasted as answers print them are the terms they name.
    let pid = c.eval("demo", "Process.whereis(:init)").await["value"]
        .as_str()
        .unwrap()
        .to_string();
    let code = format!("{{Process.alive?({pid}), \"{pid} in a string\"}}");
    assert_eq!(
        c.eval("demo", &code).await["value"],
        format!("{{true, \"{pid} in a string\"}}")
    );
    let port = c.eval("demo", "hd(Port.list())").await["value"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        c.eval("demo", &format!("is_port({port})")).await["value"],
        "true"
    );
    let erl_pid = pid.trim_start_matches("#PID");
    let out = c
        .ok(
            "eval",
            json!({"name": "demo", "code": format!("is_pid({erl_pid})."), "lang": "erlang"}),
        )
        .await;
    assert_eq!(out["value"], "true", "{erl_pid}");

    let syntax = c.err("eval", json!({"name": "demo", "code": "1 +"})).await;
    assert!(syntax.starts_with("syntax error"), "{syntax}");
    // Code that does not compile says why and where, whichever Elixir (1.15 and later log the
    // reason instead of raising it; 1.14 reads an unknown name as a call).
    let undefined = c
        .err("eval", json!({"name": "demo", "code": "x = 1\ny + x"}))
        .await;
    assert!(
        undefined.starts_with("compile error")
            && undefined.contains("eval:2")
            && (undefined.contains(r#"undefined variable "y""#)
                || undefined.contains("undefined function y/0"))
            // the compiler's own frames are no help
            && !undefined.contains("stacktrace"),
        "{undefined}"
    );
    let no_function = c
        .err("eval", json!({"name": "demo", "code": "foo(1)"}))
        .await;
    assert!(
        no_function.contains("undefined function foo/1") && no_function.contains("eval:1"),
        "{no_function}"
    );
    let raised = c
        .err("eval", json!({"name": "demo", "code": r#"raise "boom""#}))
        .await;
    assert!(raised.starts_with("** (RuntimeError) boom"), "{raised}");
    let thrown = c
        .err("eval", json!({"name": "demo", "code": "throw(:ball)"}))
        .await;
    assert!(thrown.starts_with("** (throw) :ball"), "{thrown}");
    // Exceptions are named as the language prints them, the stack trace kept.
    // (A match in the evaluated expression itself has no frame of its own: the trace says
    // the evaluated code raised.)
    for (code, lang, banner, has_stack) in [
        (
            "Map.fetch!(%{}, :a)",
            "elixir",
            "** (KeyError) key :a not found in: %{}",
            true,
        ),
        (
            "1 / 0",
            "elixir",
            "** (ArithmeticError) bad argument in arithmetic expression",
            true,
        ),
        ("1 / 0.", "erlang", "error:badarith", true),
        ("{a, _} = {b, 1}.", "erlang", "error:{badmatch,{b,1}}", true),
    ] {
        let failed = c
            .call("eval", json!({"name": "demo", "code": code, "lang": lang}))
            .await;
        let text = failed["content"][0]["text"].as_str().unwrap_or_default();
        // Elixir 1.20 prints the term a KeyError names on lines of its own (`key :a not found
        // in:\n\n    %{}`); 1.14-1.18 on the same line.
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.starts_with(banner), "{code}: {text}");
        assert_eq!(
            text.contains("--- stacktrace ---"),
            has_stack,
            "{code}: {text}"
        );
        let exception = failed["structuredContent"]["exception"].as_str();
        assert!(exception.is_some(), "{code}: {failed}");
    }

    let sleep = json!({"name": "demo", "code": ":timer.sleep(:infinity)", "timeout_ms": 1000});
    let (timeout, took) = timed(c.err("eval", sleep)).await;
    assert!(timeout.starts_with("timeout error"), "{timeout}");
    assert!(took < Duration::from_secs(10));
    // The node keeps answering after every failure above.
    assert_eq!(c.eval("demo", "1 + 1").await["value"], "2");
}

#[tokio::test]
async fn a_slow_eval_does_not_block_a_fast_one() {
    let (server, mut c) = demo_node("slow").await;
    let mut slow_client = server.client().await;
    let code = "Process.register(self(), :slow_eval); :timer.sleep(2000); :slept";
    let slow_eval = json!({"name": "slow", "code": code, "timeout_ms": 10000});
    let slow = tokio::spawn(async move { timed(slow_client.ok("eval", slow_eval)).await });
    // The fast eval starts once the slow one runs on the node.
    wait_until(
        Duration::from_secs(10),
        "the slow eval running",
        async || c.eval("slow", "Process.whereis(:slow_eval) != nil").await,
        |running| running["value"] == "true",
    )
    .await;
    let (fast, fast_took) = timed(c.eval("slow", "1 + 1")).await;
    assert_eq!(fast["value"], "2");
    let (slow_out, slow_took) = slow.await.unwrap();
    assert_eq!(slow_out["value"], ":slept");
    assert!(
        fast_took < slow_took,
        "fast {fast_took:?} waited for slow {slow_took:?}"
    );
    assert!(
        fast_took < Duration::from_millis(1500),
        "fast eval took {fast_took:?}"
    );
}

#[tokio::test]
async fn status_reports_every_field() {
    let server = Server::start();
    let mut c = server.client().await;
    let empty = c.call("status", json!({})).await;
    assert!(text(&empty).contains("no nodes"), "{empty}");
    c.start_demo("st").await;
    let status = c.ok("status", json!({"name": "st"})).await;
    let node = &status["nodes"][0];
    assert_eq!(node["name"], "st");
    assert_eq!(node["state"], "running");
    assert!(node["node"].as_str().unwrap().starts_with("st_"));
    assert!(node["node"].as_str().unwrap().ends_with("@127.0.0.1"));
    assert!(node["os_pid"].as_u64().is_some());
    assert!(node["uptime_ms"].as_u64().is_some());
    assert_eq!(node["restarts"], 0);
    assert_eq!(node["path"], demo_app().display().to_string());
    let info = &status["info"];
    assert_eq!(info["app"], "demo_app");
    assert_eq!(info["ready"], true);
    assert!(info["elixir_version"].as_str().unwrap().starts_with("1."));
    assert!(info["process_count"].as_u64().unwrap() > 10);
}

#[tokio::test]
async fn bad_requests_get_clear_errors() {
    let server = Server::start();
    let mut c = server.client().await;
    let missing = c
        .err("start", json!({"name": "x", "path": "/no/such/dir"}))
        .await;
    assert!(missing.contains("not usable"), "{missing}");
    let empty = tempfile::tempdir().unwrap();
    let no_mix = c
        .err("start", json!({"name": "x", "path": empty.path()}))
        .await;
    assert!(no_mix.contains("no mix.exs"), "{no_mix}");
    let bad_name = c
        .err("start", json!({"name": "../x", "path": demo_app()}))
        .await;
    assert!(bad_name.contains("invalid node name"), "{bad_name}");
    let unknown = c.err("eval", json!({"name": "ghost", "code": "1"})).await;
    assert!(unknown.contains("no node named `ghost`"), "{unknown}");
    let unknown_stop = c.err("stop", json!({"name": "ghost"})).await;
    assert!(unknown_stop.contains("no node named"), "{unknown_stop}");

    let broken = c
        .err(
            "start",
            json!({"name": "broken", "path": fixture("broken_app")}),
        )
        .await;
    assert!(broken.contains("failed to start"), "{broken}");
    assert!(broken.contains("exit status"), "{broken}");
    assert!(
        broken.contains("broken_app.ex"),
        "compile error output expected: {broken}"
    );
    assert_eq!(c.node_status("broken").await["state"], "failed");

    let crash = c
        .err(
            "start",
            json!({"name": "crash", "path": demo_app(), "env": {"DEMO_CRASH_ON_BOOT": "1"}}),
        )
        .await;
    assert!(crash.contains("demo crash on boot"), "{crash}");

    let slow = c
        .err(
            "start",
            json!({"name": "slow", "path": demo_app(), "start_timeout_ms": 100}),
        )
        .await;
    assert!(slow.contains("not ready within 100 ms"), "{slow}");
    assert_eq!(c.node_status("slow").await["state"], "failed");

    c.start_demo("dup").await;
    let dup = c
        .err("start", json!({"name": "dup", "path": demo_app()}))
        .await;
    assert!(dup.contains("already running"), "{dup}");

    // Arguments of the wrong type are a tool error the model can correct (MCP 2025-11-25);
    // an unknown tool is a JSON-RPC error. The session survives both.
    let wrong_type = c.err("eval", json!({"name": 5, "code": "1"})).await;
    assert!(wrong_type.contains("expected a string"), "{wrong_type}");
    let no_tool = c
        .request("tools/call", json!({"name": "nope", "arguments": {}}))
        .await;
    assert!(no_tool.get("error").is_some(), "{no_tool}");
    assert_eq!(c.eval("dup", "1 + 1").await["value"], "2");
}

#[tokio::test]
async fn children_never_touch_the_users_cookie_file() {
    let home = tempfile::tempdir().unwrap();
    let server = Server::start();
    let mut c = server.client().await;
    let env = json!({"HOME": home.path(), "XDG_CONFIG_HOME": home.path().join(".config")});
    c.ok(
        "start",
        json!({"name": "nocookie", "command": ["erl", "-noshell"], "env": env}),
    )
    .await;
    let out = c.eval("nocookie", "erlang:get_cookie()").await;
    assert_eq!(out["lang"], "erlang");
    assert!(
        std::fs::read_dir(home.path()).unwrap().next().is_none(),
        "no ~/.erlang.cookie read or written"
    );
}

#[tokio::test]
async fn unknown_arguments_are_errors_with_a_suggestion() {
    let server = Server::start();
    let mut c = server.client().await;
    let error = c
        .err("processes", json!({"name": "x", "sort": "memory"}))
        .await;
    assert!(
        error.contains("unknown argument sort") && error.contains("did you mean `sort_by`?"),
        "{error}"
    );
    assert!(
        error.contains("Valid:") && error.contains("window_ms"),
        "{error}"
    );
}
