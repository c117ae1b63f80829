//! Bounded tracing on a live node: limits enforced on the node, nothing left behind, dangerous
//! or conflicting traces refused, message tracing and the system monitor.

mod common;

use common::{Client, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Nothing traced remains on the Counter: no pattern, no process flags.
async fn assert_clean(c: &mut Client, name: &str) {
    let check = "{:erlang.trace_info({DemoApp.Counter, :handle_call, 3}, :traced), \
                 :erlang.trace_info(Process.whereis(DemoApp.Counter), :flags)}";
    let out = c.eval(name, check).await;
    assert_eq!(
        out["value"], "{{:traced, false}, {:flags, []}}",
        "trace left behind"
    );
}

async fn results(c: &mut Client, session: &str) -> Value {
    c.ok("trace_results", json!({"session": session, "limit": 1000}))
        .await
}

async fn wait_stopped(c: &mut Client, session: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = results(c, session).await;
        if r["state"] == "stopped" || Instant::now() > deadline {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls until the session holds `calls` call events (events reach the tracer asynchronously).
async fn wait_calls(c: &mut Client, session: &str, calls: usize) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = results(c, session).await;
        if events_of(&r, "call").len() >= calls || Instant::now() > deadline {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn events_of<'a>(r: &'a Value, kind: &str) -> Vec<&'a Value> {
    r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .collect()
}

#[tokio::test]
async fn call_traces_stop_at_their_limits_and_clean_up() {
    let server = Server::start();
    let mut c = server.client().await;
    c.start_demo("tr").await;

    let started = c
        .ok(
            "trace",
            json!({"name": "tr", "module": "DemoApp.Counter", "function": "handle_call",
                            "returns": true, "max_events": 5, "duration_ms": 20000}),
        )
        .await;
    let session = started["session"].as_str().unwrap().to_string();
    assert!(session.starts_with("tr:"), "{started}");
    c.eval("tr", "for _ <- 1..3, do: DemoApp.Counter.increment()")
        .await;
    let r = wait_calls(&mut c, &session, 3).await;
    assert_eq!(events_of(&r, "call").len(), 3, "{r}");
    assert_eq!(events_of(&r, "return").len(), 3, "{r}");
    assert!(
        events_of(&r, "call")[0]["text"]
            .as_str()
            .unwrap()
            .contains("handle_call(:increment"),
        "{r}"
    );

    c.eval("tr", "for _ <- 1..20, do: DemoApp.Counter.increment()")
        .await;
    let r = wait_stopped(&mut c, &session).await;
    assert_eq!(r["state"], "stopped", "{r}");
    assert_eq!(r["stop_reason"], "max_events");
    assert_eq!(events_of(&r, "call").len(), 5, "exactly max_events calls");
    assert_clean(&mut c, "tr").await;

    // The duration limit.
    let short = c
        .ok("trace", json!({"name": "tr", "module": "DemoApp.Counter", "max_events": 100, "duration_ms": 300}))
        .await;
    let short = short["session"].as_str().unwrap().to_string();
    let r = wait_stopped(&mut c, &short).await;
    assert_eq!(r["stop_reason"], "duration", "{r}");
    assert_clean(&mut c, "tr").await;
    let list = c.ok("traces", json!({"name": "tr"})).await;
    assert!(list.to_string().contains(&short), "{list}");
}

#[tokio::test]
async fn dangerous_and_conflicting_traces_are_refused() {
    let server = Server::start();
    let mut c = server.client().await;
    c.start_demo("tr2").await;
    let hot = c
        .err(
            "trace",
            json!({"name": "tr2", "module": "lists", "max_events": 10}),
        )
        .await;
    assert!(hot.contains("force"), "{hot}");
    let missing = c
        .err(
            "trace",
            json!({"name": "tr2", "module": "No.Such", "max_events": 10}),
        )
        .await;
    assert!(!missing.is_empty());
    let unbounded = c
        .err(
            "trace",
            json!({"name": "tr2", "module": "DemoApp.Counter", "max_events": 0}),
        )
        .await;
    assert!(unbounded.contains("max_events"), "{unbounded}");

    let first = c
        .ok("trace", json!({"name": "tr2", "module": "DemoApp.Counter", "max_events": 10, "duration_ms": 20000}))
        .await;
    let session = first["session"].as_str().unwrap().to_string();
    let second = c
        .err(
            "trace",
            json!({"name": "tr2", "module": "DemoApp.Cache", "max_events": 10}),
        )
        .await;
    assert!(
        second.contains("is running") && second.contains("trace_stop"),
        "{second}"
    );
    c.ok("trace_stop", json!({"session": session})).await;
    assert_eq!(results(&mut c, &session).await["stop_reason"], "stopped");
    assert_clean(&mut c, "tr2").await;

    // Someone else's tracer (dbg) is never stolen.
    c.ok("eval", json!({"name": "tr2", "code": "{:ok, _} = :dbg.tracer(); :dbg.p(Process.whereis(DemoApp.Cache), :m); :ok"}))
        .await;
    let taken = c
        .err(
            "trace",
            json!({"name": "tr2", "module": "DemoApp.Counter", "max_events": 10}),
        )
        .await;
    assert!(
        taken.to_lowercase().contains("busy") || taken.contains("dbg"),
        "{taken}"
    );
    c.eval("tr2", ":dbg.stop()").await;
}

#[tokio::test]
async fn a_lost_connection_removes_every_trace() {
    let server = Server::start();
    let mut c = server.client().await;
    c.start_demo("tr3").await;
    let started = c
        .ok("trace", json!({"name": "tr3", "module": "DemoApp.Counter", "max_events": 1000, "duration_ms": 60000}))
        .await;
    let session = started["session"].as_str().unwrap().to_string();
    c.eval("tr3", "DemoApp.Counter.increment()").await;
    // The node drops our connection: the tracer sees the sidecar go and removes everything.
    let _ = c
        .call(
            "eval",
            json!({"name": "tr3", "code": "for n <- Node.list(:hidden), do: Node.disconnect(n)"}),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_clean(&mut c, "tr3").await;
    let r = results(&mut c, &session).await;
    assert_eq!(r["state"], "stopped", "{r}");
    assert_eq!(r["stop_reason"], "caller_down");
}

#[tokio::test]
async fn messages_and_system_monitor_events() {
    let server = Server::start();
    let mut c = server.client().await;
    c.start_demo("tr4").await;
    let started = c
        .ok("trace_messages", json!({"name": "tr4", "pid": "DemoApp.Counter", "max_events": 10, "duration_ms": 20000}))
        .await;
    let session = started["session"].as_str().unwrap().to_string();
    c.eval("tr4", "DemoApp.Counter.increment()").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let r = loop {
        let r = results(&mut c, &session).await;
        if r["count"].as_u64() >= Some(2) || Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let received = events_of(&r, "receive");
    assert!(
        received
            .iter()
            .any(|e| e["text"].as_str().unwrap().contains("$gen_call")),
        "{r}"
    );
    assert!(
        !events_of(&r, "send").is_empty(),
        "the reply is traced: {r}"
    );
    c.ok("trace_stop", json!({"session": session})).await;

    c.ok(
        "system_monitor",
        json!({"name": "tr4", "large_heap_words": 1_000_000}),
    )
    .await;
    c.eval("tr4", "spawn(fn -> l = Enum.to_list(1..3_000_000); :erlang.garbage_collect(); length(l) end); :ok")
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let seen = loop {
        let m = c.ok("system_monitor", json!({"name": "tr4"})).await;
        if m["events"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["kind"] == "large_heap"))
        {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(seen, "a large_heap event");
    let off = c
        .ok("system_monitor", json!({"name": "tr4", "off": true}))
        .await;
    assert_eq!(off["active"], false, "{off}");
}
