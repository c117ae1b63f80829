//! The one-call health report: `diagnose` names each ailment of the ailments fixture (a
//! process leak, a two-server call cycle, a child crashing every second, a growing ETS table,
//! callers crowding one slow server) as its first finding with the right module and function,
//! says nothing of a healthy demo app, and leads to the origin of a leak or a deadlock in two
//! calls; `processes` with `group_by` puts the leak's group at the top. From the history the
//! server keeps, each resource that runs out (refc binaries, atoms, ports, ETS tables, a
//! process's memory, file descriptors) is the first finding with its rate, its time to the
//! limit and its holder. Every node dies with its server, also when an assertion fails.

mod common;

use common::{
    ailments, demo_app, diagnose, diagnose_until, first, history_span, next_call, next_of, shop,
    start_ailing, text, wait_until, Client, Server, DIAGNOSE_BYTES,
};
use os_sup_mcp::node::diagnose::TREND_MIN_SPAN;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// `process_info` on the finding's pid, through the call the finding suggests: its text.
async fn follow(c: &mut Client, name: &str, finding: &Value) -> String {
    let next = &finding["next"];
    let (tool, args) = next_call(next);
    assert_eq!(tool, "process_info", "{next}");
    assert_eq!(args["name"], name);
    assert_eq!(args["pid"], finding["pid"]);
    let result = c.call(&tool, args).await;
    let answer = text(&result);
    assert_ne!(result["isError"], json!(true), "{answer}");
    eprintln!("{next} ({} bytes):\n{answer}", answer.len());
    assert!(answer.len() <= DIAGNOSE_BYTES, "{answer}");
    answer
}

/// The text's line that starts with `key:`.
fn line<'a>(answer: &'a str, key: &str) -> &'a str {
    answer
        .lines()
        .find(|l| l.starts_with(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key} line: {answer}"))
}

#[tokio::test]
async fn a_leak_is_found_and_traced_to_its_spawner_in_two_calls() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "leak", "leak").await;

    let (answer, report) = diagnose(&mut c, "leak").await;
    let finding = first(&report, &answer, "leak", &["Ailments.Leak"]);
    assert_eq!(finding["function"], "await_ack/1", "{answer}");
    let evidence = finding["line"].as_str().unwrap();
    assert!(evidence.contains("Ailments.Leak spawn → "), "{evidence}");
    assert!(evidence.contains("lib/ailments/leak.ex:"), "{evidence}");
    assert!(
        evidence.contains("its mailbox: 1× {:reminder, "),
        "{evidence}"
    );
    // What would release them: nothing in the project sends the ack they wait for.
    assert!(
        evidence.contains("it waits for {:ack, _}, which no send in the project's code writes"),
        "{evidence}"
    );
    assert_eq!(report["healthy"], false);

    let info = follow(&mut c, "leak", finding).await;
    assert!(line(&info, "parent").contains("Ailments.Leak"), "{info}");

    // processes grouped by current function: the leak's group grows fastest.
    let grouped = c
        .ok(
            "processes",
            json!({"name": "leak", "group_by": "current_function", "window_ms": 500}),
        )
        .await;
    let top = &grouped["groups"][0];
    assert!(
        top["group"]
            .as_str()
            .unwrap()
            .starts_with("Ailments.Leak.await_ack/1"),
        "{grouped}"
    );
    assert!(top["change"].as_i64().unwrap() > 0, "{grouped}");
    assert!(top["sample"].as_str().unwrap().contains("<0."), "{grouped}");
    // By parent without a window, ranked by count: the leak's spawner holds the most.
    let by_parent = c
        .ok("processes", json!({"name": "leak", "group_by": "parent"}))
        .await;
    let spawner = by_parent["groups"][0]["group"].as_str().unwrap();
    assert!(
        spawner.starts_with("Ailments.Leak (sample in "),
        "{by_parent}"
    );
    let refused = c
        .err("processes", json!({"name": "leak", "sort_by": "count"}))
        .await;
    assert!(refused.contains("group_by"), "{refused}");
    c.ok("stop", json!({"name": "leak"})).await;
}

/// Processes that pile up waiting for a message end at the code that should send it: the
/// finding names what their receive takes and the project's function that sends it, and its
/// next call shows that function, where three uploads in four are released.
#[tokio::test]
async fn a_leak_of_waiting_processes_ends_at_the_code_that_should_release_them() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "unreleased", "unreleased").await;

    let (answer, report) = diagnose_until(&mut c, "unreleased", "leak").await;
    let finding = first(&report, &answer, "leak", &["Ailments.Upload"]);
    let evidence = finding["line"].as_str().unwrap();
    assert!(
        evidence.contains(
            "it waits for {:uploaded, _, _}, sent by Ailments.Uploads.finish/2 \
             lib/ailments/uploads.ex:"
        ),
        "{evidence}"
    );
    let next = &finding["next"];
    let (tool, args) = next_call(next);
    assert_eq!(tool, "source", "{next}");
    assert_eq!(args["target"], "Ailments.Uploads.finish/2");
    let shown = c.call(&tool, args).await;
    assert_ne!(shown["isError"], json!(true), "{shown}");
    assert!(text(&shown).contains("rem(size, 4) != 0"), "{shown}");
    c.ok("stop", json!({"name": "unreleased"})).await;
}

