//! OTP logger events reach the `logs` tool (source `logger`) for the whole life of a node:
//! in every start, after the handler is removed behind our back, and for events logged before
//! the server subscribed (at boot, or while its connection was down).

mod common;

use common::erl::ErlNode;

use common::{demo_app, demo_node, Client, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// How long a logger event may take to show up in `logs`.
const ARRIVAL: Duration = Duration::from_secs(4);

/// Polls `logs` (source `logger`) until a line matches `grep` or `limit` passes; returns the
/// matching lines' texts.
async fn logger_lines(c: &mut Client, name: &str, grep: &str, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let texts = logger_lines_now(c, name, grep).await;
        if !texts.is_empty() || Instant::now() >= deadline {
            return texts;
        }
        // Clock: paces this poll; the deadline above bounds it.
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn logger_lines_now(c: &mut Client, name: &str, grep: &str) -> Vec<String> {
    let page = c
        .ok(
            "logs",
            json!({"name": name, "source": "logger", "grep": grep}),
        )
        .await;
    page["lines"]
        .as_array()
        .map(|lines| {
            lines
                .iter()
                .filter_map(|l| l["text"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The logger handler ids of a node, for failure messages.
async fn handler_ids(c: &mut Client, name: &str) -> Value {
    let out = c
        .call(
            "eval",
            json!({"name": name, "code": ":logger.get_handler_ids()"}),
        )
        .await;
    out["structuredContent"]["value"].clone()
}

/// Start, log from an eval right after `start` returned, find the event, stop: 30 times.
/// Two lanes (node names) run side by side to keep it short; each cycle is independent.
#[tokio::test]
async fn every_start_forwards_logger_events() {
    const CYCLES: usize = 30;
    const LANES: usize = 2;
    let server = Server::start();
    demo_app();
    let started = Instant::now();
    let mut lanes = Vec::new();
    for lane in 0..LANES {
        let mut c = server.client().await;
        lanes.push(tokio::spawn(async move {
            let name = format!("cycle{lane}");
            let mut misses = Vec::new();
            for n in (lane..CYCLES).step_by(LANES) {
                c.start_demo(&name).await;
                let marker = format!("marker-{n}");
                c.eval(
                    &name,
                    &format!(r#"require Logger; Logger.error("{marker}")"#),
                )
                .await;
                let found = logger_lines(&mut c, &name, &format!("{marker}$"), ARRIVAL).await;
                if found.is_empty() {
                    let ids = handler_ids(&mut c, &name).await;
                    eprintln!("{name} cycle {n}: {marker} missing; handlers {ids}");
                    misses.push((n, ids));
                }
                c.ok("stop", json!({"name": name})).await;
            }
            misses
        }));
    }
    let mut misses = Vec::new();
    for lane in lanes {
        misses.extend(lane.await.expect("lane finished"));
    }
    eprintln!(
        "{CYCLES} cycles in {:?}, {} missed",
        started.elapsed(),
        misses.len()
    );
    assert!(misses.is_empty(), "missed cycles: {misses:?}");
}

/// A user removing our handler (or a library reconfiguring the logger) does not stop the
/// events: the helper puts the handler back, and a new event arrives within a second.
#[tokio::test]
async fn a_removed_handler_is_put_back() {
    let (_server, mut c) = demo_node("unhooked").await;
    c.eval(
        "unhooked",
        r#"require Logger; Logger.error("before-removal")"#,
    )
    .await;
    let before = logger_lines(&mut c, "unhooked", "before-removal$", ARRIVAL).await;
    assert_eq!(before.len(), 1, "{before:?}");

    let removed = Instant::now();
    let out = c
        .eval("unhooked", ":logger.remove_handler(:os_sup_mcp)")
        .await;
    assert_eq!(out["value"], ":ok", "{out}");
    // Events logged before the handler is back are lost: log a new one until one arrives.
    let mut attempt = 0;
    let arrived = loop {
        attempt += 1;
        c.eval(
            "unhooked",
            &format!(r#"require Logger; Logger.error("after-removal-{attempt}")"#),
        )
        .await;
        let lines = logger_lines_now(&mut c, "unhooked", "after-removal-").await;
        if !lines.is_empty() {
            break Some(lines);
        }
        if removed.elapsed() > Duration::from_secs(1) {
            break None;
        }
        // Clock: paces this poll; the second since the removal bounds it.
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let ids = handler_ids(&mut c, "unhooked").await;
    assert!(
        arrived.is_some(),
        "no event within 1 s of removing the handler ({attempt} logged); handlers {ids}"
    );
    eprintln!(
        "an event arrived {:?} after the removal ({attempt} logged)",
        removed.elapsed()
    );
    // The events come through the helper's primary filter too (Elixir 1.15+ translates them
    // before any handler), so one may arrive before the handler is back: it is back within
    // the same second.
    let ids = loop {
        let ids = handler_ids(&mut c, "unhooked").await;
        if ids.as_str().unwrap_or("").contains(":os_sup_mcp")
            || removed.elapsed() > Duration::from_secs(1)
        {
            break ids;
        }
        // Clock: paces this poll; the second since the removal bounds it.
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(ids.as_str().unwrap_or("").contains(":os_sup_mcp"), "{ids}");
}

/// An event logged at boot, before the server could subscribe, is delivered: the helper
/// keeps events from its own start. The event carries the keeper's status at that moment,
/// which shows nobody was subscribed yet.
#[tokio::test]
async fn an_event_logged_at_boot_is_delivered() {
    let server = Server::start();
    let mut c = server.client().await;
    // Runs right after the helper's own `-eval` (ERL_AFLAGS come first), before Elixir starts.
    // `ELIXIR_ERL_OPTIONS` is split on spaces: the expression has none.
    let boot_eval = "-eval logger:error(#{boot_marker=>os_sup_log_handler:status()})";
    c.ok(
        "start",
        json!({"name": "booted", "path": demo_app(), "env": {"ELIXIR_ERL_OPTIONS": boot_eval}}),
    )
    .await;
    let lines = logger_lines(&mut c, "booted", "boot_marker", ARRIVAL).await;
    assert_eq!(lines.len(), 1, "the boot event arrives once: {lines:?}");
    assert!(
        lines[0].contains("subscriber => undefined"),
        "it was logged before anyone subscribed: {}",
        lines[0]
    );
}

/// An event logged while the server's connection is down is delivered once it subscribes
/// again (the helper goes back to keeping events when its subscriber goes away).
#[tokio::test]
async fn an_event_logged_while_disconnected_is_delivered() {
    let (_server, mut c) = demo_node("gap").await;
    // After the eval replied: drop the server's connection, wait until the helper noticed,
    // then log (the text says whether nobody was subscribed at that moment). "Replied" is
    // counted from the end of the evaluating process, not from the spawn: on a loaded machine
    // the eval's own return could take longer than a fixed pause from the spawn.
    let code = r#"
        require Logger
        evaluator = self()
        spawn(fn ->
          ref = Process.monitor(evaluator)
          receive do
            {:DOWN, ^ref, _, _, _} -> :ok
          end
          Process.sleep(200)
          Enum.each(Node.list(:hidden), &Node.disconnect/1)
          wait = fn wait, n ->
            case :os_sup_log_handler.status() do
              {:ok, %{subscriber: :undefined}} -> :unsubscribed
              _ when n > 0 -> Process.sleep(10); wait.(wait, n - 1)
              other -> other
            end
          end
          Logger.error("logged-while-#{inspect(wait.(wait, 200))}")
        end)
        :ok
    "#;
    c.eval("gap", code).await;
    let lines = logger_lines(&mut c, "gap", "logged-while-", ARRIVAL).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].ends_with("logged-while-:unsubscribed"),
        "{}",
        lines[0]
    );
    // The node is still reachable and the subscription is live again.
    c.eval("gap", r#"require Logger; Logger.error("after-reconnect")"#)
        .await;
    let after = logger_lines(&mut c, "gap", "after-reconnect$", ARRIVAL).await;
    assert_eq!(after.len(), 1, "{after:?}");
}

/// A plain `erl` node (no Elixir, no helper) that prints its logger handler ids and whether
/// the helper's keeper runs, every 50 ms, on stdout; killed on drop.
struct ReportingNode {
    erl: ErlNode,
    lines: std::sync::mpsc::Receiver<String>,
}

impl ReportingNode {
    fn start() -> Self {
        use std::io::BufRead;
        let report = "spawn(fun F() -> io:format(\"report ~w ~w~n\", \
                      [logger:get_handler_ids(), whereis(os_sup_logger_keeper) =/= undefined]), \
                      timer:sleep(50), F() end)";
        let mut erl = ErlNode::build("logdetach")
            .piped_stdout()
            .args(&["-eval", report])
            .start();
        let stdout = erl.child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self { erl, lines }
    }

    /// Waits up to `limit` for a report line that satisfies `check`.
    fn wait_report(&self, limit: Duration, check: impl Fn(&str) -> bool) -> Option<String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with("report ") && check(&line) => return Some(line),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    }
}

/// `detach` removes the handler and stops the keeper: the node's logger is as it was. (The
/// helper keeps log events from boot only on nodes it boots; on an attached node the keeper
/// starts with the first subscription, made here from an eval as the server would.)
#[tokio::test]
async fn detach_removes_the_handler_and_the_keeper() {
    let plain = ReportingNode::start();
    let before = plain
        .wait_report(Duration::from_secs(20), |_| true)
        .expect("the node reports");
    assert!(!before.contains("os_sup_mcp"), "{before}");
    let server = Server::start();
    let mut c = server.client().await;
    let args = json!({"name": "plain", "node": plain.erl.name, "cookie": plain.erl.cookie});
    c.attach(args.clone()).await;
    let subscribed = c
        .eval(
            "plain",
            "Sub = spawn(fun() -> receive stop -> ok end end), os_sup_log_handler:subscribe(Sub)",
        )
        .await;
    assert_eq!(subscribed["value"], "ok", "{subscribed}");
    let attached = plain.wait_report(Duration::from_secs(5), |l| {
        l.contains("os_sup_mcp") && l.ends_with(" true")
    });
    assert!(
        attached.is_some(),
        "the handler and keeper run once subscribed"
    );

    c.ok("remove", json!({"name": "plain"})).await;
    let after = plain.wait_report(Duration::from_secs(3), |l| {
        !l.contains("os_sup_mcp") && l.ends_with(" false")
    });
    assert!(
        after.is_some(),
        "after detach the handler is gone and the keeper stopped"
    );
    // And stays so: the keeper is not around to put the handler back.
    // Clock: two of a keeper's 300 ms checks, had one been left to put it back.
    std::thread::sleep(Duration::from_millis(600));
    let later = plain
        .wait_report(Duration::from_secs(2), |_| true)
        .expect("still reporting");
    assert!(
        !later.contains("os_sup_mcp") && later.ends_with(" false"),
        "{later}"
    );
}
