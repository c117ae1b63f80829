//! `recompile` on a busy application (the shop fixture with SHOP_RATE=1000: importer →
//! ledger → audit): the application keeps running through repeated reloads, a reload that
//! makes it crash is an error naming the crash, a compile error keeps the old code and says
//! where, new and deleted modules are loaded and deleted, a compile that overruns its time is
//! stopped with its OS process; and on the demo fixture, nothing to do is a no-op and an edit
//! is hot-loaded. Each test works on its own copy of a fixture (the tests edit its sources);
//! the server and its nodes are killed on drop, also when a test fails.

mod common;

use common::{demo_app, fixture_copy, shop, text, wait_until, Client, Server};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// Starts the copy as node `name` with a busy importer (1000 orders a second).
async fn start_busy(c: &mut Client, name: &str, project: &Path) {
    c.ok(
        "start",
        json!({"name": name, "path": project, "env": {"SHOP_RATE": "1000"}}),
    )
    .await;
}

fn edit(file: &Path, from: &str, to: &str) {
    let source = std::fs::read_to_string(file).expect("read source");
    assert!(source.contains(from), "{from:?} is in {}", file.display());
    std::fs::write(file, source.replacen(from, to, 1)).expect("write source");
}

/// The application's children as `[{id, pid}]`, rendered: equal renderings mean no restart.
async fn children(c: &mut Client, name: &str) -> String {
    let code = "Supervisor.which_children(Shop.Supervisor) \
                |> Enum.map(fn {id, pid, _, _} -> {id, pid} end) |> Enum.sort()";
    let value = c.eval(name, code).await["value"].clone();
    value.as_str().expect("rendered value").to_string()
}

async fn shop_running(c: &mut Client, name: &str) -> bool {
    let code = "Enum.any?(Application.started_applications(), fn {app, _, _} -> app == :shop end)";
    c.eval(name, code).await["value"] == "true"
}

/// Log lines of node `name` matching `pattern` (stdout, stderr and logger events).
async fn log_matches(c: &mut Client, name: &str, pattern: &str) -> Value {
    c.ok("logs", json!({"name": name, "grep": pattern, "tail": 20}))
        .await
}