/// Callers piling up on a server that is idle: it holds their calls unanswered, and the
/// message that would answer them is cast to it in a shape none of its clauses take (its
/// catch-all drops it). The server's finding ends at that cast, the callers piling up behind it
/// told by it.
#[tokio::test]
async fn callers_held_by_an_idle_server_end_at_the_message_it_never_takes() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "gate", "gate").await;

    // The riders pile up behind the gate: one finding, the gate's, says so once the walks
    // see them grow.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (answer, report) = loop {
        let (answer, report) = diagnose(&mut c, "gate").await;
        let first = &report["findings"][0];
        if first["kind"] == "contention"
            && first["line"].as_str().unwrap().contains("; they pile up: ")
        {
            break (answer, report);
        }
        assert!(Instant::now() < deadline, "{answer}");
    };
    let held = &report["findings"][0];
    let line = held["line"].as_str().unwrap();
    assert!(line.contains("blocked in calls on Ailments.Gate"), "{line}");
    // (`loop/7` on OTP 25, `loop/5` on OTP 29: the release's own loop, as it reads)
    assert!(
        line.contains("it is idle in :gen_server.loop/") && line.contains(" with an empty queue"),
        "{line}"
    );
    assert!(
        line.contains(
            "Ailments.Riders.ride/1 lib/ailments/gate.ex:59 casts it {:release_ticket, _}, and \
             no handle_cast/2 clause of Ailments.Gate takes it but the one that takes anything \
             (lib/ailments/gate.ex:32) (its clauses take {:release, _})"
        ),
        "{line}"
    );
    assert!(line.contains("(sample in Ailments.Riders.ride/1"), "{line}");
    let next = next_of(
        "source",
        json!({"name": "gate", "target": "Ailments.Riders.ride/1"}),
    );
    assert_eq!(held["next"], next, "{answer}");
    // The riders' leak is that finding's, not one of its own.
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["kind"] != "leak"),
        "{answer}"
    );
    c.ok("stop", json!({"name": "gate"})).await;
}

#[tokio::test]
async fn a_call_cycle_is_a_deadlock_traced_to_its_supervisor_in_two_calls() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "cycle", "cycle").await;

    // Two calls after `start`: this one, then `process_info` on the process it names.
    let (answer, report) = diagnose(&mut c, "cycle").await;
    let finding = first(
        &report,
        &answer,
        "deadlock",
        &["Ailments.Ping", "Ailments.Pong"],
    );
    let function = finding["function"].as_str().unwrap();
    assert!(
        ["handle_info/2", "handle_call/3"].contains(&function),
        "{answer}"
    );
    let evidence = finding["line"].as_str().unwrap();
    assert!(evidence.starts_with("DEADLOCK"), "{evidence}");
    assert!(
        evidence.contains("Ailments.Ping") && evidence.contains("Ailments.Pong"),
        "{evidence}"
    );

    let info = follow(&mut c, "cycle", finding).await;
    assert!(line(&info, "parent").contains("Ailments.Cycle"), "{info}");
    c.ok("stop", json!({"name": "cycle"})).await;
}

#[tokio::test]
async fn a_child_crashing_every_second_shows_as_restarts() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "crash", "crash").await;

    let (answer, report) = diagnose_until(&mut c, "crash", "restarts").await;
    let finding = first(&report, &answer, "restarts", &["Ailments.Crasher"]);
    assert_eq!(finding["function"], "handle_info/2", "{answer}");
    assert!(
        finding["line"]
            .as_str()
            .unwrap()
            .contains("Ailments.Supervisor"),
        "{answer}"
    );
    assert_eq!(finding["next"]["tool"], "logs", "{answer}");
    c.ok("stop", json!({"name": "crash"})).await;
}

/// A DynamicSupervisor's children have no id: the restart is named by the function that
/// starts the child, and the next call finds the supervisor's report of it.
#[tokio::test]
async fn an_unnamed_child_restarted_is_named_by_its_start_function() {
    let server = Server::start();
    let mut c = server.client().await;
    c.start_demo("dyn").await;
    let kill = "[{_, w, _, _} | _] = DynamicSupervisor.which_children(DemoApp.WorkerSup)
        Process.exit(w, :kill)";
    c.eval("dyn", kill).await;
    let (answer, report) = diagnose_until(&mut c, "dyn", "restarts").await;
    let finding = first(&report, &answer, "restarts", &["DemoApp.Worker"]);
    let evidence = finding["line"].as_str().unwrap();
    assert!(
        evidence.contains("DemoApp.WorkerSup restarted DemoApp.Worker.start_link/1 1×"),
        "{answer}"
    );
    let next = &finding["next"];
    assert_eq!(next["tool"], "logs", "{next}");
    let report = text(&c.call_next(next).await);
    assert!(
        report.contains("Supervisor DemoApp.WorkerSup terminated")
            && report.contains("Start Call: DemoApp.Worker.start_link("),
        "{next}: {report}"
    );
    c.ok("stop", json!({"name": "dyn"})).await;
}

