//! Diagnosing a slow node in few calls: `waits` follows blocked calls to the bottleneck and
//! reports cycles as deadlocks, and `process_info` counts a long mailbox by message shape. On
//! the shop fixture (importer → ledger → audit, see `tests/fixtures/shop/lib/shop.ex`) with
//! the audit slowed down, and on call cycles built in an eval. Every node dies with its server,
//! also when an assertion fails.

mod common;

use common::{shop, text, timed, wait_until, Client, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Largest answer an agent should have to read for one step of the diagnosis.
const ANSWER_BYTES: usize = 1536;

/// Starts the shop with the importer at 1000 orders/s and a 5 ms audit, and waits until the
/// ledger has fallen behind.
async fn start_slow_shop(c: &mut Client, name: &str) {
    c.ok(
        "start",
        json!({"name": name, "path": shop(), "env": {"SHOP_RATE": "1000", "SHOP_AUDIT_MS": "5"}}),
    )
    .await;
    let queue = "Process.info(Process.whereis(Shop.Ledger), :message_queue_len) |> elem(1)";
    wait_until(
        Duration::from_secs(30),
        "the ledger fallen behind (over 500 queued)",
        async || {
            let queued = c.eval(name, queue).await;
            queued["value"].as_str().unwrap_or("0").parse().unwrap_or(0)
        },
        |queued: &u64| *queued > 500,
    )
    .await;
}

/// The labels of a chain's hops.
fn labels(chain: &Value) -> Vec<String> {
    chain["hops"]
        .as_array()
        .map(|hops| {
            hops.iter()
                .map(|h| h["label"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The first chain whose hops include `label`.
fn chain_with<'a>(waits: &'a Value, label: &str) -> Option<&'a Value> {
    waits["chains"]
        .as_array()?
        .iter()
        .find(|c| labels(c).iter().any(|l| l == label))
}

#[tokio::test]
async fn the_ledger_waits_on_the_sleeping_audit() {
    let server = Server::start();
    let mut c = server.client().await;
    start_slow_shop(&mut c, "slow").await;

    // From the ledger.
    let result = c
        .call("waits", json!({"name": "slow", "pid": "Shop.Ledger"}))
        .await;
    let answer = text(&result);
    let waits = result["structuredContent"].clone();
    assert_ne!(result["isError"], json!(true), "{answer}");
    let chain = &waits["chains"][0];
    assert_eq!(labels(chain), ["Shop.Ledger", "Shop.Audit"], "{answer}");
    let ledger = &chain["hops"][0];
    let audit = &chain["hops"][1];
    assert_eq!(ledger["wait"]["kind"], "call", "{waits}");
    assert_eq!(ledger["wait"]["confirmed"], true, "{waits}");
    assert_eq!(ledger["current_function"], ":gen.do_call/4", "{waits}");
    assert_eq!(ledger["from"], "Shop.Ledger.handle_cast/2", "{waits}");
    assert!(
        ledger["queue_growth_per_s"].as_i64().unwrap() > 0,
        "the ledger's queue grows: {waits}"
    );
    assert_eq!(audit["top_function"], "Process.sleep/1", "{waits}");
    assert_eq!(audit["from"], "Shop.Audit.handle_call/3", "{waits}");
    let calls = audit["calls_per_s"].as_u64().unwrap();
    assert!(
        (10..=400).contains(&calls),
        "a 5 ms audit serves at most ~200 calls/s: {calls}"
    );
    assert_eq!(chain["deadlock"], false);
    let ledger_at = answer.find("Shop.Ledger").unwrap();
    let audit_at = answer.find("Shop.Audit").unwrap();
    assert!(ledger_at < audit_at, "in order: {answer}");
    assert!(answer.contains("→ call →"), "{answer}");
    eprintln!("waits from Shop.Ledger ({} bytes):\n{answer}", answer.len());

    // From the audit: not waiting, but waited on by the ledger.
    let from_audit = c
        .ok(
            "waits",
            json!({"name": "slow", "pid": "Shop.Audit", "window_ms": 0}),
        )
        .await;
    assert_eq!(labels(&from_audit["chains"][0]), ["Shop.Audit"]);
    assert_eq!(
        from_audit["waited_on_by"][0]["label"], "Shop.Ledger",
        "{from_audit}"
    );

    // Without a start, the scan finds the same chain first, compactly.
    let scanned = c.call("waits", json!({"name": "slow"})).await;
    let scan_text = text(&scanned);
    eprintln!("waits scan ({} bytes):\n{scan_text}", scan_text.len());
    assert!(scan_text.len() <= ANSWER_BYTES, "{scan_text}");
    assert_eq!(
        labels(&scanned["structuredContent"]["chains"][0]),
        ["Shop.Ledger", "Shop.Audit"],
        "{scan_text}"
    );
    // And in Erlang syntax when asked.
    let scan = c
        .ok("waits", json!({"name": "slow", "format": "erlang"}))
        .await;
    let chain = chain_with(&scan, "'Elixir.Shop.Ledger'").unwrap_or_else(|| panic!("{scan}"));
    assert_eq!(
        labels(chain),
        ["'Elixir.Shop.Ledger'", "'Elixir.Shop.Audit'"],
        "{scan}"
    );
    assert_eq!(chain["hops"][0]["current_function"], "gen:do_call/4");

    // `process_info` says where the audit came from and where it is in the shop's code.
    let source = std::fs::read_to_string(shop().join("lib/shop.ex")).unwrap();
    let sleep_line = 1 + source
        .lines()
        .position(|l| l.contains("Process.sleep(ms)"))
        .unwrap();
    let expected_frame = format!("Shop.Audit.handle_call/3 lib/shop.ex:{sleep_line}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let (info, answer) = loop {
        // The audit sleeps in the shop's code for almost every call it serves.
        let result = c
            .call("process_info", json!({"name": "slow", "pid": "Shop.Audit"}))
            .await;
        let info = result["structuredContent"].clone();
        if info["app_frame"] == json!(expected_frame) || Instant::now() > deadline {
            break (info, text(&result));
        }
    };
    assert_eq!(info["app_frame"], json!(expected_frame), "{answer}");
    assert!(
        info["parent"]
            .as_str()
            .is_some_and(|p| p.ends_with("(Shop.Supervisor)")),
        "{answer}"
    );
    assert_eq!(info["ancestors"][0], "Shop.Supervisor", "{answer}");
    assert!(
        answer.contains(&format!("app_frame: {expected_frame}")),
        "{answer}"
    );
    c.ok("stop", json!({"name": "slow"})).await;
}

/// Two GenServers that call each other (with a long timeout), started from an eval.
const CALL_CYCLE: &str = r#"
defmodule Diag.Left do
  use GenServer
  def init(s), do: {:ok, s}
  def handle_cast(:go, s), do: (GenServer.call(Diag.Right, :ask, 600_000); {:noreply, s})
  def handle_call(:ask, _from, s), do: {:reply, :ok, s}
end
defmodule Diag.Right do
  use GenServer
  def init(s), do: {:ok, s}
  def handle_call(:ask, _from, s), do: (GenServer.call(Diag.Left, :ask, 600_000); {:reply, :ok, s})
end
{:ok, _} = GenServer.start(Diag.Left, 0, name: Diag.Left)
{:ok, _} = GenServer.start(Diag.Right, 0, name: Diag.Right)
GenServer.cast(Diag.Left, :go)
"#;

#[tokio::test]
async fn a_call_cycle_is_a_deadlock() {
    let server = Server::start();
    let mut c = server.client().await;
    c.start_project("cycle", &shop()).await;
    c.eval("cycle", CALL_CYCLE).await;

    let scan = wait_until(
        Duration::from_secs(20),
        "a deadlock found",
        async || c.ok("waits", json!({"name": "cycle"})).await,
        |scan| scan["deadlocks"].as_u64().unwrap_or(0) > 0,
    )
    .await;
    let answer = scan["chains"][0]["text"].as_str().unwrap_or_default();
    assert_eq!(scan["deadlocks"], 1, "{scan}");
    let chain = &scan["chains"][0];
    assert_eq!(chain["deadlock"], true, "deadlocks come first: {scan}");
    let mut hops = labels(chain);
    hops.sort();
    assert_eq!(hops, ["Diag.Left", "Diag.Right"], "{scan}");
    assert!(answer.starts_with("DEADLOCK"), "{answer}");
    assert!(
        chain["hops"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["wait"]["pending_whole_window"] == true),
        "both calls stayed pending over the window: {scan}"
    );
    eprintln!("{answer}");

    // From one of them: the cycle back to it.
    let from_right = c
        .ok(
            "waits",
            json!({"name": "cycle", "pid": "Diag.Right", "window_ms": 100}),
        )
        .await;
    let chain = &from_right["chains"][0];
    assert_eq!(labels(chain), ["Diag.Right", "Diag.Left"], "{from_right}");
    assert_eq!(chain["deadlock"], true);
    assert_eq!(chain["cycle_to"], "Diag.Right");
    let line = chain["text"].as_str().unwrap();
    assert!(
        line.contains("Diag.Right (") && line.ends_with("→ call → Diag.Right"),
        "{line}"
    );
    c.ok("stop", json!({"name": "cycle"})).await;
}

#[tokio::test]
async fn a_long_mailbox_is_counted_by_shape_quickly() {
    let server = Server::start();
    let mut c = server.client().await;
    c.start_project("mail", &shop()).await;
    c.eval(
        "mail",
        r#"pid = spawn(fn -> Process.sleep(:infinity) end)
           Process.register(pid, :stuffed)
           for i <- 1..20_000, do: GenServer.cast(pid, {:post, rem(i, 100), 1})
           for i <- 1..3, do: send(pid, {:"$gen_call", {self(), make_ref()}, {:balance, i}})
           :ok"#,
    )
    .await;

    // Over the default threshold: not read, and the note says what to pass.
    let skipped = c
        .ok("process_info", json!({"name": "mail", "pid": "stuffed"}))
        .await;
    let note = skipped["mailbox"]["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("20003") && note.contains("max_messages"),
        "{skipped}"
    );

    let every_message = json!({"name": "mail", "pid": "stuffed", "max_messages": 30000});
    let (result, elapsed) = timed(c.call("process_info", every_message)).await;
    let answer = text(&result);
    let info = &result["structuredContent"];
    let mailbox = &info["mailbox"];
    assert_eq!(mailbox["read"], 20003, "{info}");
    assert_eq!(
        mailbox["shapes"][0],
        json!({"shape": "$gen_cast {:post, _, _}", "count": 20000}),
        "{info}"
    );
    assert_eq!(
        mailbox["shapes"][1],
        json!({"shape": "$gen_call {:balance, _}", "count": 3}),
        "{info}"
    );
    assert!(
        answer.contains("$gen_cast {:post, _, _} × 20000"),
        "{answer}"
    );
    let in_node_ms = mailbox["duration_us"].as_u64().unwrap() / 1000;
    eprintln!(
        "process_info with 20003 queued: {} ms for the tool call, {in_node_ms} ms counting in the node",
        elapsed.as_millis()
    );
    // 200 ms is the target on an idle machine; other tests share these 2 cores.
    assert!(
        elapsed < Duration::from_millis(1000),
        "process_info took {elapsed:?}"
    );
    c.ok("stop", json!({"name": "mail"})).await;
}

#[tokio::test]
async fn the_slow_shop_is_diagnosed_in_three_calls() {
    let server = Server::start();
    let mut c = server.client().await;
    start_slow_shop(&mut c, "shop").await;
    let mut answers = String::new();

    // 1. Which queue is long?
    let top = c
        .call(
            "processes",
            json!({"name": "shop", "sort_by": "message_queue_len", "limit": 5}),
        )
        .await;
    let top_text = text(&top);
    assert_eq!(
        top["structuredContent"]["rows"][0]["name"], "Shop.Ledger",
        "{top_text}"
    );
    let ledger = top["structuredContent"]["rows"][0]["pid"]
        .as_str()
        .unwrap()
        .to_string();

    // 2. What is it waiting on?
    let waits = c
        .call("waits", json!({"name": "shop", "pid": ledger}))
        .await;
    let waits_text = text(&waits);
    assert!(
        waits_text.contains("Shop.Ledger")
            && waits_text.contains("Shop.Audit")
            && waits_text.contains("Process.sleep/1"),
        "{waits_text}"
    );
    let chain = &waits["structuredContent"]["chains"][0];
    assert_eq!(labels(chain), ["Shop.Ledger", "Shop.Audit"], "{waits_text}");

    // 3. What piles up in the ledger's mailbox?
    let info = c
        .call("process_info", json!({"name": "shop", "pid": ledger}))
        .await;
    let info_text = text(&info);
    assert!(
        info_text.contains("$gen_cast {:post, _, _} ×"),
        "{info_text}"
    );

    for (tool, answer) in [
        ("processes", &top_text),
        ("waits", &waits_text),
        ("process_info", &info_text),
    ] {
        eprintln!("--- {tool} ({} bytes)\n{answer}", answer.len());
        assert!(
            answer.len() <= ANSWER_BYTES,
            "{tool} answered {} bytes",
            answer.len()
        );
        answers.push_str(answer);
    }
    for needle in ["Shop.Ledger", "Shop.Audit", "Process.sleep"] {
        assert!(answers.contains(needle), "the answers never name {needle}");
    }
    c.ok("stop", json!({"name": "shop"})).await;
}
