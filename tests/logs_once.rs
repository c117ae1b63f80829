//! `logs` reads each event once, in the node's language, compactly: a crash on a node we
//! started is one logger line (no console echo of the same report beside it), rendered as
//! Elixir's Logger renders it on an Elixir node, and short in the text answer; what the program
//! prints still shows as stdout; a project's own `config :logger, backends: [...]` still wins.

mod common;

use common::{fixture_copy, shop, text, wait_until, Client, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// How long an event may take to show up in `logs`.
const ARRIVAL: Duration = Duration::from_secs(10);
/// How long to wait after an event arrived for a duplicate to show up (console lines come
/// through the stdout pipe, logger events over distribution).
const SETTLE: Duration = Duration::from_millis(700);
/// Bound on the text answer for one crash.
const CRASH_TEXT_BYTES: usize = 1500;

/// The next sequence number of a node's log: what `since` needs to read only newer lines.
async fn next_seq(c: &mut Client, name: &str) -> u64 {
    let page = c.ok("logs", json!({"name": name, "tail": 0})).await;
    page["next_seq"].as_u64().expect("next_seq")
}

/// Polls `logs` from `since` until a line matches `grep`, then waits `SETTLE` for duplicates;
/// returns the structured page and the text answer of every line since `since`.
async fn crash_logs(c: &mut Client, name: &str, since: u64, grep: &str) -> (Value, String) {
    let matching = json!({"name": name, "since": since.to_string(), "grep": grep});
    wait_until(
        ARRIVAL,
        &format!("a line matching {grep:?} on {name}"),
        async || c.ok("logs", matching.clone()).await,
        |page| page["matched"].as_u64() > Some(0),
    )
    .await;
    // Clock: a duplicate, if any, has SETTLE to show up.
    tokio::time::sleep(SETTLE).await;
    let args = json!({"name": name, "since": since.to_string()});
    let result = c.call("logs", args).await;
    assert_ne!(result["isError"], true, "{result}");
    (result["structuredContent"].clone(), text(&result))
}

/// The texts of the lines of a page whose text matches `needle`, with their sources.
fn matching(page: &Value, needle: &str) -> Vec<(String, String)> {
    page["lines"]
        .as_array()
        .expect("lines")
        .iter()
        .filter_map(|l| {
            let text = l["text"].as_str()?;
            text.contains(needle)
                .then(|| (l["source"].as_str().unwrap_or("").to_string(), text.into()))
        })
        .collect()
}

/// A `[level] time [level]` console prefix tagged a second time.
fn doubled_prefix(text: &str) -> bool {
    let re = regex::Regex::new(r"\[(error|warning|info|notice|debug)\] [\d:.]+ \[").unwrap();
    re.is_match(text)
}

/// One crash of the shop (caused by `code`) reads as one Elixir-syntax logger line
/// containing `needle`, with nothing else in the log about it.
async fn crash_once(c: &mut Client, code: &str, needle: &str) -> String {
    let since = next_seq(c, "shop").await;
    c.eval("shop", code).await;
    let (page, answer) = crash_logs(c, "shop", since, &regex::escape(needle)).await;
    let lines = page["lines"].as_array().expect("lines");
    eprintln!("--- after `{code}` ({} bytes):\n{answer}", answer.len());
    assert_eq!(
        lines.len(),
        1,
        "the crash is one line, without its echo or repeats: {answer}"
    );
    assert_eq!(lines[0]["source"], "logger", "{answer}");
    assert_eq!(lines[0]["level"], "error", "{answer}");
    let line = lines[0]["text"].as_str().unwrap();
    assert!(line.contains(needle), "{line}");
    assert!(!line.contains('\n'), "one line: {line:?}");
    assert!(
        !answer.contains("'Elixir.") && !answer.contains("{local,"),
        "Elixir syntax, not Erlang: {answer}"
    );
    assert!(!doubled_prefix(&answer), "{answer}");
    assert!(
        answer.len() < CRASH_TEXT_BYTES,
        "the text answer for one crash is compact ({} bytes): {answer}",
        answer.len()
    );
    answer
}

#[tokio::test]
async fn a_crash_on_an_elixir_node_is_read_once_in_elixir_syntax() {
    let server = Server::start();
    let mut c = server.client().await;
    c.start_project("shop", &shop()).await;

    // A function clause error in handle_cast: the GenServer's report, once.
    let answer = crash_once(
        &mut c,
        "GenServer.cast(Shop.Ledger, :bogus)",
        "GenServer Shop.Ledger terminating",
    )
    .await;
    assert!(answer.contains("** (FunctionClauseError)"), "{answer}");
    assert!(
        answer.contains("Last message: {:\"$gen_cast\", :bogus}"),
        "{answer}"
    );

    // A raise in handle_cast (`:x + :x`): the same.
    let answer = crash_once(
        &mut c,
        "Shop.Ledger.post(7, :x); Shop.Ledger.post(7, :x)",
        "GenServer Shop.Ledger terminating",
    )
    .await;
    assert!(answer.contains("** (ArithmeticError)"), "{answer}");

    // A child killed: its supervisor's report, in Elixir's words.
    let answer = crash_once(
        &mut c,
        "Process.exit(Process.whereis(Shop.Audit), :kill)",
        "Child Shop.Audit of Supervisor Shop.Supervisor terminated",
    )
    .await;
    assert!(answer.contains("** (exit) killed"), "{answer}");

    // What the program prints still reaches stdout, once.
    let since = next_seq(&mut c, "shop").await;
    c.eval("shop", r#"IO.puts(:user, "printed-by-the-shop")"#)
        .await;
    let (page, answer) = crash_logs(&mut c, "shop", since, "printed-by-the-shop").await;
    let printed = matching(&page, "printed-by-the-shop");
    assert_eq!(
        printed,
        vec![("stdout".to_string(), "printed-by-the-shop".to_string())],
        "{answer}"
    );
    // And a Logger call from the application's code reads once, from the logger.
    let since = next_seq(&mut c, "shop").await;
    c.eval(
        "shop",
        r#"require Logger; Logger.warning("shop-warning-marker")"#,
    )
    .await;
    let (page, answer) = crash_logs(&mut c, "shop", since, "shop-warning-marker").await;
    let warned = matching(&page, "shop-warning-marker");
    assert_eq!(warned.len(), 1, "{answer}");
    assert_eq!(warned[0].0, "logger", "{answer}");
}

#[tokio::test]
async fn a_plain_erlang_nodes_error_report_is_read_once() {
    let server = Server::start();
    let mut c = server.client().await;
    c.start_erl("plain").await;
    let since = next_seq(&mut c, "plain").await;
    let code = "logger:error(\"plain-report ~p\", [marker]), \
                proc_lib:spawn(fun() -> erlang:error(plain_crash_marker) end), ok";
    let out = c
        .ok(
            "eval",
            json!({"name": "plain", "code": code, "lang": "erlang"}),
        )
        .await;
    assert_eq!(out["value"], "ok", "{out}");
    let (page, answer) = crash_logs(&mut c, "plain", since, "plain_crash_marker").await;
    eprintln!("--- plain node ({} bytes):\n{answer}", answer.len());
    let report = matching(&page, "plain-report");
    assert_eq!(report.len(), 1, "{answer}");
    assert_eq!(report[0].0, "logger", "{answer}");
    assert!(report[0].1.ends_with("plain-report marker"), "{answer}");
    let crash = matching(&page, "plain_crash_marker");
    assert_eq!(crash.len(), 1, "the crash report, once: {answer}");
    assert_eq!(crash[0].0, "logger", "{answer}");
    assert!(
        !answer.contains("CRASH REPORT") && !answer.contains("ERROR REPORT"),
        "no console echo: {answer}"
    );
}

/// A project that configures Elixir's console backend itself keeps it: its console lines
/// show on stdout (beside the logger event), and the text form does not tag them twice.
#[tokio::test]
async fn a_projects_own_console_backend_config_wins() {
    let (_dir, project) = fixture_copy(&shop());
    std::fs::create_dir_all(project.join("config")).unwrap();
    std::fs::write(
        project.join("config/config.exs"),
        "import Config\nconfig :logger, backends: [:console]\n",
    )
    .unwrap();
    let compiled = std::process::Command::new("mix")
        .arg("compile")
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(compiled.status.success(), "{compiled:?}");

    let server = Server::start();
    let mut c = server.client().await;
    c.start_project("loud", &project).await;
    let since = next_seq(&mut c, "loud").await;
    c.eval("loud", "GenServer.cast(Shop.Ledger, :bogus)").await;
    let deadline = Instant::now() + ARRIVAL;
    let (page, answer) = loop {
        let (page, answer) =
            crash_logs(&mut c, "loud", since, "GenServer Shop.Ledger terminating").await;
        let sources: Vec<_> = matching(&page, "GenServer Shop.Ledger terminating")
            .into_iter()
            .map(|(source, _)| source)
            .collect();
        if sources.contains(&"stdout".to_string()) || Instant::now() > deadline {
            break (page, answer);
        }
    };
    let seen = matching(&page, "GenServer Shop.Ledger terminating");
    assert!(
        seen.iter().any(|(source, _)| source == "stdout"),
        "the project's console backend prints: {answer}"
    );
    assert!(
        seen.iter().any(|(source, _)| source == "logger"),
        "{answer}"
    );
    assert!(!doubled_prefix(&answer), "{answer}");
}