/// Orders the ledger recorded in 300 ms (each order adds 1 to its balance).
async fn orders_in_300_ms(c: &mut Client, name: &str) -> i64 {
    let code = "n = Shop.Ledger.balance(); Process.sleep(300); Shop.Ledger.balance() - n";
    let flowed = c.eval(name, code).await;
    flowed["value"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a number: {flowed}"))
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn recompile_under_load_keeps_every_process_running() {
    let (_dir, project) = fixture_copy(&shop());
    let server = Server::start();
    let mut c = server.client().await;
    start_busy(&mut c, "busy", &project).await;
    let before = children(&mut c, "busy").await;
    let source = project.join("lib/shop.ex");

    let mut times = Vec::new();
    let mut previous =
        "def handle_call(:count, _from, count), do: {:reply, count, count}".to_string();
    for round in 1..=5 {
        // One line of Shop.Audit: what `count` returns.
        let next = format!(
            "def handle_call(:count, _from, count), do: {{:reply, {{:round, {round}, count}}, count}}"
        );
        edit(&source, &previous, &next);
        previous = next;
        let begun = Instant::now();
        let result = c.call("recompile", json!({"name": "busy"})).await;
        times.push(begun.elapsed().as_millis());
        assert_ne!(result["isError"], true, "round {round}: {}", text(&result));
        let done = &result["structuredContent"];
        eprintln!(
            "round {round}: compile {} ms, load {} ms, watch {} ms, total {} ms in the node",
            done["compile_ms"], done["load_ms"], done["watch_ms"], done["duration_ms"]
        );
        assert_eq!(done["status"], "ok", "round {round}: {done}");
        assert_eq!(
            names(&done["reloaded"]),
            ["Shop.Audit"],
            "round {round}: {done}"
        );
        assert_eq!(
            names(&done["changed"]),
            ["Shop.Audit"],
            "round {round}: {done}"
        );
        assert!(
            names(&done["unchanged"]).contains(&"Shop.Ledger"),
            "the other modules of the file were recompiled, not reloaded: {done}"
        );
        assert_eq!(done["not_loaded"], json!([]), "{done}");
        assert_eq!(done["applications_stopped"], json!([]), "{done}");
        assert_eq!(done["crashes"], json!([]), "{done}");

        let count = c.eval("busy", "Shop.Audit.count()").await;
        let value = count["value"].as_str().unwrap_or_default();
        assert!(
            value.starts_with(&format!("{{:round, {round}, ")),
            "eval sees the new code in round {round}: {count}"
        );
        assert!(shop_running(&mut c, "busy").await, "round {round}");
        assert_eq!(
            children(&mut c, "busy").await,
            before,
            "no child restarted (round {round})"
        );
        // Orders still flow: a module briefly without code makes gen_server drop the
        // importer's `:tick` ("undefined handle_info") and the chain stops without a crash.
        let flowed = orders_in_300_ms(&mut c, "busy").await;
        assert!(
            flowed > 50,
            "orders still flow after round {round}: {flowed}"
        );
    }
    eprintln!("recompile times under load (ms): {times:?}");

    // The importer kept the chain busy all along, and nothing ever hit missing code.
    let audited = c.eval("busy", "elem(Shop.Audit.count(), 2)").await;
    eprintln!("orders audited: {}", audited["value"]);
    let audited: u64 = audited["value"].as_str().unwrap().parse().unwrap();
    assert!(audited > 1000, "the chain was busy: {audited}");
    let undef = log_matches(
        &mut c,
        "busy",
        "undefined|undef|not available|restart_intensity|exited",
    )
    .await;
    assert_eq!(undef["matched"], 0, "{undef}");
}

#[tokio::test]
async fn recompile_that_crashes_the_application_is_an_error() {
    let (_dir, project) = fixture_copy(&shop());
    let server = Server::start();
    let mut c = server.client().await;
    start_busy(&mut c, "crashy", &project).await;

    edit(
        &project.join("lib/shop.ex"),
        ":ok = Shop.Audit.record({id, amount})",
        ":ok = Shop.Audit.record({id, amount})\n    if amount > 0, do: raise(\"ledger broken by the edit\")",
    );
    // The ledger crashes at the importer's next batch (every 100 ms); a longer watch than the
    // default 500 ms keeps the test meaningful on a loaded machine.
    let result = c
        .call("recompile", json!({"name": "crashy", "watch_ms": 1500}))
        .await;
    let message = text(&result);
    eprintln!("crash on reload:\n{message}");
    assert_eq!(result["isError"], true, "{result}");
    let data = &result["structuredContent"];
    assert_eq!(data["status"], "error", "{data}");
    assert_eq!(names(&data["reloaded"]), ["Shop.Ledger"], "{data}");
    assert!(
        message.contains("application `shop` exited during recompile"),
        "{message}"
    );
    assert!(
        message.contains("reached_max_restart_intensity"),
        "{message}"
    );
    assert!(message.contains("Shop.Ledger"), "{message}");
    assert!(message.contains("ledger broken by the edit"), "{message}");
    assert_eq!(names(&data["applications_stopped"]), ["shop"], "{data}");
    assert!(
        !data["log"].as_array().unwrap().is_empty(),
        "the relevant log lines come along: {data}"
    );
    // The application's exit is the node's crash: the server takes it down and restarts it
    // (asking the node itself races with that).
    let crashed = c
        .wait_status("crashy", Duration::from_secs(30), |n| {
            n["last_exit"]
                .as_str()
                .is_some_and(|e| e.contains("application `shop` exited"))
        })
        .await;
    assert!(crashed["restarts"].as_u64().unwrap() >= 1, "{crashed}");
}

#[tokio::test]
async fn compile_error_keeps_the_old_code_and_says_where() {
    let (_dir, project) = fixture_copy(&shop());
    let server = Server::start();
    let mut c = server.client().await;
    start_busy(&mut c, "broken", &project).await;
    let before = children(&mut c, "broken").await;

    let noop = c.ok("recompile", json!({"name": "broken"})).await;
    assert_eq!(noop["status"], "noop", "{noop}");

    let source = project.join("lib/shop.ex");
    let good = "def count, do: GenServer.call(__MODULE__, :count)";
    let line = std::fs::read_to_string(&source)
        .unwrap()
        .lines()
        .position(|l| l.trim() == good)
        .expect("the count line")
        + 1;
    edit(&source, good, "def count, do: no_such_function_here()");
    let result = c.call("recompile", json!({"name": "broken"})).await;
    let message = text(&result);
    eprintln!("compile error:\n{message}");
    assert_eq!(result["isError"], true, "{result}");
    let data = &result["structuredContent"];
    assert_eq!(data["status"], "error", "{data}");
    assert_eq!(data["reloaded"], json!([]), "{data}");
    let diagnostic = data["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["severity"] == "error")
        .unwrap_or_else(|| panic!("an error diagnostic: {data}"));
    assert!(
        diagnostic["file"]
            .as_str()
            .unwrap()
            .ends_with("lib/shop.ex"),
        "{diagnostic}"
    );
    assert_eq!(diagnostic["line"], line, "{diagnostic}");
    assert!(
        message.contains(&format!("lib/shop.ex:{line}:")),
        "the text says file:line: {message}"
    );

    // The node keeps running its previous code, untouched.
    let count = c.eval("broken", "Shop.Audit.count()").await;
    assert!(
        count["value"].as_str().unwrap().parse::<u64>().is_ok(),
        "{count}"
    );
    assert!(shop_running(&mut c, "broken").await);
    assert_eq!(children(&mut c, "broken").await, before);
    assert!(orders_in_300_ms(&mut c, "broken").await > 50);

    // Fixed again: compiles, and the code it loads is the code that runs.
    edit(&source, "def count, do: no_such_function_here()", good);
    let fixed = c.ok("recompile", json!({"name": "broken"})).await;
    assert_eq!(fixed["status"], "ok", "{fixed}");
    assert_eq!(fixed["not_loaded"], json!([]), "{fixed}");
    assert!(shop_running(&mut c, "broken").await);
    assert_eq!(children(&mut c, "broken").await, before);
    let undef = log_matches(
        &mut c,
        "broken",
        "is undefined|undef,|undefined handle_info|not available|restart_intensity",
    )
    .await;
    assert_eq!(undef["matched"], 0, "{undef}");

    // A new module is loaded; a module whose source is gone is deleted from the node.
    std::fs::write(
        project.join("lib/extra.ex"),
        "defmodule Shop.Extra do\n  def hello, do: :added\nend\n",
    )
    .unwrap();
    let added = c.ok("recompile", json!({"name": "broken"})).await;
    assert_eq!(names(&added["added"]), ["Shop.Extra"], "{added}");
    assert_eq!(names(&added["reloaded"]), ["Shop.Extra"], "{added}");
    assert_eq!(
        c.eval("broken", "Shop.Extra.hello()").await["value"],
        ":added"
    );
    std::fs::remove_file(project.join("lib/extra.ex")).unwrap();
    let removed = c.ok("recompile", json!({"name": "broken"})).await;
    assert_eq!(names(&removed["removed"]), ["Shop.Extra"], "{removed}");
    assert_eq!(
        c.eval("broken", "Code.ensure_loaded?(Shop.Extra)").await["value"],
        "false"
    );
    assert!(shop_running(&mut c, "broken").await);
    assert_eq!(children(&mut c, "broken").await, before);
    assert!(orders_in_300_ms(&mut c, "broken").await > 50);
}

/// Live processes compiling for the recompile tool in `project` (their working directory).
fn compilers_in(project: &Path) -> Vec<u32> {
    let project = project.canonicalize().expect("project path");
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| common::alive(*pid))
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
            String::from_utf8_lossy(&cmdline).contains("OS_SUP_RECOMPILE_MARKER")
                && cwd.as_deref() == Some(project.as_path())
        })
        .collect()
}