#[tokio::test]
async fn a_growing_ets_table_is_named_with_its_owner_and_writer() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "ets", "ets").await;

    let (answer, report) = diagnose(&mut c, "ets").await;
    let finding = first(&report, &answer, "ets", &["Ailments.Table"]);
    assert_eq!(finding["function"], "fill/1", "{answer}");
    assert!(
        finding["line"].as_str().unwrap().contains(":ailments_rows"),
        "{answer}"
    );
    // Ends at the function that writes the rows, found by a short trace of the table's
    // inserts; its code is next.
    assert!(
        finding["line"]
            .as_str()
            .unwrap()
            .contains("written by Ailments.Table.fill/1 lib/ailments/table.ex:"),
        "{answer}"
    );
    assert_eq!(
        finding["next"],
        next_of(
            "source",
            json!({"name": "ets", "target": "Ailments.Table.fill/1"})
        )
    );
    c.ok("stop", json!({"name": "ets"})).await;
}

#[tokio::test]
async fn a_long_mailbox_shows_with_its_wait_chain() {
    let server = Server::start();
    let mut c = server.client().await;
    c.ok(
        "start",
        json!({"name": "shop", "path": shop(), "env": {"SHOP_RATE": "1000", "SHOP_AUDIT_MS": "5"}}),
    )
    .await;
    let (answer, report) = diagnose_until(&mut c, "shop", "mailbox").await;
    let finding = first(&report, &answer, "mailbox", &["Shop.Ledger", "Shop.Audit"]);
    let evidence = finding["line"].as_str().unwrap();
    assert!(evidence.contains("Shop.Ledger has "), "{evidence}");
    assert!(evidence.contains("→ Shop.Audit"), "{evidence}");
    assert_eq!(finding["next"]["tool"], "waits", "{finding}");
    c.ok("stop", json!({"name": "shop"})).await;
}

/// A GenServer that burns a third of a core on a timer: nothing queues, grows or fails, yet
/// the node is busy. The finding names the process and, from samples of its stack while it
/// runs, the application's function that does the work, with file:line; the next call shows
/// that function's code.
#[tokio::test]
async fn a_process_burning_cpu_is_found_with_the_function_it_runs() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "cpu", "cpu").await;
    let (answer, report) = diagnose_until(&mut c, "cpu", "cpu").await;
    let finding = first(&report, &answer, "cpu", &["Ailments.Indexer"]);
    let function = finding["function"].as_str().unwrap();
    assert!(function.contains("rebuild"), "{answer}");
    let line = finding["line"].as_str().unwrap();
    assert!(line.starts_with("cpu: Ailments.Indexer "), "{line}");
    assert!(line.contains("lib/ailments/indexer.ex:"), "{line}");
    assert!(line.contains("reductions/s"), "{line}");
    let next = &finding["next"];
    assert_eq!(next["tool"], "source", "{next}");
    let code = text(&c.call_next(next).await);
    assert!(code.contains("def rebuild(count)"), "{code}");
    c.ok("stop", json!({"name": "cpu"})).await;
}

/// The same work spread over short tasks, each ended before any scan sees it: the node's
/// reductions went to processes born and gone inside the window. The finding says so, how
/// they were started, and the function they run, from reads of the processes born since the
/// first scan.
#[tokio::test]
async fn short_tasks_burning_cpu_are_found_with_the_function_they_run() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "tasks", "tasks").await;
    let (answer, report) = diagnose_until(&mut c, "tasks", "cpu").await;
    let finding = first(&report, &answer, "cpu", &["Ailments.Renderer"]);
    let line = finding["line"].as_str().unwrap();
    assert!(
        line.starts_with("cpu: short-lived processes took "),
        "{line}"
    );
    assert!(
        line.contains("started as Ailments.Renderer.handle_info/2"),
        "{line}"
    );
    assert!(line.contains("lib/ailments/renderer.ex:"), "{line}");
    let next = &finding["next"];
    assert_eq!(next["tool"], "source", "{next}");
    assert!(
        next["arguments"]["target"]
            .as_str()
            .unwrap()
            .starts_with("Ailments.Renderer."),
        "{next}"
    );
    c.ok("stop", json!({"name": "tasks"})).await;
}

/// Rows and monitors that a library server (`timer_server`) makes for the application:
/// neither the table's owner nor the writer is the application's code, so the finding walks
/// up the calls into that server to the application function that asks, with its line.
#[tokio::test]
async fn what_a_library_server_makes_for_the_application_ends_at_the_caller() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "timers", "timers").await;
    // OTP 27+'s `timer` keeps a process per interval besides its row: those processes rise
    // faster than the table's memory, and the leak finding names the table as the same
    // code's. On OTP 25 the row is all there is.
    let (kind, by) = if common::otp_release() >= 27 {
        ("leak", "started for the application by")
    } else {
        ("ets", "written by")
    };
    let (answer, report) = diagnose_until(&mut c, "timers", kind).await;
    let finding = &report["findings"][0];
    assert_eq!(finding["kind"], kind, "{answer}");
    let line = finding["line"].as_str().unwrap();
    assert!(line.contains("owner :timer_server"), "{line}");
    assert!(
        line.contains(&format!("{by} Ailments.Digests.subscribe/1 lib/ailments/digests.ex:24 (:timer.send_interval/2, ")),
        "{line}"
    );
    assert_eq!(
        finding["next"],
        next_of(
            "source",
            json!({"name": "timers", "target": "Ailments.Digests.subscribe/1"})
        ),
        "{answer}"
    );
    c.ok("stop", json!({"name": "timers"})).await;
}

