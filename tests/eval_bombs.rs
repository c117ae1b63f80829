//! Eval bombs on one fixture node: an infinite loop, 10 GB allocations, a million processes, a
//! deep recursion, a huge output. Each ends with a clear error (or a visibly truncated result)
//! in bounded time, and afterwards the node is healthy: `status` answers, `1 + 1` is `2`, the
//! fixture's supervision tree has the same pids and the process count is back near its baseline.

mod common;

use common::{text, wait_until, Client, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const NODE: &str = "bombs";

/// DemoApp.Supervisor's children as (id, pid).
async fn tree(c: &mut Client) -> Vec<(String, String)> {
    let out = c
        .ok(
            "supervision_tree",
            json!({"name": NODE, "root": "DemoApp.Supervisor", "depth": 1}),
        )
        .await;
    out["roots"][0]["children"]
        .as_array()
        .expect("children")
        .iter()
        .map(|ch| (ch["id"].to_string(), ch["pid"].to_string()))
        .collect()
}

async fn process_count(c: &mut Client) -> u64 {
    let status = c.ok("status", json!({"name": NODE})).await;
    status["info"]["process_count"]
        .as_u64()
        .expect("process_count")
}

/// Runs a bomb; returns (result, how long it took). Every bomb is bounded by `limit`.
async fn bomb(c: &mut Client, code: &str, timeout_ms: u64, limit: Duration) -> (Value, Duration) {
    let started = Instant::now();
    let result = tokio::time::timeout(
        limit,
        c.call(
            "eval",
            json!({"name": NODE, "code": code, "timeout_ms": timeout_ms}),
        ),
    )
    .await
    .unwrap_or_else(|_| panic!("bomb {code:?} not answered within {limit:?}"));
    let took = started.elapsed();
    eprintln!(
        "bomb {code:?}: {took:?}: {}",
        text(&result).chars().take(300).collect::<String>()
    );
    (result, took)
}

fn assert_error(result: &Value, kinds: &[&str], what: &str) {
    assert_eq!(result["isError"], json!(true), "{what}: {result}");
    let kind = result["structuredContent"]["kind"].as_str().unwrap_or("");
    assert!(
        kinds.contains(&kind),
        "{what}: kind {kind:?} not in {kinds:?}: {}",
        text(result)
    );
    assert!(!result["structuredContent"]["message"]
        .as_str()
        .unwrap_or("")
        .is_empty());
}

/// The node before the bombs: DemoApp.Supervisor's children and the process count.
struct Baseline {
    tree: Vec<(String, String)>,
    procs: u64,
}

/// The node answers, computes, has the same tree and about as many processes as before.
async fn assert_healthy(c: &mut Client, base: &Baseline, after: &str) {
    let (baseline_tree, baseline_procs) = (&base.tree, base.procs);
    assert_eq!(
        c.node_status(NODE).await["state"],
        "running",
        "after {after}"
    );
    assert_eq!(c.eval(NODE, "1 + 1").await["value"], "2", "after {after}");
    assert_eq!(
        &tree(c).await,
        baseline_tree,
        "the supervision tree changed after {after}"
    );
    let count = wait_until(
        Duration::from_secs(15),
        &format!("after {after}: the process count back near {baseline_procs}"),
        async || process_count(c).await,
        |count| *count <= baseline_procs + 20,
    )
    .await;
    assert!(
        count <= baseline_procs + 20,
        "after {after}: {count} processes, baseline {baseline_procs}"
    );
}

/// Runs a bomb that must end in an error of one of `kinds`, then checks that the node is as
/// healthy as before (`what` names the bomb in the messages); returns (result, how long it
/// took).
async fn survive(
    c: &mut Client,
    base: &Baseline,
    what: &str,
    code: &str,
    timeout_ms: u64,
    limit: Duration,
    kinds: &[&str],
) -> (Value, Duration) {
    let (result, took) = bomb(c, code, timeout_ms, limit).await;
    assert_error(&result, kinds, what);
    assert_healthy(c, base, what).await;
    (result, took)
}

#[tokio::test]
async fn eval_bombs_end_clearly_and_the_node_stays_healthy() {
    let started = Instant::now();
    let server = Server::start().reaping();
    let mut c = server.client().await;
    c.start_demo(NODE).await;
    let base = Baseline {
        tree: tree(&mut c).await,
        procs: process_count(&mut c).await,
    };
    assert!(base.tree.len() >= 4, "{:?}", base.tree);

    // An infinite loop: killed at its deadline.
    let (_, took) = survive(
        &mut c,
        &base,
        "an infinite loop",
        "Stream.repeatedly(fn -> 1 end) |> Stream.run()",
        1000,
        Duration::from_secs(15),
        &["timeout"],
    )
    .await;
    assert!(took < Duration::from_secs(6), "{took:?}");

    // 10 GB binary (off-heap: the deadline stops it) and a huge list (the heap limit does).
    if common::otp_release() >= 27 {
        // OTP 27 and later copy it without yielding: the whole VM stops until it is done
        // (61 s for 10 GB on OTP 27.3 and 29.1 here, where OTP 25 is killed at 2 s). No
        // deadline stops that; the answer says the node is not answering, and it comes back.
        let (result, _) = bomb(
            &mut c,
            r#":binary.copy("x", 2_000_000_000)"#,
            1000,
            Duration::from_secs(30),
        )
        .await;
        assert_eq!(result["isError"], json!(true), "{result}");
        assert!(
            text(&result).contains("the node is not answering"),
            "{result}"
        );
        // Back once its status answers and the copy's memory is gone (it may answer in a
        // pause of the copy, which then goes on).
        wait_until(
            Duration::from_secs(90),
            "the node answers again, the copy gone",
            async || c.call("status", json!({"name": NODE})).await,
            |status| {
                let memory = &status["structuredContent"]["info"]["memory_total"];
                memory.as_u64().is_some_and(|m| m < 500_000_000)
            },
        )
        .await;
        assert_healthy(&mut c, &base, "a 2 GB binary copied without yielding").await;
    } else {
        survive(
            &mut c,
            &base,
            "a 10 GB binary",
            r#":binary.copy("x", 10_000_000_000)"#,
            2000,
            Duration::from_secs(20),
            &["timeout", "killed", "error"],
        )
        .await;
    }
    survive(
        &mut c,
        &base,
        "a huge list",
        "List.duplicate(0, 10_000_000_000)",
        30000,
        Duration::from_secs(45),
        &["killed", "timeout"],
    )
    .await;

    // More processes than the node may have (262 144 by default on OTP 25, 1 048 576 on 29):
    // the process limit stops the loop with a clear error, and every process the eval spawned
    // dies with it.
    let (r, took) = survive(
        &mut c,
        &base,
        "more processes than the limit",
        "for _ <- 0..:erlang.system_info(:process_limit), do: spawn(fn -> Process.sleep(:infinity) end)",
        20000,
        Duration::from_secs(40),
        &["error", "system_limit", "timeout", "killed"],
    )
    .await;
    assert!(
        text(&r).to_lowercase().contains("limit") || text(&r).contains("timeout"),
        "{}",
        text(&r)
    );
    assert!(took < Duration::from_secs(30), "{took:?}");

    // Spawned processes also die with an eval that times out...
    let (r, _) = survive(
        &mut c,
        &base,
        "spawn then hang",
        "for _ <- 1..50_000, do: spawn(fn -> Process.sleep(:infinity) end); Process.sleep(:infinity)",
        3000,
        Duration::from_secs(20),
        &["timeout"],
    )
    .await;
    assert!(
        text(&r).contains("50000 process(es) spawned by the eval were killed"),
        "{}",
        text(&r)
    );
    // ...and with one that raises, grandchildren included.
    let (r, _) = bomb(
        &mut c,
        "eval = self(); spawn(fn -> spawn(fn -> Process.sleep(:infinity) end); send(eval, :spawned); Process.sleep(:infinity) end); receive do :spawned -> raise \"boom\" end",
        5000,
        Duration::from_secs(20),
    )
    .await;
    assert_error(&r, &["error"], "spawn then raise");
    assert!(
        text(&r).contains("2 process(es) spawned by the eval were killed"),
        "{}",
        text(&r)
    );

    // A successful eval's processes live on, no longer tied to the eval's IO capture.
    let pid = c
        .eval(
            NODE,
            "spawn(fn -> Process.sleep(:infinity) end) |> :erlang.pid_to_list() |> to_string()",
        )
        .await["value"]
        .as_str()
        .unwrap()
        .trim_matches('"')
        .to_string();
    let check = format!(
        r#"p = :erlang.list_to_pid(~c"{pid}"); {{Process.alive?(p), Process.info(p, :group_leader) == {{:group_leader, Process.whereis(:user)}}}}"#
    );
    assert_eq!(c.eval(NODE, &check).await["value"], "{true, true}");
    c.eval(
        NODE,
        &format!(r#"Process.exit(:erlang.list_to_pid(~c"{pid}"), :kill)"#),
    )
    .await;

    // Deep non-tail recursion: the heap limit kills it.
    survive(
        &mut c,
        &base,
        "a deep recursion",
        "f = fn f, 0 -> 0; f, n -> 1 + f.(f, n - 1) end; f.(f, 1_000_000_000)",
        30000,
        Duration::from_secs(45),
        &["killed", "timeout"],
    )
    .await;

    // A huge output: a result with the output cut at 64 KB and a visible marker.
    let (r, took) = bomb(
        &mut c,
        r#"IO.puts(String.duplicate("x", 50_000_000))"#,
        20000,
        Duration::from_secs(40),
    )
    .await;
    assert_ne!(r["isError"], json!(true), "{}", text(&r));
    let out = &r["structuredContent"];
    assert_eq!(out["truncated"], true, "{out}");
    let output = out["output"].as_str().unwrap();
    assert!(output.len() < 70_000, "{}", output.len());
    assert!(
        output.ends_with("(truncated: 50000001 bytes total)"),
        "{}",
        &output[output.len() - 100..]
    );
    assert!(took < Duration::from_secs(20), "{took:?}");
    // A huge value is cut too (by inspect's limits or the 64 KB cap, both visible).
    let (r, _) = bomb(
        &mut c,
        r#"String.duplicate("y", 10_000_000)"#,
        20000,
        Duration::from_secs(40),
    )
    .await;
    let value = r["structuredContent"]["value"].as_str().unwrap();
    assert!(
        value.len() < 70_000 && (value.ends_with("...") || value.contains("truncated")),
        "{}",
        value.len()
    );
    let (r, _) = bomb(&mut c, "Enum.map(1..200_000, &Integer.to_string/1) |> Enum.join(\",\") |> IO.inspect(printable_limit: :infinity)", 20000, Duration::from_secs(40)).await;
    assert_eq!(
        r["structuredContent"]["truncated"],
        true,
        "{}",
        text(&r).len()
    );
    assert_healthy(&mut c, &base, "a huge output").await;
    eprintln!("eval bombs: took {:?}", started.elapsed());
}
