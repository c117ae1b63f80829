//! Bounded tracing on a live node: calls paired with their returns or exceptions (with
//! durations), limits enforced on the node, nothing left behind, dangerous or conflicting
//! traces refused, message tracing and the system monitor, and the one vocabulary of the trace
//! tools: a session id as `trace` returned it, or the node's `name` with a bare id.

mod common;

use common::{demo_node, text, wait_until, Client};
use serde_json::{json, Value};
use std::time::Duration;

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

/// Starts a session with `tool` (`trace`, `trace_messages`); its id, as the tool returned it.
async fn start_session(c: &mut Client, tool: &str, args: Value) -> String {
    let started = c.ok(tool, args).await;
    started["session"].as_str().unwrap().to_string()
}

/// Stops a session (`trace_results` with `stop`); its last results.
async fn stop_session(c: &mut Client, session: &str) -> Value {
    c.ok("trace_results", json!({"session": session, "stop": true}))
        .await
}

async fn results(c: &mut Client, session: &str) -> Value {
    c.ok("trace_results", json!({"session": session, "limit": 1000}))
        .await
}

/// The text and the data of `trace_results`.
async fn results_with_text(c: &mut Client, session: &str) -> (String, Value) {
    let r = c
        .call("trace_results", json!({"session": session, "limit": 1000}))
        .await;
    assert_ne!(r["isError"], json!(true), "{}", text(&r));
    (text(&r), r["structuredContent"].clone())
}

/// Polls `trace_results` until `done` holds (events reach the tracer asynchronously).
async fn wait_results(c: &mut Client, session: &str, done: impl Fn(&Value) -> bool) -> Value {
    wait_until(
        Duration::from_secs(10),
        "the trace results",
        async || results(c, session).await,
        done,
    )
    .await
}

async fn wait_stopped(c: &mut Client, session: &str) -> Value {
    wait_until(
        Duration::from_secs(20),
        "the session stopped",
        async || results(c, session).await,
        |r| r["state"] == "stopped",
    )
    .await
}

/// Polls until the session holds `n` calls, each returned or raised (or traced without its
/// result: a heavy process's).
async fn wait_calls(c: &mut Client, session: &str, n: usize) -> Value {
    wait_results(c, session, |r| {
        let calls = calls(r);
        calls.len() >= n
            && calls.iter().all(|call| {
                call["status"] == "returned"
                    || call["status"] == "raised"
                    || call["left_out"] == true
            })
    })
    .await
}

/// The calls of a call trace (one record per call, paired with its outcome).
fn calls(r: &Value) -> Vec<&Value> {
    r["calls"]
        .as_array()
        .map(|calls| calls.iter().collect())
        .unwrap_or_default()
}

/// The calls whose rendered call (`M.f(args)`) starts with `prefix`.
fn calls_to<'a>(r: &'a Value, prefix: &str) -> Vec<&'a Value> {
    calls(r)
        .into_iter()
        .filter(|call| call["call"].as_str().unwrap().starts_with(prefix))
        .collect()
}

/// The header line of a `trace_results` text (after the `session id:` line).
fn header(text: &str) -> &str {
    text.lines()
        .find(|l| l.starts_with("trace "))
        .unwrap_or_else(|| panic!("no header in:\n{text}"))
}

/// A module with known timings, recursion and an exception, compiled into the node by eval.
const PROBE: &str = r#"
defmodule TraceProbe do
  def nap(ms) do
    Process.sleep(ms)
    {:slept, ms}
  end

  def fact(0), do: 1
  def fact(n), do: n * fact(n - 1)

  def boom(x), do: raise(ArgumentError, "boom #{x}")
