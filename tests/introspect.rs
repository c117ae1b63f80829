//! Looking inside nodes: supervision trees, processes, state, applications, system, ETS and
//! modules on the fixture, bad targets, and attaching to a plain Erlang node we did not start.

mod common;

use common::erl::ErlNode;

use common::{demo_app, demo_node, text, timed, wait_until, Client, Server};
use serde_json::{json, Value};

use std::time::{Duration, Instant};

/// Depth-first search of a supervision tree for the node named `name`.
fn find<'a>(nodes: &'a Value, name: &str) -> Option<&'a Value> {
    for node in nodes.as_array()? {
        if node["name"] == name || node["id"] == name {
            return Some(node);
        }
        if let Some(found) = find(&node["children"], name) {
            return Some(found);
        }
    }
    None
}

/// Every supervisor's pid in a tree.
fn supervisor_pids(nodes: &Value, out: &mut Vec<String>) {
    for node in nodes.as_array().into_iter().flatten() {
        if node["kind"] != "worker" {
            out.push(node["pid"].as_str().unwrap_or_default().to_string());
        }
        supervisor_pids(&node["children"], out);
    }
}

async fn start_bulk(c: &mut Client, name: &str) {
    c.ok(
        "start",
        json!({"name": name, "path": demo_app(), "env": {"DEMO_BULK_CHILDREN": "5000"}}),
    )
    .await;
    // The bulk children start in a task after boot.
    let active = "DynamicSupervisor.count_children(DemoApp.BulkSup).active";
    wait_until(
        Duration::from_secs(30),
        "bulk children all started",
        async || c.eval(name, active).await,
        |count| count["value"] == "5000",
    )
    .await;
}

#[tokio::test]
async fn the_fixture_tree_has_the_right_kinds_and_strategies() {
    let server = Server::start();
    let mut c = server.client().await;
    start_bulk(&mut c, "tree").await;

    let tree = c.ok("supervision_tree", json!({"name": "tree"})).await;
    let roots = &tree["roots"];
    let top = find(roots, "DemoApp.Supervisor").unwrap_or_else(|| panic!("{tree}"));
    assert_eq!(top["kind"], "supervisor");
    assert_eq!(top["strategy"], "one_for_one");
    let workers = find(roots, "DemoApp.Workers").unwrap();
    assert_eq!(workers["strategy"], "rest_for_one");
    let worker_sup = find(roots, "DemoApp.WorkerSup").unwrap();
    assert_eq!(worker_sup["kind"], "dynamic_supervisor");
    assert_eq!(worker_sup["child_count"], 3);
    assert!(worker_sup["children"]
        .as_array()
        .unwrap()
        .iter()
        .all(|w| w["kind"] == "worker"));
    let counter = find(roots, "DemoApp.Counter").unwrap();
    assert_eq!(counter["kind"], "worker");
    assert_eq!(counter["restart"], "permanent");
    let bulk = find(roots, "DemoApp.BulkSup").unwrap();
    assert_eq!(bulk["kind"], "dynamic_supervisor");
    assert_eq!(bulk["child_count"], 5000);
    assert_eq!(
        bulk["truncated_children"], 4950,
        "summarised, not listed in full"
    );
    // A pool folds: the 50 bulk workers shown are one line and one example, with the count.
    let shown = bulk["children"].as_array().unwrap();
    assert_eq!(shown.len(), 1, "{bulk}");
    assert_eq!(shown[0]["folded"], 50, "{bulk}");
    assert!(
        shown[0]["pid"].is_string(),
        "an example to drill into: {bulk}"
    );
    let text = common::text(&c.call("supervision_tree", json!({"name": "tree"})).await);
    assert!(
        text.contains("DemoApp.Supervisor")
            && text.contains(" ×50, e.g. ")
            && text.len() < 3 * 1024,
        "{text}"
    );
    assert!(!text.contains("depth limit"), "nothing was cut: {text}");

    // Walking never disturbs a supervisor.
    let mut before = Vec::new();
    supervisor_pids(roots, &mut before);
    assert!(before.len() >= 4);
    for _ in 0..100 {
        c.ok("supervision_tree", json!({"name": "tree"})).await;
    }
    let again = c.ok("supervision_tree", json!({"name": "tree"})).await;
    let mut after = Vec::new();
    supervisor_pids(&again["roots"], &mut after);
    assert_eq!(before, after, "a walk restarted a supervisor");

    // Restarts are marked where they happened: a named child by its id, the children of a
    // DynamicSupervisor (unnamed, alike) on their supervisor; nothing else is marked.
    let kill_counter_twice = "Process.exit(Process.whereis(DemoApp.Counter), :boom)
        Process.sleep(100)
        Process.exit(Process.whereis(DemoApp.Counter), :boom)
        [{_, w, _, _} | _] = DynamicSupervisor.which_children(DemoApp.WorkerSup)
        Process.exit(w, :kill)";
    c.eval("tree", kill_counter_twice).await;
    let marked = wait_until(
        Duration::from_secs(10),
        "the restarts marked in the tree",
        async || c.ok("supervision_tree", json!({"name": "tree"})).await,
        |t| find(&t["roots"], "DemoApp.WorkerSup").unwrap()["child_restarts"]["count"] == 1,
    )
    .await;
    let counter = find(&marked["roots"], "DemoApp.Counter").unwrap();
    assert_eq!(counter["restarted"]["count"], 2, "{counter}");
    assert_eq!(counter["restarted"]["last_reason"], ":boom", "{counter}");
    let cache = find(&marked["roots"], "DemoApp.Cache").unwrap();
    assert!(cache.get("restarted").is_none(), "{cache}");
    let text = common::text(&c.call("supervision_tree", json!({"name": "tree"})).await);
    let line = |name: &str| text.lines().find(|l| l.contains(name)).unwrap_or_default();
    assert!(
        line("DemoApp.Counter ").contains(" restarted 2×, last "),
        "{text}"
    );
    assert!(
        line("DemoApp.WorkerSup ").contains(" children restarted 1×, last "),
        "{text}"
    );
    assert_eq!(text.matches("restarted").count(), 2, "{text}");

    // The big supervisor as a root, in Erlang syntax.
    let bulk_only = c
        .ok("supervision_tree", json!({"name": "tree", "root": "Elixir.DemoApp.BulkSup", "max_children": 10, "format": "erlang"}))
        .await;
    let root = &bulk_only["roots"][0];
    assert_eq!(root["child_count"], 5000, "{bulk_only}");
    assert_eq!(root["children"][0]["folded"], 10, "{bulk_only}");
    assert!(root["pid"].as_str().unwrap().starts_with('<'));
}