/// Two children of one supervisor that both crash: each is counted apart, and the one whose
/// reason changes shows its first reason (what started it) beside its latest.
#[tokio::test]
async fn restarts_are_counted_per_child_with_the_first_reason() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "crash2", "crash2").await;
    // Both have crashed, Flaky at least twice (its first reason shows beside its latest).
    let (answer, report) = wait_until(
        Duration::from_secs(30),
        "both children's restarts, with a first reason",
        async || diagnose(&mut c, "crash2").await,
        |(_, report)| {
            let line = report["findings"][0]["line"].as_str().unwrap_or_default();
            line.contains("restarted Ailments.Crasher ")
                && line.contains("restarted Ailments.Flaky ")
                && line.contains("first: ")
        },
    )
    .await;
    let line = report["findings"][0]["line"].as_str().unwrap();
    assert!(line.contains("restarted Ailments.Crasher "), "{answer}");
    assert!(line.contains("restarted Ailments.Flaky "), "{answer}");
    assert!(line.contains("first: "), "{answer}");
    assert!(line.contains("flaky attempt"), "{answer}");
    // A reason is the exception by name, and where the application's code raised it.
    assert!(
        line.contains("RuntimeError: flaky attempt ")
            && line.contains(" at Ailments.Flaky.")
            && line.contains("lib/ailments/flaky.ex:16"),
        "{answer}"
    );
    c.ok("stop", json!({"name": "crash2"})).await;
}

/// Twelve processes taking turns on one slow server: no call times out, no queue is long, no
/// error is logged, yet every call waits about 1.2 s. The crowd is found with the server's
/// code, and the next call shows where the callers call from and how fast the server serves.
/// Processes waiting for a `:global` lock wait on its holder: one finding, the holder's code.
#[tokio::test]
async fn processes_waiting_for_a_lock_end_at_the_code_that_holds_it() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "locked", "global_lock").await;
    let (answer, report) = diagnose_until(&mut c, "locked", "contention").await;
    let finding = first(&report, &answer, "contention", &["Ailments.Locker"]);
    assert_eq!(finding["function"], "handle_info/2", "{answer}");
    let evidence = finding["line"].as_str().unwrap();
    assert!(
        evidence.contains(
            "processes waiting for a :global lock held by Ailments.Locker (in \
             Ailments.Locker.handle_info/2 lib/ailments/locker.ex:"
        ),
        "{evidence}"
    );
    assert!(
        !evidence.contains("each call waits behind the others"),
        "no call waits on a lock's holder: {evidence}"
    );
    assert!(
        answer.contains("next: source {\"name\":\"locked\",\"target\":\"Ailments.Locker."),
        "{answer}"
    );
    c.ok("stop", json!({"name": "locked"})).await;
}

/// A server suspended with `:sys.suspend` and never resumed takes no call: its callers pile
/// up behind it. The finding says it is suspended and where the project suspends it.
#[tokio::test]
async fn a_suspended_server_ends_at_the_code_that_suspended_it() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "paused", "suspended").await;
    let (answer, report) = diagnose_until(&mut c, "paused", "contention").await;
    // The code to change is where it is suspended.
    let finding = first(&report, &answer, "contention", &["Ailments.Maintenance"]);
    assert_eq!(finding["function"], "handle_info/2", "{answer}");
    let evidence = finding["line"].as_str().unwrap();
    assert!(
        evidence.contains(
            "it is suspended (:sys.suspend/1): it takes no message until :sys.resume/1, called \
             from Ailments.Maintenance.handle_info/2 lib/ailments/maintenance.ex:"
        ),
        "{evidence}"
    );
    assert!(
        answer.contains(
            "next: source {\"name\":\"paused\",\"target\":\"Ailments.Maintenance.handle_info/2\"}"
        ),
        "{answer}"
    );
    c.ok("stop", json!({"name": "paused"})).await;
}