#[tokio::test]
async fn a_compile_that_overruns_is_stopped_and_the_node_keeps_its_code() {
    let (_dir, project) = fixture_copy(&shop());
    let server = Server::start();
    let mut c = server.client().await;
    c.start_project("slow", &project).await;

    // A module whose compile takes 30 s.
    std::fs::write(
        project.join("lib/slow.ex"),
        "defmodule Shop.Slow do\n  Process.sleep(30_000)\nend\n",
    )
    .unwrap();
    let begun = Instant::now();
    let stopped = c
        .err("recompile", json!({"name": "slow", "timeout_ms": 3000}))
        .await;
    assert!(stopped.contains("did not finish in time"), "{stopped}");
    assert!(begun.elapsed().as_secs() < 10, "{:?}", begun.elapsed());
    // The compiling OS process went away with it.
    wait_until(
        Duration::from_secs(10),
        "the compiling OS process gone",
        async || compilers_in(&project),
        Vec::is_empty,
    )
    .await;
    assert_eq!(compilers_in(&project), Vec::<u32>::new());
    assert!(shop_running(&mut c, "slow").await);

    std::fs::remove_file(project.join("lib/slow.ex")).unwrap();
    edit(
        &project.join("lib/shop.ex"),
        "def count, do: GenServer.call(__MODULE__, :count)",
        "def count, do: {:after_timeout, GenServer.call(__MODULE__, :count)}",
    );
    let done = c.ok("recompile", json!({"name": "slow"})).await;
    assert_eq!(names(&done["reloaded"]), ["Shop.Audit"], "{done}");
    assert_eq!(
        c.eval("slow", "elem(Shop.Audit.count(), 0)").await["value"],
        ":after_timeout"
    );
}

#[tokio::test]
async fn recompile_hot_loads_changes_and_reports_errors() {
    // Work on a copy: the test edits source files.
    let (_dir, project) = fixture_copy(&demo_app());
    let server = Server::start();
    let mut c = server.client().await;
    c.start_project("hot", &project).await;

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