#[tokio::test]
async fn processes_state_ets_modules_and_system() {
    let (_server, mut c) = demo_node("look").await;

    // A deliberately bloated process ranks first by memory.
    let bloated = c
        .eval(
            "look",
            "spawn(fn -> l = Enum.to_list(1..2_000_000); receive do :never -> l end end)",
        )
        .await["value"]
        .as_str()
        .unwrap()
        .to_string();
    let top = c
        .ok(
            "processes",
            json!({"name": "look", "sort_by": "memory", "limit": 5}),
        )
        .await;
    assert_eq!(top["rows"][0]["pid"], bloated, "{top}");
    let busy = c
        .ok(
            "processes",
            json!({"name": "look", "sort_by": "reductions", "window_ms": 200, "limit": 3}),
        )
        .await;
    assert_eq!(busy["rows"].as_array().unwrap().len(), 3);
    let filtered = c
        .ok(
            "processes",
            json!({"name": "look", "filter": "DemoApp.Counter"}),
        )
        .await;
    assert!(
        !filtered["rows"].as_array().unwrap().is_empty(),
        "{filtered}"
    );

    let info = c
        .ok(
            "process_info",
            json!({"name": "look", "pid": "DemoApp.Counter"}),
        )
        .await;
    assert_eq!(info["registered_name"], "DemoApp.Counter", "{info}");
    assert!(info["message_queue_len"].is_number());
    let by_pid = c
        .ok("process_info", json!({"name": "look", "pid": bloated}))
        .await;
    assert_eq!(by_pid["pid"], bloated);
    let state = c
        .ok(
            "get_state",
            json!({"name": "look", "pid": "DemoApp.Counter"}),
        )
        .await;
    assert!(
        state["state"].as_str().unwrap().contains("count: 0"),
        "{state}"
    );
    let erl_state = c
        .ok(
            "get_state",
            json!({"name": "look", "pid": "DemoApp.Counter", "format": "erlang"}),
        )
        .await;
    assert!(
        erl_state["state"]
            .as_str()
            .unwrap()
            .contains("#{count => 0}"),
        "{erl_state}"
    );
    // A large state: its largest parts first, each sized, then its start.
    c.eval(
        "look",
        "{:ok, pid} = Agent.start(fn -> %{history: Enum.map(1..100_000, &{&1, \"entry\"}), \
         mode: :steady} end); Process.register(pid, :big_state)",
    )
    .await;
    let big = c
        .call("get_state", json!({"name": "look", "pid": "big_state"}))
        .await;
    let big_text = common::text(&big);
    assert!(big_text.len() < 6000, "{} bytes", big_text.len());
    let parts: Vec<&str> = big_text.lines().skip(1).take(4).collect();
    assert!(
        parts[0].starts_with("state: ") && parts[0].contains("MB"),
        "{big_text}"
    );
    assert!(
        parts[1].starts_with("  :history: list of 100000, "),
        "{big_text}"
    );
    assert!(parts[2].starts_with("  :mode: :steady, "), "{big_text}");
    assert!(
        parts[3].starts_with("state, its first 4.0KB:"),
        "{big_text}"
    );

    let tables = c.ok("ets", json!({"name": "look"})).await;
    assert!(
        tables["tables"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == ":demo_cache"),
        "{tables}"
    );
    let table = c
        .ok("ets", json!({"name": "look", "table": "demo_cache"}))
        .await;
    assert!(!table["rows"].as_array().unwrap().is_empty(), "{table}");

    // An unnamed table (a Registry's partitions are such) opens by the name the tools print for
    // it, bare or as `diagnose` writes it; two of one name are listed by id.
    c.eval(
        "look",
        r#"me = self()
        spawn(fn ->
          t = :ets.new(:"Look.KeyPartition0", [:duplicate_bag, :public])
          :ets.insert(t, [{"room", 1}, {"room", 2}])
          :ets.new(:"Look.Twice", [])
          :ets.new(:"Look.Twice", [])
          send(me, :made)
          Process.sleep(:infinity)
        end)
        receive do :made -> :ok after 5000 -> :timeout end"#,
    )
    .await;
    let unnamed = c
        .ok(
            "ets",
            json!({"name": "look", "table": "Look.KeyPartition0"}),
        )
        .await;
    assert_eq!(unnamed["rows"].as_array().unwrap().len(), 2, "{unnamed}");
    let id = unnamed["info"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{unnamed}"));
    let printed = format!("Look.KeyPartition0 (unnamed, {id})");
    let again = c.ok("ets", json!({"name": "look", "table": printed})).await;
    assert_eq!(again["info"]["id"], unnamed["info"]["id"], "{again}");
    expect_error(
        &mut c,
        json!({"tool": "ets", "name": "look", "table": "Look.Twice"}),
        "2 unnamed tables are called look.twice; give one of their ids: #reference<",
    )
    .await;

    let module = c
        .call("docs", json!({"name": "look", "target": "DemoApp.Counter"}))
        .await;
    assert!(common::text(&module).contains("value/0"), "{module}");

    let apps = c.ok("applications", json!({"name": "look"})).await;
    assert!(
        apps["applications"].to_string().contains("demo_app"),
        "{apps}"
    );
    let env = c
        .ok("applications", json!({"name": "look", "app": "logger"}))
        .await;
    assert!(env["env_count"].as_u64().is_some(), "{env}");

    let system = c.ok("system_info", json!({"name": "look"})).await;
    assert!(
        system["limits"]["processes"]["count"].as_u64().unwrap() > 10,
        "{system}"
    );
    assert!(system["memory"].is_object());
}

#[tokio::test]
async fn bad_targets_get_clear_errors_quickly() {
    let (_server, mut c) = demo_node("bad").await;
    let quick = Duration::from_secs(5);
    let missing_targets = [
        json!({"tool": "process_info", "name": "bad", "pid": "<0.99999.0>"}),
        json!({"tool": "get_state", "name": "bad", "pid": "NoSuch.Name"}),
        json!({"tool": "process_info", "name": "bad", "pid": "garbage pid"}),
        json!({"tool": "docs", "name": "bad", "target": "No.Such.Module"}),
        json!({"tool": "ets", "name": "bad", "table": "no_such_table"}),
        json!({"tool": "applications", "name": "bad", "app": "no_such_app"}),
        json!({"tool": "supervision_tree", "name": "bad", "root": "nothing_here"}),
    ];
    for args in missing_targets {
        expect_error(&mut c, args, NOT_FOUND).await;
    }
    expect_error(
        &mut c,
        json!({"tool": "processes", "name": "ghost"}),
        "no node named",
    )
    .await;

    let dead_pid = returned_text(
        &c.eval(
            "bad",
            "{pid, ref} = spawn_monitor(fn -> :ok end); receive do {:DOWN, ^ref, _, _, _} -> inspect(pid) end",
        )
        .await,
    );
    expect_error(
        &mut c,
        json!({"tool": "get_state", "name": "bad", "pid": dead_pid}),
        NOT_FOUND,
    )
    .await;

    let plain_pid = returned_text(
        &c.eval(
            "bad",
            "pid = spawn(fn -> receive do :never -> :ok end end); inspect(pid)",
        )
        .await,
    );
    expect_error(
        &mut c,
        json!({"tool": "get_state", "name": "bad", "pid": plain_pid}),
        "otp",
    )
    .await;

    // A process suspended by another process never answers: a timeout, not a hang.
    c.eval("bad", "spawn(fn -> :erlang.suspend_process(Process.whereis(DemoApp.Cache)); Process.sleep(:infinity) end); :ok")
        .await;
    expect_error(
        &mut c,
        json!({"tool": "get_state", "name": "bad", "pid": "DemoApp.Cache", "timeout_ms": 500}),
        "suspended|timed out|timeout",
    )
    .await;
    // sys:suspend still answers system messages: a prompt answer either way.
    c.eval("bad", ":sys.suspend(DemoApp.Counter)").await;
    let suspended = json!({"name": "bad", "pid": "DemoApp.Counter", "timeout_ms": 500});
    let (_, took) = timed(c.call("get_state", suspended)).await;
    assert!(took < quick);
    // The node is fine afterwards.
    assert_eq!(c.eval("bad", "1 + 1").await["value"], "2");
}

/// The string an eval returned, without its quotes (`#PID<0.1.0>` for `inspect(pid)`).
fn returned_text(value: &Value) -> String {
    let text = value["value"].as_str().unwrap_or_else(|| panic!("{value}"));
    text.trim_matches('"').to_string()
}

/// The pid an eval returned with `inspect(pid)`, as `<0.1.0>`.
fn returned_pid(value: &Value) -> String {
    returned_text(value).trim_start_matches("#PID").to_string()
}

/// `Process.info(pid, key)` of the process `pid` (`<0.1.0>`), rendered by eval.
async fn info_of(c: &mut Client, node: &str, pid: &str, key: &str) -> String {
    let code = format!("Process.info(:erlang.list_to_pid(~c\"{pid}\"), :{key})");
    c.eval(node, &code).await["value"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn get_state_sends_nothing_to_tasks_and_plain_processes() {
    let (_server, mut c) = demo_node("sys").await;

    // Both sit in a `receive` that would take a system message: only an empty mailbox after
    // the call proves none was sent.
    let task = returned_pid(
        &c.eval(
            "sys",
            "{:ok, pid} = Task.start(fn -> receive do :never -> :ok end end); inspect(pid)",
        )
        .await,
    );
    let plain = returned_pid(
        &c.eval(
            "sys",
            "pid = spawn(fn -> receive do :never -> :ok end end); inspect(pid)",
        )
        .await,
    );
    for (pid, kind) in [(&task, "Task"), (&plain, "plain process")] {
        let dictionary = info_of(&mut c, "sys", pid, "dictionary").await;
        let get_state = json!({"name": "sys", "pid": pid, "timeout_ms": 5000});
        let (err, took) = timed(c.err("get_state", get_state)).await;
        eprintln!("get_state on a {kind}: error in {took:?}: {err}");
        // A message sent would cost the whole timeout (5 s); the bound is loose for slow
        // machines, the message says why nothing was sent.
        assert!(took < Duration::from_millis(1000), "{kind}: took {took:?}");
        assert!(
            err.contains("does not answer system messages") && err.contains(kind),
            "{kind}: {err}"
        );
        assert!(err.contains("process_info"), "{err}");
        assert_eq!(
            info_of(&mut c, "sys", pid, "messages").await,
            "{:messages, []}",
            "{kind}: its mailbox is untouched"
        );
        assert_eq!(
            info_of(&mut c, "sys", pid, "dictionary").await,
            dictionary,
            "{kind}: its dictionary is untouched"
        );
    }

    // OTP processes still answer: a GenServer, an Agent and an Erlang gen_statem.
    let counter = c
        .ok(
            "get_state",
            json!({"name": "sys", "pid": "DemoApp.Counter"}),
        )
        .await;
    assert!(
        counter["state"].as_str().unwrap().contains("count: 0"),
        "{counter}"
    );
    let agent = returned_pid(
        &c.eval(
            "sys",
            "{:ok, pid} = Agent.start(fn -> %{agent: 7} end); inspect(pid)",
        )
        .await,
    );
    let agent_state = c
        .ok("get_state", json!({"name": "sys", "pid": agent}))
        .await;
    assert!(
        agent_state["state"].as_str().unwrap().contains("agent: 7"),
        "{agent_state}"
    );
    let statem = returned_pid(
        &c.eval(
            "sys",
            r#"
            defmodule SysTest.Statem do
              @behaviour :gen_statem
              def callback_mode, do: :state_functions
              def init(data), do: {:ok, :idle, data}
              def idle(_type, _event, data), do: {:keep_state, data}
            end
            {:ok, pid} = :gen_statem.start(SysTest.Statem, %{statem: 42}, [])
            inspect(pid)
            "#,
        )
        .await,
    );
    let statem_state = c
        .ok("get_state", json!({"name": "sys", "pid": statem}))
        .await;
    let rendered = statem_state["state"].as_str().unwrap();
    assert!(
        rendered.contains(":idle") && rendered.contains("statem: 42"),
        "{statem_state}"
    );
    assert_eq!(statem_state["behaviour"], ":gen_statem", "{statem_state}");
    assert_eq!(statem_state["module"], "SysTest.Statem", "{statem_state}");
}

/// How the helper says that a target does not exist.
const NOT_FOUND: &str = "not found|no process|not registered|no such|not loaded|unknown|does not exist|not alive|dead|no application|no table|no module|no ets table|is not running|not an otp|neither";

/// Calls the tool named in `args["tool"]`, which must fail promptly with `needle` in its text.
async fn expect_error(c: &mut Client, mut args: Value, needle: &str) {
    let started = Instant::now();
    let tool = args["tool"].as_str().unwrap().to_string();
    args.as_object_mut().unwrap().remove("tool");
    let err = c.err(&tool, args).await;
    let found = regex::Regex::new(needle)
        .unwrap()
        .is_match(&err.to_lowercase());
    assert!(found, "{tool}: expected /{needle}/ in: {err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{tool} took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn attach_to_a_plain_erlang_node_and_detach() {
    let plain = ErlNode::build("plain").short_name().start();
    let server = Server::start();
    let mut c = server.client().await;
    let args = json!({"name": "plain", "node": plain.name, "cookie": plain.cookie});
    let attached = c.attach(args.clone()).await;
    assert_eq!(attached["state"], "attached");

    let status = c.ok("status", json!({"name": "plain"})).await;
    assert!(status["info"]["elixir_version"].is_null(), "{status}");
    let out = c.eval("plain", "lists:sum([1, 2, 3])").await;
    assert_eq!(
        (out["value"].as_str(), out["lang"].as_str()),
        (Some("6"), Some("erlang"))
    );
    let kernel = c
        .ok(
            "supervision_tree",
            json!({"name": "plain", "root": "kernel"}),
        )
        .await;
    assert!(find(&kernel["roots"], "kernel_sup").is_some(), "{kernel}");
    let procs = c
        .ok("processes", json!({"name": "plain", "limit": 3}))
        .await;
    assert_eq!(procs["rows"].as_array().unwrap().len(), 3);

    // An attached node is sampled as a started one is; it runs on this host, so its OS
    // process's meters are read from /proc too.
    let vitals = c.vitals_of_at_least("plain", 2).await;
    let keys = vitals["keys"].as_array().unwrap();
    let column = |key: &str| keys.iter().position(|k| k == key).unwrap();
    let rows = vitals["rows"].as_array().unwrap();
    assert!(rows.len() >= 2, "{vitals}");
    let last = rows.last().unwrap();
    assert!(
        last[column("memory_total")].as_u64().unwrap() > 1_000_000,
        "{vitals}"
    );
    assert!(last[column("os_fds")].as_u64().unwrap() > 0, "{vitals}");

    let refused = c.err("stop", json!({"name": "plain"})).await;
    assert!(refused.contains("attached"), "{refused}");
    let taken = c.err("attach", args.clone()).await;
    assert!(taken.contains("already in use"), "{taken}");
    let wrong_cookie = c
        .err(
            "attach",
            json!({"name": "other", "node": plain.name, "cookie": "wrong"}),
        )
        .await;
    assert!(wrong_cookie.contains("cookie"), "{wrong_cookie}");
    let nowhere = c
        .err(
            "attach",
            json!({"name": "other", "node": "nobody@127.0.0.1", "cookie": "x"}),
        )
        .await;
    assert!(nowhere.contains("not registered"), "{nowhere}");

    let detached = c.ok("remove", json!({"name": "plain"})).await;
    assert_eq!(detached["name"], "plain");
    assert!(
        common::alive(plain.child.id()),
        "detach leaves the node running"
    );
    let gone = c.err("eval", json!({"name": "plain", "code": "1"})).await;
    assert!(gone.contains("no node named"), "{gone}");
    // Attaching again works: the helper is loaded anew.
    c.ok("attach", args).await;
    assert_eq!(c.eval("plain", "node()").await["value"], plain.name);
}

/// A process with 300 links to as many processes, and one monitored 10,000 times by one
/// process: `process_info` counts them all, groups them by the other end and says how many
/// the list leaves out.
#[tokio::test]
async fn links_and_monitors_are_counted_grouped_and_cut_visibly() {
    let (_server, mut c) = demo_node("many").await;
    c.eval(
        "many",
        "hub = spawn(fn -> Process.sleep(:infinity) end); Process.register(hub, :hub)
         eval = self()
         linker = spawn(fn ->
           for _ <- 1..300, do: spawn_link(fn -> Process.sleep(:infinity) end)
           send(eval, :linked)
           Process.sleep(:infinity)
         end)
         Process.register(linker, :linker)
         watcher = spawn(fn ->
           for _ <- 1..10_000, do: Process.monitor(hub)
           send(eval, :monitoring)
           Process.sleep(:infinity)
         end)
         Process.register(watcher, :watcher)
         receive do :linked -> :ok end
         receive do :monitoring -> :ok end",
    )
    .await;
    let linker = c
        .call("process_info", json!({"name": "many", "pid": "linker"}))
        .await;
    let data = &linker["structuredContent"];
    assert_eq!(data["link_count"], 300, "{linker}");
    let links = data["links"].as_array().unwrap();
    assert!(links.len() <= 51, "{linker}");
    let last = links.last().unwrap().as_str().unwrap();
    assert!(last.starts_with("… 250 more"), "{last}");
    assert!(
        text(&linker).contains(", … 297 more of 300]"),
        "{}",
        text(&linker)
    );
    let hub = c
        .call("process_info", json!({"name": "many", "pid": "hub"}))
        .await;
    let data = &hub["structuredContent"];
    assert_eq!(data["monitored_by_count"], 10_000, "{hub}");
    let by = data["monitored_by"].as_array().unwrap();
    assert_eq!(by.len(), 1, "one process, grouped: {hub}");
    assert!(by[0].as_str().unwrap().ends_with("× 10000"), "{hub}");
    assert!(text(&hub).contains("× 10000"), "{}", text(&hub));
    // The helper's own processes and modules are not the node's.
    let top = text(
        &c.call(
            "processes",
            json!({"name": "many", "sort_by": "memory", "limit": 100}),
        )
        .await,
    );
    assert!(!top.contains("os_sup_"), "{top}");
    let groups = text(
        &c.call(
            "processes",
            json!({"name": "many", "group_by": "initial_call", "limit": 100}),
        )
        .await,
    );
    assert!(!groups.contains("os_sup_"), "{groups}");
    let found = text(
        &c.call("find", json!({"name": "many", "query": "pinfo"}))
            .await,
    );
    assert!(!found.contains("os_sup_"), "{found}");
    c.ok("stop", json!({"name": "many"})).await;
}