#[tokio::test]
async fn many_callers_blocked_on_one_server_show_as_contention() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "contention", "contention").await;
    let (answer, report) = diagnose_until(&mut c, "contention", "contention").await;
    let finding = first(&report, &answer, "contention", &["Ailments.Pricer"]);
    // Where the server took the call (its callback, what blocks everyone behind it) and
    // where it is now.
    assert_eq!(finding["function"], "handle_call/3", "{answer}");
    let evidence = finding["line"].as_str().unwrap();
    assert!(
        evidence.contains(
            "calls on Ailments.Pricer (in Ailments.Pricer.handle_call/3 lib/ailments/pricer.ex:"
        ),
        "{evidence}"
    );
    assert!(
        evidence.contains(" → Ailments.Pricer.ask_price/2 lib/ailments/pricer.ex:"),
        "{evidence}"
    );
    assert!(
        evidence.contains(" processes blocked in calls on Ailments.Pricer"),
        "{evidence}"
    );
    // How many wait, as a number of the finding's data.
    let blocked = finding["facts"]["waiting"].as_u64().expect("facts.waiting");
    assert!((10..=12).contains(&blocked), "{evidence}");
    assert!(
        evidence.contains("it waits in Process.sleep/1, queue "),
        "{evidence}"
    );
    // How long each call takes, from the calls queued at the start that it has taken since.
    assert!(evidence.contains(" queued calls in "), "{evidence}");
    assert!(evidence.contains(" ms each"), "{evidence}");

    // Next, the code the time goes to: the innermost of the server's own, not its callback.
    let next = &finding["next"];
    assert_eq!(
        *next,
        next_of(
            "source",
            json!({"name": "contention", "target": "Ailments.Pricer.ask_price/2"})
        )
    );
    let shown = c.call_next(next).await;
    assert!(text(&shown).contains("Process.sleep(100)"), "{shown}");
    // The callers, with where they call from.
    let result = c.call("waits", json!({"name": "contention"})).await;
    let chains = text(&result);
    eprintln!("waits ({} bytes):\n{chains}", chains.len());
    assert!(chains.len() <= DIAGNOSE_BYTES, "{chains}");
    let chain = chains
        .lines()
        .find(|l| l.contains("→ call → Ailments.Pricer"))
        .unwrap_or_else(|| panic!("{chains}"));
    assert!(chain.contains("from Ailments.Shoppers.shop/1"), "{chain}");
    assert!(chain.contains(" calls/s"), "{chain}");
    assert!(chain.contains("more waiting the same way"), "{chain}");
    c.ok("stop", json!({"name": "contention"})).await;
}

/// The same crowd, but the server waits out a reply that never matches its receive (it comes
/// back without its reference): the finding names the unmatched messages by shape, and its
/// next call, `process_info`, shows one of them.
#[tokio::test]
async fn a_receive_that_matches_none_of_the_queue_is_named_with_the_shapes() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "lost", "lost_reply").await;
    let (answer, report) = diagnose_until(&mut c, "lost", "contention").await;
    let finding = first(&report, &answer, "contention", &["Ailments.Pricer"]);
    let evidence = finding["line"].as_str().unwrap();
    assert!(
        evidence.contains("it waits in Ailments.Pricer.ask_price/2 for a message other than the"),
        "{evidence}"
    );
    assert!(evidence.contains("{:quote, _} × "), "{evidence}");

    let info = follow(&mut c, "lost", finding).await;
    assert!(
        line(&info, "status").contains("for a message other than the"),
        "{info}"
    );
    assert!(
        info.contains("\n  {:quote, "),
        "one unmatched message in the sample: {info}"
    );
    c.ok("stop", json!({"name": "lost"})).await;
}

/// A temporary child that exits with an error is gone for good: `lost`, with its supervisor
/// and its reason, ranked first. A crashed child of a DynamicSupervisor or a Task.Supervisor
/// is not lost (nothing keeps its spec to start it again).
#[tokio::test]
async fn a_crashed_temporary_child_is_lost_and_dynamic_ones_are_not() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "gone", "none").await;
    c.eval(
        "gone",
        r#"eval = self()
           spawn(fn ->
             pricing = %{id: :pricing, restart: :temporary,
                         start: {Agent, :start_link, [fn -> 0 end, [name: :pricing]]}}
             {:ok, _} = Supervisor.start_link([pricing], strategy: :one_for_one, name: :shop_sup)
             {:ok, _} = DynamicSupervisor.start_link(strategy: :one_for_one, name: :carts)
             {:ok, _} = Task.Supervisor.start_link(name: :jobs)
             send(eval, :started)
             Process.sleep(:infinity)
           end)
           receive do :started -> :ok end
           cart = %{id: :cart, restart: :temporary, start: {Agent, :start_link, [fn -> 0 end]}}
           {:ok, pid} = DynamicSupervisor.start_child(:carts, cart)
           Agent.cast(pid, fn _ -> raise "cart" end)
           Task.Supervisor.start_child(:jobs, fn -> raise "job" end)
           Agent.cast(:pricing, fn _ -> raise "pricing" end)
           Process.sleep(300)"#,
    )
    .await;
    let (answer, report) = diagnose(&mut c, "gone").await;
    let findings = report["findings"].as_array().unwrap();
    let lost: Vec<&Value> = findings.iter().filter(|f| f["kind"] == "lost").collect();
    assert_eq!(lost.len(), 1, "{answer}");
    assert_eq!(findings[0]["kind"], "lost", "{answer}");
    let evidence = lost[0]["line"].as_str().unwrap();
    assert!(
        evidence.starts_with("lost: :pricing, a temporary child of :shop_sup, crashed "),
        "{evidence}"
    );
    assert!(evidence.contains("pricing"), "{evidence}");
    c.ok("stop", json!({"name": "gone"})).await;
}