end
:ok
"#;

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
    let (_server, mut c) = demo_node("tr").await;

    let session = start_session(
        &mut c,
        "trace",
        json!({"name": "tr", "module": "DemoApp.Counter", "function": "handle_call",
                            "returns": true, "max_events": 5, "duration_ms": 20000}),
    )
    .await;
    assert!(session.starts_with("tr:"), "{session}");
    c.eval("tr", "for _ <- 1..3, do: DemoApp.Counter.increment()")
        .await;
    let r = wait_calls(&mut c, &session, 3).await;
    let paired = calls(&r);
    assert_eq!(paired.len(), 3, "one record per call: {r}");
    for (n, call) in paired.iter().enumerate() {
        assert_eq!(call["kind"], "call", "{r}");
        assert_eq!(call["status"], "returned", "{r}");
        assert!(
            call["call"]
                .as_str()
                .unwrap()
                .contains("handle_call(:increment"),
            "{r}"
        );
        assert!(
            call["result"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{{:reply, {}", n + 1)),
            "each call paired with its own return: {r}"
        );
        assert!(call["duration_us"].as_u64().is_some(), "{r}");
    }

    c.eval("tr", "for _ <- 1..20, do: DemoApp.Counter.increment()")
        .await;
    let r = wait_stopped(&mut c, &session).await;
    assert_eq!(r["state"], "stopped", "{r}");
    assert_eq!(r["stop_reason"], "max_events");
    assert_eq!(calls(&r).len(), 5, "exactly max_events calls");
    assert_eq!(r["stop_detail"], "max_events (5 calls) reached", "{r}");
    assert_clean(&mut c, "tr").await;

    // The duration limit.
    let short = start_session(
        &mut c,
        "trace",
        json!({"name": "tr", "module": "DemoApp.Counter", "max_events": 100, "duration_ms": 300}),
    )
    .await;
    let r = wait_stopped(&mut c, &short).await;
    assert_eq!(r["stop_reason"], "duration", "{r}");
    assert_eq!(r["stop_detail"], "duration (300 ms) passed", "{r}");
    assert_clean(&mut c, "tr").await;
    let list = c.ok("trace_results", json!({"name": "tr"})).await;
    assert!(list.to_string().contains(&short), "{list}");
}

#[tokio::test]
async fn dangerous_and_conflicting_traces_are_refused() {
    let (_server, mut c) = demo_node("tr2").await;
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

    let session = start_session(
        &mut c,
        "trace",
        json!({"name": "tr2", "module": "DemoApp.Counter", "max_events": 10, "duration_ms": 20000}),
    )
    .await;
    let second = c
        .err(
            "trace",
            json!({"name": "tr2", "module": "DemoApp.Cache", "max_events": 10}),
        )
        .await;
    assert!(
        second.contains("is running") && second.contains("stop: true"),
        "{second}"
    );
    stop_session(&mut c, &session).await;
    assert_eq!(results(&mut c, &session).await["stop_reason"], "stopped");
    assert_clean(&mut c, "tr2").await;

    // Someone else's tracer (dbg) is never stolen. Since Elixir 1.15 Mix keeps only the
    // project's applications in the code path: runtime_tools (dbg) is added as a user would.
    let dbg = "Code.ensure_loaded?(:dbg) or Enum.each(Path.wildcard(\"#{:code.root_dir()}/lib/runtime_tools-*/ebin\"), &Code.append_path/1)\n\
               {:ok, _} = :dbg.tracer(); :dbg.p(Process.whereis(DemoApp.Cache), :m); :ok";
    c.ok("eval", json!({"name": "tr2", "code": dbg})).await;
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
    let (_server, mut c) = demo_node("tr3").await;
    let session = start_session(
        &mut c,
        "trace",
        json!({"name": "tr3", "module": "DemoApp.Counter", "max_events": 1000,
               "duration_ms": 60000}),
    )
    .await;
    c.eval("tr3", "DemoApp.Counter.increment()").await;
    // The node drops our connection: the tracer sees the server go and removes everything.
    let _ = c
        .call(
            "eval",
            json!({"name": "tr3", "code": "for n <- Node.list(:hidden), do: Node.disconnect(n)"}),
        )
        .await;
    // The session is marked stopped once the tracer has removed everything.
    let r = wait_stopped(&mut c, &session).await;
    assert_clean(&mut c, "tr3").await;
    assert_eq!(r["state"], "stopped", "{r}");
    assert_eq!(r["stop_reason"], "caller_down");
}

#[tokio::test]
async fn messages_and_system_monitor_events() {
    let (_server, mut c) = demo_node("tr4").await;
    let session = start_session(
        &mut c,
        "trace_messages",
        json!({"name": "tr4", "pid": "DemoApp.Counter", "max_events": 10, "duration_ms": 20000}),
    )
    .await;
    c.eval("tr4", "DemoApp.Counter.increment()").await;
    let r = wait_results(&mut c, &session, |r| r["count"].as_u64() >= Some(2)).await;
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
    stop_session(&mut c, &session).await;

    c.ok(
        "system_monitor",
        json!({"name": "tr4", "large_heap_words": 1_000_000}),
    )
    .await;
    c.eval("tr4", "spawn(fn -> l = Enum.to_list(1..3_000_000); :erlang.garbage_collect(); length(l) end); :ok")
        .await;
    let large_heap = |m: &Value| {
        m["events"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["kind"] == "large_heap"))
    };
    let monitor = wait_until(
        Duration::from_secs(10),
        "a large_heap event",
        async || c.ok("system_monitor", json!({"name": "tr4"})).await,
        large_heap,
    )
    .await;
    assert!(large_heap(&monitor), "a large_heap event");
    // The session sees only what it asked for, though the baseline watches pauses meanwhile.
    assert!(
        monitor["events"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["kind"] == "large_heap"),
        "{monitor}"
    );
    let off = c
        .ok("system_monitor", json!({"name": "tr4", "off": true}))
        .await;
    assert_eq!(off["active"], false, "{off}");
    // Its end puts the baseline back: the helper still watches long collections.
    let base = c
        .eval(
            "tr4",
            "{pid, opts} = :erlang.system_monitor(); {pid == Process.whereis(:os_sup_trace_sysmon), opts[:long_gc], opts[:large_heap]}",
        )
        .await;
    assert_eq!(base["value"], "{true, 50, nil}", "{base}");
}

#[tokio::test]
async fn calls_are_paired_with_returns_exceptions_and_durations() {
    let (_server, mut c) = demo_node("tr5").await;
    c.eval("tr5", PROBE).await;
    let session = start_session(
        &mut c,
        "trace",
        json!({"name": "tr5", "module": "TraceProbe", "max_events": 50,
                   "duration_ms": 30000}),
    )
    .await;
    c.eval("tr5", "TraceProbe.nap(150)").await;
    c.eval("tr5", "TraceProbe.fact(4)").await;
    c.eval(
        "tr5",
        "try do TraceProbe.boom(7) rescue e in ArgumentError -> e.message end",
    )
    .await;
    // nap + fact(4..0) + boom (Elixir's evaluator also calls `TraceProbe.__info__/1`).
    let probed = |r: &Value| {
        ["TraceProbe.nap(", "TraceProbe.fact(", "TraceProbe.boom("]
            .iter()
            .map(|prefix| calls_to(r, prefix).len())
            .sum::<usize>()
    };
    let r = wait_results(&mut c, &session, |r| {
        probed(r) == 7 && r["not_returned"] == 0
    })
    .await;
    assert_eq!(probed(&r), 7, "{r}");

    // A call that sleeps 150 ms lasts at least that long.
    let nap = calls_to(&r, "TraceProbe.nap(")[0];
    assert_eq!(nap["status"], "returned", "{r}");
    assert_eq!(nap["result"], "{:slept, 150}", "{r}");
    let us = nap["duration_us"].as_u64().unwrap();
    assert!((150_000..5_000_000).contains(&us), "nap(150) took {us} µs");

    // Recursion: every level is paired with its own return (n!), nested one deeper.
    let facts = calls_to(&r, "TraceProbe.fact(");
    assert_eq!(facts.len(), 5, "{r}");
    for (depth, (call, n)) in facts.iter().zip([4u64, 3, 2, 1, 0]).enumerate() {
        let expected: u64 = (1..=n).product();
        assert_eq!(call["call"], format!("TraceProbe.fact({n})"), "{r}");
        assert_eq!(call["result"], expected.to_string(), "fact({n}): {r}");
        assert_eq!(call["depth"], depth as u64, "{r}");
        assert!(call["duration_us"].is_u64(), "{r}");
    }
    let outer = facts[0]["duration_us"].as_u64().unwrap();
    let inner = facts[4]["duration_us"].as_u64().unwrap();
    assert!(
        outer >= inner,
        "an outer call contains its inner calls: {r}"
    );

    // An exception is paired with the call that raised it.
    let boom = calls_to(&r, "TraceProbe.boom(")[0];
    assert_eq!(boom["status"], "raised", "{r}");
    let raised = boom["exception"].as_str().unwrap();
    assert!(
        raised.starts_with("error: ") && raised.contains("ArgumentError"),
        "{r}"
    );
    assert!(boom["duration_us"].is_u64(), "{r}");
    assert_eq!(r["raised"], 1, "{r}");
    assert_eq!(
        r["returned"].as_u64().unwrap() + 1,
        r["count"].as_u64().unwrap(),
        "{r}"
    );

    // One line per call: arguments, outcome and duration.
    let (text, _) = results_with_text(&mut c, &session).await;
    let lines: Vec<&str> = text.lines().collect();
    let line = |needle: &str| {
        lines
            .iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
            .to_string()
    };
    let nap_line = line("TraceProbe.nap(150)");
    assert!(
        nap_line.contains("-> {:slept, 150} (") && nap_line.contains(" ms) from "),
        "{text}"
    );
    // Each call names the function that made it.
    assert!(
        line("TraceProbe.fact(3)").ends_with(" from TraceProbe.fact/1"),
        "{text}"
    );
    assert!(line("TraceProbe.fact(2)").contains("-> 2 ("), "{text}");
    assert!(
        line("TraceProbe.boom(7)").contains(" raised error: "),
        "{text}"
    );
    assert!(
        header(&text).contains("running (stops at 50 calls")
            && header(&text).contains(" returned, 1 raised; by caller: "),
        "{text}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| ["nap(", "fact(", "boom("].iter().any(|f| l.contains(f)))
            .count(),
        7,
        "one line per call:\n{text}"
    );
    stop_session(&mut c, &session).await;
    let check = ":erlang.trace_info({TraceProbe, :nap, 1}, :traced)";
    assert_eq!(c.eval("tr5", check).await["value"], "{:traced, false}");
}

#[tokio::test]
async fn max_events_counts_calls_with_one_stop_reason() {
    let (_server, mut c) = demo_node("tr6").await;
    let started = c
        .call(
            "trace",
            json!({"name": "tr6", "module": "DemoApp.Counter", "function": "handle_call",
                   "max_events": 12, "duration_ms": 20000}),
        )
        .await;
    assert!(
        text(&started).contains("stops after 12 calls"),
        "{}",
        text(&started)
    );
    let session = started["structuredContent"]["session"]
        .as_str()
        .unwrap()
        .to_string();
    c.eval("tr6", "for _ <- 1..30, do: DemoApp.Counter.increment()")
        .await;
    let r = wait_stopped(&mut c, &session).await;
    assert_eq!(r["stop_reason"], "max_events", "{r}");
    assert_eq!(r["count"], 12, "{r}");
    assert_eq!(r["unit"], "calls", "{r}");
    assert_eq!(calls(&r).len(), 12, "{r}");
    assert!(
        calls(&r)
            .iter()
            .all(|call| call["status"] == "returned" && call["duration_us"].is_u64()),
        "the returns of the counted calls are awaited: {r}"
    );
    let (text, _) = results_with_text(&mut c, &session).await;
    assert!(
        header(&text).ends_with("stopped: max_events (12 calls) reached; 12 calls: 12 returned"),
        "{text}"
    );
    assert_eq!(
        text.matches("max_events").count(),
        1,
        "one stop reason:\n{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.contains("handle_call(")).count(),
        12,
        "one line per call:\n{text}"
    );
    assert_clean(&mut c, "tr6").await;

    let list = c.call("trace_results", json!({"name": "tr6"})).await;
    assert!(
        common::text(&list).contains("stopped: max_events (12 calls) reached; 12 calls"),
        "{}",
        common::text(&list)
    );
}

#[tokio::test]
async fn calls_still_out_are_shown_as_such() {
    let (_server, mut c) = demo_node("tr7").await;
    c.eval("tr7", PROBE).await;
    let session = start_session(
        &mut c,
        "trace",
        json!({"name": "tr7", "module": "TraceProbe", "function": "nap", "arity": 1,
                   "max_events": 5, "duration_ms": 30000}),
    )
    .await;
    c.eval("tr7", "spawn(fn -> TraceProbe.nap(3000) end); :ok")
        .await;
    let r = wait_results(&mut c, &session, |r| calls(r).len() == 1).await;
    assert_eq!(calls(&r)[0]["status"], "running", "{r}");
    assert!(calls(&r)[0]["duration_us"].is_null(), "{r}");
    let (text, _) = results_with_text(&mut c, &session).await;
    assert!(
        text.contains("TraceProbe.nap(3000) ... (running, no return yet)"),
        "{text}"
    );
    assert!(text.contains("1 still running"), "{text}");

    let stopped = c
        .call("trace_results", json!({"session": session, "stop": true}))
        .await;
    assert!(
        common::text(&stopped).contains("stopped: manual (trace_results stop); 1 call"),
        "{}",
        common::text(&stopped)
    );
    let (text, r) = results_with_text(&mut c, &session).await;
    assert_eq!(r["stop_reason"], "stopped", "{r}");
    assert_eq!(calls(&r)[0]["status"], "unfinished", "{r}");
    assert_eq!(r["not_returned"], 1, "{r}");
    assert!(
        text.contains("TraceProbe.nap(3000) ... (had not returned when the trace stopped)"),
        "{text}"
    );
    assert!(
        header(&text).contains(
            "stopped: manual (trace_results stop); 1 call: 1 had not returned when the trace stopped"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn one_function_of_a_hot_module_is_traceable_the_whole_module_is_not() {
    let (_server, mut c) = demo_node("tr8").await;
    for args in [
        json!({"name": "tr8", "module": "String", "max_events": 3}),
        json!({"name": "tr8", "module": "lists", "max_events": 3}),
    ] {
        let refused = c.err("trace", args).await;
        assert!(
            refused.contains("every function of") && refused.contains("force"),
            "{refused}"
        );
    }
    // `force` reaches the node: the whole module is traced, bounded as ever.
    let session = start_session(
        &mut c,
        "trace",
        json!({"name": "tr8", "module": "String", "max_events": 3, "force": true,
                   "duration_ms": 20000}),
    )
    .await;
    stop_session(&mut c, &session).await;
    let bad = c
        .err(
            "trace",
            json!({"name": "tr8", "module": "String", "arity": 2, "max_events": 3}),
        )
        .await;
    assert!(bad.contains("arity needs a function"), "{bad}");

    for function in [
        json!({"function": "duplicate/2"}),
        json!({"function": "duplicate", "arity": 2}),
    ] {
        let mut args = json!({"name": "tr8", "module": "String", "max_events": 3,
                              "duration_ms": 20000});
        args.as_object_mut()
            .unwrap()
            .extend(function.as_object().unwrap().clone());
        let session = start_session(&mut c, "trace", args).await;
        // A literal `String.duplicate(...)` is inlined to `:binary.copy/2` by the Elixir
        // compiler; a call through a variable reaches the function.
        c.eval(
            "tr8",
            "m = String; for n <- 1..10, do: m.duplicate(\"ab\", n)",
        )
        .await;
        let r = wait_stopped(&mut c, &session).await;
        assert_eq!(r["stop_reason"], "max_events", "{r}");
        assert_eq!(r["stop_detail"], "max_events (3 calls) reached", "{r}");
        assert_eq!(calls(&r).len(), 3, "{r}");
        for call in calls(&r) {
            assert_eq!(call["mfa"], "String.duplicate/2", "{r}");
            assert_eq!(call["status"], "returned", "{r}");
            assert!(call["duration_us"].is_u64(), "{r}");
        }
        assert_eq!(calls(&r)[0]["call"], "String.duplicate(\"ab\", 1)", "{r}");
        assert_eq!(calls(&r)[0]["result"], "\"ab\"", "{r}");
        let check = ":erlang.trace_info({String, :duplicate, 2}, :traced)";
        assert_eq!(c.eval("tr8", check).await["value"], "{:traced, false}");
    }
}

#[tokio::test]
async fn every_module_and_the_helpers_own_modules_are_refused_without_force() {
    let (_server, mut c) = demo_node("tr9").await;
    let every = c
        .err(
            "trace",
            json!({"name": "tr9", "module": "_", "function": "handle_call", "max_events": 3}),
        )
        .await;
    assert!(
        every.contains("every module") && every.contains("force"),
        "{every}"
    );
    for args in [
        json!({"name": "tr9", "module": "os_sup_helper", "max_events": 3}),
        json!({"name": "tr9", "module": "os_sup_lib_reply", "function": "ok_reply/2", "max_events": 3}),
    ] {
        let refused = c.err("trace", args).await;
        assert!(
            refused.contains("part of this helper") && refused.contains("force"),
            "{refused}"
        );
    }
    let list = c.ok("trace_results", json!({"name": "tr9"})).await;
    assert!(
        !list.to_string().contains("tr9:t"),
        "nothing was started: {list}"
    );
}

/// A trace of a GenServer whose state is 1 MB tells each event's arguments and result by
/// their shape and size (a map by its largest part, a struct by the fields that tell it
/// apart), not by dumping the state twice an event: 20 events fit in 3 KB.
#[tokio::test]
async fn a_large_state_is_shown_by_its_shape_in_trace_events() {
    let (_server, mut c) = demo_node("tr6").await;
    let answer = twenty_casts_traced(
        &mut c,
        "BigCart",
        r#"def init(n), do: {:ok, %{items: Map.new(1..n, &{&1, "item #{&1} in the cart"}), owner: "ana"}}
           def handle_cast({:add, sku}, s), do: {:noreply, %{s | items: Map.put(s.items, sku, "new")}}"#,
    )
    .await;
    // The state is told by its largest part and its size.
    assert!(answer.contains("items: %{16000 keys}…} 1.1MB"), "{answer}");
    assert!(answer.contains("MB)"), "{answer}");

    let answer = twenty_casts_traced(
        &mut c,
        "Cart",
        r#"defstruct [:owner, :items, :status, count: 0, region: "eu-west"]
           def init(n), do: {:ok, %Cart{items: Map.new(1..n, &{&1, "item #{&1} in the cart"}), owner: "ana", status: :open}}
           def handle_cast({:add, sku}, s), do: {:noreply, %{s | items: Map.put(s.items, sku, "new"), count: s.count + 1}}"#,
    )
    .await;
    assert!(
        answer.contains("-> {:noreply, %Cart{status: :open, …} 1.1MB}"),
        "{answer}"
    );

    // A state of 25 MB (a heap over 8 MB): no copy of it is made for the trace (neither the arguments of a call
    // nor its result), and the session says so.
    let answer = twenty_casts_traced(
        &mut c,
        "Hoard",
        r#"def init(n), do: {:ok, Enum.to_list(1..(n * 100))}
           def handle_cast({:add, sku}, s), do: {:noreply, [sku | s]}"#,
    )
    .await;
    assert!(
        answer.contains(
            "20 without arguments and result (their process's heap is over 8 MB; Hoard: "
        ),
        "{answer}"
    );
    assert_eq!(
        answer
            .matches("Hoard.handle_cast/2 (arguments and result left out)")
            .count(),
        20,
        "{answer}"
    );
    // Nothing of the trace is left on the process.
    let flags = c
        .eval("tr6", ":erlang.trace_info(Process.whereis(Hoard), :flags)")
        .await;
    assert_eq!(flags["value"], "{:flags, []}", "{flags}");
    c.ok("stop", json!({"name": "tr6"})).await;
}

/// Defines GenServer `module` (`body`: its `init/1` of a 16 000-item state and its
/// `handle_cast/2`) on node tr6, traces 20 casts to it, and returns the session's text,
/// checked to hold the 20 calls in at most 3 KB.
async fn twenty_casts_traced(c: &mut common::Client, module: &str, body: &str) -> String {
    let code = format!(
        "defmodule {module} do\n use GenServer\n {body}\n end\n\
         {{:ok, _}} = GenServer.start({module}, 16_000, name: {module})\n:ok"
    );
    c.eval("tr6", &code).await;
    let size = c
        .eval(
            "tr6",
            &format!(":erts_debug.flat_size(:sys.get_state({module})) * 8"),
        )
        .await;
    let bytes: u64 = size["value"].as_str().unwrap().parse().unwrap();
    assert!(bytes > 1_000_000, "a 1 MB state: {bytes}");
    let session = start_session(
        c,
        "trace",
        json!({"name": "tr6", "module": module, "function": "handle_cast",
                   "max_events": 20, "duration_ms": 30000}),
    )
    .await;
    let casts = format!("for i <- 1..20, do: GenServer.cast({module}, {{:add, \"sku-#{{i}}\"}})");
    c.eval("tr6", &casts).await;
    wait_calls(c, &session, 20).await;
    let (answer, data) = results_with_text(c, &session).await;
    assert_eq!(calls(&data).len(), 20, "{answer}");
    eprintln!("{} bytes for 20 events:\n{answer}", answer.len());
    assert!(
        answer.len() <= 3 * 1024,
        "{} bytes:\n{answer}",
        answer.len()
    );
    answer
}

/// A trace of every process never counts the helper's own processes: reading the session
/// (each read a worker that calls the traced function a lot) spends none of its events.
#[tokio::test]
async fn a_trace_of_every_process_leaves_out_the_helpers_own() {
    let (_server, mut c) = demo_node("tr7").await;
    let session = start_session(
        &mut c,
        "trace",
        json!({"name": "tr7", "module": "lists", "function": "reverse", "arity": 1,
                   "max_events": 1000, "duration_ms": 1500}),
    )
    .await;
    for _ in 0..10 {
        results(&mut c, &session).await;
    }
    // One call of the user's own, through eval: it counts.
    c.eval("tr7", ":lists.reverse([1, 2, 3])").await;
    let r = wait_stopped(&mut c, &session).await;
    let from_eval = calls(&r)
        .iter()
        .filter(|call| call["call"] == ":lists.reverse([1, 2, 3])")
        .count();
    assert_eq!(from_eval, 1, "{r}");
    assert!(calls(&r).len() < 20, "the helper's reads were counted: {r}");
    c.ok("stop", json!({"name": "tr7"})).await;
}

#[tokio::test]
async fn trace_sessions_take_the_id_as_returned_or_a_bare_id_with_the_name() {
    let (_server, mut c) = demo_node("tr").await;
    let session = start_session(
        &mut c,
        "trace",
        json!({"name": "tr", "module": "DemoApp.Counter", "max_events": 5}),
    )
    .await;
    let (node, id) = session.split_once(':').unwrap();
    assert_eq!(node, "tr");

    c.eval("tr", "DemoApp.Counter.increment()").await;
    // The call's trace event reaches the session through the tracer: read until it has.
    let full = wait_until(
        Duration::from_secs(10),
        "the call's trace event",
        async || c.ok("trace_results", json!({"session": session})).await,
        |full| full["count"] != 0,
    )
    .await;
    let bare = c
        .ok("trace_results", json!({"name": "tr", "session": id}))
        .await;
    // The same session: its first call (more may arrive between the two reads).
    assert_eq!(full["calls"][0]["seq"], 1, "{full}");
    assert_eq!(full["calls"][0]["call"], bare["calls"][0]["call"]);
    assert_eq!(full["calls"][0]["time_us"], bare["calls"][0]["time_us"]);

    let wrong = c
        .err(
            "trace_results",
            json!({"name": "other", "session": session}),
        )
        .await;
    assert!(wrong.contains("belongs to node `tr`"), "{wrong}");
    let bare_alone = c
        .err("trace_results", json!({"session": id, "stop": true}))
        .await;
    assert!(
        bare_alone.contains("pass the node's `name`"),
        "{bare_alone}"
    );
    c.ok(
        "trace_results",
        json!({"name": "tr", "session": id, "stop": true}),
    )
    .await;
    c.ok("stop", json!({"name": "tr"})).await;
}