#[tokio::test]
async fn healthy_nodes_give_no_finding() {
    let server = Server::start();
    let mut c = server.client().await;
    c.ok("start", json!({"name": "demo", "path": demo_app()}))
        .await;
    start_ailing(&mut c, "none", "none").await;
    for name in ["demo", "none"] {
        let (answer, report) = diagnose(&mut c, name).await;
        assert_eq!(report["findings"], json!([]), "{answer}");
        assert_eq!(report["healthy"], true);
        assert!(answer.starts_with("healthy"), "{answer}");
        assert!(answer.contains("checked memory by type"), "{answer}");
        assert_eq!(answer.lines().count(), 1, "{answer}");
        assert!(report["figures"]["process_count"].as_u64().unwrap() > 10);
    }
    c.ok("stop", json!({"name": "demo"})).await;
    c.ok("stop", json!({"name": "none"})).await;
}

/// The server's own work is not the application's: a healthy node stays healthy after 100
/// evals of new code (new atoms, new modules, new funs) and 10 traces, with the history
/// covering all of them.
#[tokio::test]
async fn our_own_evals_and_traces_are_no_finding() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "quiet", "none").await;
    for i in 0..100 {
        let code = format!(
            "defmodule Scratch{i} do def f(x), do: {{:tag_{i}, x}} end; \
             Enum.map(1..20, fn n -> String.to_atom(\"probe_{i}_#{{n}}\") end); \
             Scratch{i}.f(:\"value_{i}\")"
        );
        c.eval("quiet", &code).await;
        if i % 10 == 0 {
            c.ok(
                "trace",
                json!({"name": "quiet", "module": "Enum", "function": "map",
                       "max_events": 5, "duration_ms": 300}),
            )
            .await;
        }
        // Clock: the evals spread over enough history for rates, up to the diagnosis.
        tokio::time::sleep(Duration::from_millis(160)).await;
    }
    let (answer, report) = diagnose(&mut c, "quiet").await;
    assert_eq!(report["findings"], json!([]), "{answer}");
    assert!(answer.starts_with("healthy: checked"), "{answer}");
    c.ok("stop", json!({"name": "quiet"})).await;
}

/// The application killed under a node this server runs: the node is ended and restarted,
/// and that restart is part of its health (with its reason) while the history spans it; the
/// newest error of the new run is the one `status` shows; an eval that raises says where.
#[tokio::test]
async fn a_node_restarted_by_the_server_is_a_finding_and_status_shows_the_newest_error() {
    let server = Server::start();
    let mut c = server.client().await;
    // Started as a command, as `mix phx.server` is.
    c.ok(
        "start",
        json!({"name": "phoenixlike", "path": ailments(), "env": {"AILMENT": "none"},
               "command": ["mix", "run", "--no-halt"]}),
    )
    .await;
    let killed = c
        .call(
            "eval",
            json!({"name": "phoenixlike",
                   "code": "Process.exit(Process.whereis(Ailments.Supervisor), :kill)"}),
        )
        .await;
    eprintln!("{}", text(&killed));
    // Read at once, the dead application is not said to run (until the node is restarted).
    for _ in 0..5 {
        let now = text(&c.call("status", json!({"name": "phoenixlike"})).await);
        assert!(
            !(now.contains("restarts=0") && now.contains("app ailments: running")),
            "{now}"
        );
    }
    let back = c
        .wait_status("phoenixlike", Duration::from_secs(30), |n| {
            n["state"] == "running" && n["restarts"] == 1
        })
        .await;
    assert_eq!(back["restarts"], 1, "{back}");
    // 30 s into the new run, the restart is still part of its health.
    let up = Duration::from_millis(back["uptime_ms"].as_u64().unwrap_or(0));
    // Clock: the new run must be 30 s old.
    tokio::time::sleep(Duration::from_secs(30).saturating_sub(up)).await;
    let (answer, report) = diagnose(&mut c, "phoenixlike").await;
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "node_restart")
        .unwrap_or_else(|| panic!("{answer}"));
    let line = finding["line"].as_str().unwrap();
    assert!(line.contains("restarted it 1×"), "{line}");
    assert!(line.contains("application `ailments` exited"), "{line}");
    assert!(line.contains("killed"), "the reason: {line}");

    // A new error in this run is the last error, not the one of the run that ended.
    c.eval(
        "phoenixlike",
        r#"require Logger; Logger.error("second failure, after the restart")"#,
    )
    .await;
    let status = c
        .wait_status("phoenixlike", Duration::from_secs(10), |n| {
            n["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("second failure"))
        })
        .await;
    assert!(
        status["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("second failure"),
        "{status}"
    );

    // A raise in the evaluated code says so, where no function of the node is on its stack.
    let raised = c
        .call(
            "eval",
            json!({"name": "phoenixlike", "code": "raise ArgumentError, \"x\""}),
        )
        .await;
    let raised = text(&raised);
    assert!(raised.contains("** (ArgumentError) x"), "{raised}");
    assert!(
        raised.contains("raised by the evaluated code itself"),
        "{raised}"
    );
    let deeper = text(
        &c.call(
            "eval",
            json!({"name": "phoenixlike", "code": "String.to_integer(\"zz\")"}),
        )
        .await,
    );
    assert!(deeper.contains(":erlang.binary_to_integer"), "{deeper}");
    assert!(!deeper.contains("os_sup_"), "{deeper}");
    c.ok("stop", json!({"name": "phoenixlike"})).await;
}

/// Each class of exhaustion the history shows, on its own fixture node: the first finding
/// names the meter, its time to the limit and its holder, and its next call finds the rest.
#[tokio::test]
async fn every_resource_that_runs_out_is_the_first_finding_with_its_holder() {
    // The segment files go to a folder of the test's, removed after the server (and its
    // nodes) are gone.
    let segments = tempfile::tempdir().unwrap();
    let server = Server::start();
    let mut c = server.client().await;
    // (ailment, meter, what the line must name)
    let classes = [
        ("binary", "memory_binary", "Ailments.Docs"),
        (
            "atoms",
            "atoms",
            "made by Ailments.Tagger.tag/1 lib/ailments/tagger.ex:",
        ),
        (
            "ports",
            "ports",
            "made by Ailments.Sockets.run/1 lib/ailments/sockets.ex:8",
        ),
        (
            "ets_tables",
            "ets_tables",
            "made by Ailments.Tables.run/1 lib/ailments/tables.ex:8",
        ),
        ("procmem", "memory_processes|os_rss", "Ailments.Hoarder.run/1"),
        (
            "fd",
            "os_fds",
            "made by Ailments.Files.run/1 lib/ailments/files.ex:9 (:file.open/2, ",
        ),
        (
            "monitors",
            "memory_processes",
            "made by Ailments.Watcher.watch/1 lib/ailments/watcher.ex:21 (:erlang.monitor/2",
        ),
        ("state", "memory_processes|os_rss", "its state: :sessions "),
        (
            "dictionary",
            "memory_processes|os_rss",
            "made by Ailments.Memo.remember/2 lib/ailments/memo.ex:20 (Process.put/2, ",
        ),
        (
            "persistent",
            "memory_total|os_rss",
            "made by Ailments.RateCards.card/1 lib/ailments/rate_cards.ex:23 (:persistent_term.put/2",
        ),
        (
            "thumbs",
            "memory_binary",
            "held most by ETS table :ailments_thumbs (owner Ailments.Thumbs, ",
        ),
    ];
    for (ailment, _, _) in classes {
        start_ailing(&mut c, ailment, ailment).await;
    }
    c.ok(
        "start",
        json!({"name": "segments", "path": ailments(),
               "env": {"AILMENT": "segments", "TMPDIR": segments.path()}}),
    )
    .await;
    start_ailing(&mut c, "none", "none").await;
    // Every node has the least history a rate is trusted from.
    let names = classes.iter().map(|(ailment, _, _)| *ailment);
    for name in names.chain(["segments", "none"]) {
        wait_until(
            Duration::from_secs(60),
            &format!("{name}: history enough for a rate"),
            async || history_span(&c.vitals(name).await),
            |span| *span >= TREND_MIN_SPAN,
        )
        .await;
    }
    for (ailment, meter, named) in classes {
        let (answer, report) = diagnose(&mut c, ailment).await;
        // The helper's own tables (its history grows with the node's table count) are its
        // work, never a finding about the application.
        assert!(!answer.contains(":os_sup_"), "{answer}");
        let finding = &report["findings"][0];
        assert_eq!(finding["kind"], "growth", "{answer}");
        // `a|b`: either meter (a heap that grows in steps and is collected now and then may
        // show first in the OS's resident memory).
        let found = finding["meter"].as_str().unwrap_or_default();
        assert!(meter.split('|').any(|m| m == found), "{answer}");
        let line = finding["line"].as_str().unwrap();
        assert!(line.contains(named), "{ailment}: {line}");
        if ailment == "ets_tables" {
            // A limit the VM does not enforce gives no time to it.
            assert!(!line.contains("full in"), "{line}");
            assert!(line.contains("no table limit"), "{line}");
        } else {
            assert!(
                line.contains("full in") || line.contains("available memory gone in"),
                "{ailment}: a time to the limit: {line}"
            );
        }
        assert!(finding["rate_per_s"].as_f64().unwrap() > 0.0, "{answer}");
    }

    // Files opened through a library that starts a process for each (File.open/2: an io
    // server started by OTP's file server): the descriptors and the processes are one
    // finding, as one line of code makes both, timed by whichever runs out first and ending
    // at the application's call.
    let (answer, report) = diagnose(&mut c, "segments").await;
    let site = "Ailments.Segments.append/1 lib/ailments/segments.ex:24 (File.open/2, ";
    let lines: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["line"].as_str())
        .collect();
    assert!(lines[0].contains(site), "{answer}");
    let (head, also) = lines[0]
        .split_once("; the same code also: ")
        .expect(&answer);
    let (fds, leak) = if head.starts_with("file descriptors") {
        (head, also)
    } else {
        (also, head)
    };
    assert!(fds.starts_with("file descriptors"), "{answer}");
    assert!(leak.starts_with("leak: "), "{answer}");
    assert!(
        !lines[1..]
            .iter()
            .any(|l| l.starts_with("leak: ") || l.starts_with("file descriptors")),
        "{answer}"
    );

    // Atoms: no scan names their creator; a moment's trace of every process does, and the
    // next call shows that function's code.
    let (_, report) = diagnose(&mut c, "atoms").await;
    let next = report["findings"][0]["next"].clone();
    assert_eq!(next["tool"], "source", "{next}");
    let code = text(&c.call_next(&next).await);
    assert!(code.contains("def tag("), "{code}");
    // The trace tool names them too, counted by caller, for longer.
    let args = json!({"name": "atoms", "module": "erlang", "function": "binary_to_atom",
                      "max_events": 3, "duration_ms": 5000});
    let started = c.ok("trace", args).await;
    let session = started["session"].as_str().unwrap().to_string();
    // From tag/1 on Elixir 1.14; on 1.18 and 1.20 tag/1 compiles to a last call of
    // :erlang.binary_to_atom/1, which leaves no frame of tag/1: the call returns to run/1.
    let caller = if common::elixir_at_least(1, 18) {
        "Ailments.Tagger.run/1"
    } else {
        "Ailments.Tagger.tag/1"
    };
    let events = wait_until(
        Duration::from_secs(10),
        &format!("a traced call from {caller}"),
        async || text(&c.call("trace_results", json!({"session": session})).await),
        |events| events.contains(&format!("from {caller}")),
    )
    .await;
    assert!(events.contains(&format!("from {caller}")), "{events}");
    // The header counts the calls by the function they came from.
    assert!(
        events
            .lines()
            .next()
            .unwrap()
            .contains(&format!("by caller: {caller} ")),
        "{events}"
    );

    // The healthy fixture: nothing found, and what was checked over how much history.
    let (answer, report) = diagnose(&mut c, "none").await;
    assert_eq!(report["findings"], json!([]), "{answer}");
    assert!(answer.starts_with("healthy: checked"), "{answer}");
    assert!(answer.contains("of history"), "{answer}");

    // Errors logged two seconds before the call are in the report.
    c.eval("none", r#"require Logger; Logger.error("payment failed")"#)
        .await;
    // Clock: the error must be older than the diagnosis's own window.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (answer, report) = diagnose(&mut c, "none").await;
    assert_eq!(report["findings"][0]["kind"], "errors", "{answer}");
    assert!(answer.contains("in the last 5 min"), "{answer}");

    // A crash counts once, as `logs` shows it: not again for its crash and supervisor reports.
    c.eval(
        "none",
        "{:ok, sup} = Supervisor.start_link([], strategy: :one_for_one); \
         {:ok, pid} = Supervisor.start_child(sup, %{id: :w, restart: :temporary, \
           start: {Agent, :start_link, [fn -> 0 end]}}); \
         Agent.cast(pid, fn _ -> raise \"boom\" end); Process.sleep(300)",
    )
    .await;
    let (answer, _) = diagnose(&mut c, "none").await;
    let logged = c
        .ok("logs", json!({"name": "none", "min_level": "error"}))
        .await;
    assert_eq!(logged["matched"], 2, "{logged}");
    assert!(answer.contains(", 2 since start"), "{answer}");
}

/// A third process waiting behind a two-server cycle is listed as waiting, not as a member;
/// a cycle whose members exit during the window is not reported as a deadlock.
#[tokio::test]
async fn a_deadlock_lists_its_members_only_and_only_while_it_holds() {
    let server = Server::start();
    let mut c = server.client().await;
    start_ailing(&mut c, "cycle3", "cycle3").await;
    let (answer, report) = diagnose_until(&mut c, "cycle3", "deadlock").await;
    let evidence = report["findings"][0]["line"].as_str().unwrap();
    let (cycle, behind) = evidence
        .split_once("; waiting behind it (not members): ")
        .unwrap_or_else(|| panic!("the waiter is named apart: {answer}"));
    assert!(
        cycle.contains("Ailments.Ping") && cycle.contains("Ailments.Pong"),
        "{answer}"
    );
    assert!(!cycle.contains("Checkout"), "only the members: {answer}");
    assert!(behind.contains("Checkout"), "{answer}");

    // The members leave for good during the window: no deadlock is reported.
    c.eval(
        "cycle3",
        "spawn(fn -> Process.sleep(300); \
         Supervisor.terminate_child(Ailments.Supervisor, Ailments.Cycle) end)",
    )
    .await;
    let waits = text(
        &c.call("waits", json!({"name": "cycle3", "window_ms": 2000}))
            .await,
    );
    assert!(!waits.contains("DEADLOCK:"), "{waits}");
    assert!(!waits.contains("DEADLOCK ("), "{waits}");
    let (answer, report) = diagnose(&mut c, "cycle3").await;
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["kind"] != "deadlock"),
        "{answer}"
    );
}
