//! What `status` and the node's log say about a node's health: the restarts its own
//! supervisors make (which the OS-level restart count does not see), and no false alarm of
//! ours (the server's connection to a node it starts leaves nothing in the node's log); an
//! umbrella's applications each named, and a dead one never said to run; a stopped VM said
//! to answer nothing, not to run.

mod common;

use common::{demo_node, text, wait_until, Server};
use serde_json::json;
use std::time::{Duration, Instant};

/// Lines of our own making that must never appear in the log of a node we start: the
/// distribution handshake of a connection attempt the node rejected.
const FALSE_ALARMS: [&str; 3] = ["ERROR REPORT", "Connection attempt", "rejected"];

async fn assert_clean_log(c: &mut common::Client, name: &str) {
    let result = c
        .call(
            "logs",
            json!({"name": name, "tail": 1000, "min_level": "debug"}),
        )
        .await;
    let log = text(&result);
    for alarm in FALSE_ALARMS {
        assert!(!log.contains(alarm), "`{alarm}` in {name}'s log:\n{log}");
    }
}

#[tokio::test]
async fn a_fresh_start_leaves_no_error_of_ours_and_status_counts_restarts_inside_the_app() {
    let (_server, mut c) = demo_node("health").await;
    assert_clean_log(&mut c, "health").await;

    // Nothing restarted yet: the count is there, and zero.
    let status = c.ok("status", json!({"name": "health"})).await;
    assert_eq!(status["nodes"][0]["app_restarts"]["total"], 0, "{status}");

    // Kill the counter twice: its supervisor restarts it each time, the OS process stays.
    c.eval(
        "health",
        "for _ <- 1..2 do\n\
           pid = Process.whereis(DemoApp.Counter)\n\
           ref = Process.monitor(pid)\n\
           Process.exit(pid, :kill)\n\
           receive do {:DOWN, ^ref, _, _, _} -> :ok end\n\
           Process.sleep(50)\n\
         end",
    )
    .await;
    let result = c.call("status", json!({"name": "health"})).await;
    let answer = text(&result);
    let node = &result["structuredContent"]["nodes"][0];
    assert_eq!(node["restarts"], 0, "{answer}");
    assert_eq!(node["app_restarts"]["total"], 2, "{answer}");
    assert_eq!(node["app_restarts"]["last_5m"], 2, "{answer}");
    assert_eq!(
        node["app_restarts"]["last"]["child"], "DemoApp.Counter",
        "{answer}"
    );
    assert_eq!(
        node["app_restarts"]["last"]["supervisor"], "DemoApp.Supervisor",
        "{answer}"
    );
    assert_eq!(
        node["app_restarts"]["last"]["reason"], ":killed",
        "{answer}"
    );
    assert!(answer.contains("restarts=0 app_restarts=2"), "{answer}");
    assert!(
        answer.contains("app restarts: 2 (2 in the last 5 min); last")
            && answer.contains("DemoApp.Counter under DemoApp.Supervisor (:killed)"),
        "{answer}"
    );
    // The list of every node says it too.
    let all = text(&c.call("status", json!({})).await);
    assert!(all.contains("app_restarts=2"), "{all}");

    // A restart of the node is a new OS process and a new connection: still nothing of ours
    // in its log, and the count starts again.
    c.ok("restart", json!({"name": "health"})).await;
    assert_clean_log(&mut c, "health").await;
    let status = c.ok("status", json!({"name": "health"})).await;
    assert_eq!(status["nodes"][0]["app_restarts"]["total"], 0, "{status}");
    c.ok("stop", json!({"name": "health"})).await;
}

/// An umbrella: `status` names each of its applications, the supervision tree shows each
/// one's supervisor, and an application that dies is never said to run.
#[tokio::test]
async fn an_umbrella_shows_each_application_and_a_dead_one_is_not_running() {
    let server = Server::start();
    let mut c = server.client().await;
    let started = c
        .ok(
            "start",
            json!({"name": "umb", "path": common::umbrella(), "restart": "temporary"}),
        )
        .await;
    let status = text(&c.call("status", json!({"name": "umb"})).await);
    for app in ["inventory", "storefront"] {
        assert!(
            status.contains(&format!("app {app}: running")),
            "{app} in {status}\n{started}"
        );
    }
    let tree = text(&c.call("supervision_tree", json!({"name": "umb"})).await);
    for sup in ["Inventory.Supervisor", "Storefront.Supervisor"] {
        assert!(tree.contains(sup), "{sup} in {tree}");
    }
    // Storefront's application ends (its supervisor killed); the VM and inventory live on.
    c.eval(
        "umb",
        "Process.exit(Process.whereis(Storefront.Supervisor), :kill)",
    )
    .await;
    let status = text(&c.call("status", json!({"name": "umb"})).await);
    assert!(!status.contains("app storefront: running"), "{status}");
    assert!(status.contains("app storefront: exited"), "{status}");
    // The headline is the application's: no `running` while one has exited.
    assert!(status.starts_with("umb app-exited pid="), "{status}");
    let all = text(&c.call("status", json!({})).await);
    assert!(all.starts_with("umb app-exited"), "{all}");
    c.ok("stop", json!({"name": "umb"})).await;
}

/// A VM stopped with SIGSTOP answers nothing: `status` heads with `not-answering` (in about
/// the round trip it allows, 1.5 s, not the 5 s it gives the node's report), the list of
/// nodes too; once it runs on, `status` reads it again.
#[tokio::test]
async fn a_stopped_vm_is_said_to_answer_nothing_and_when_it_last_did() {
    let (_server, mut c) = demo_node("frozen").await;
    // The VM's own pid: the process spawned may be a shell around it (Elixir 1.20's `elixir`
    // does not exec `erl`).
    let pid = c.eval("frozen", "System.pid()").await;
    let beam: i32 = pid["value"]
        .as_str()
        .unwrap()
        .trim_matches('"')
        .parse()
        .unwrap();
    // A sample the node answered, so the answer can say how long ago that was.
    wait_until(
        Duration::from_secs(10),
        "a vitals sample",
        async || {
            c.vitals("frozen").await["rows"]
                .as_array()
                .map_or(0, Vec::len)
        },
        |rows| *rows > 0,
    )
    .await;
    unsafe { libc::kill(beam, libc::SIGSTOP) };
    let asked = Instant::now();
    let answer = c.call("status", json!({"name": "frozen"})).await;
    let took = asked.elapsed();
    unsafe { libc::kill(beam, libc::SIGCONT) };
    let said = text(&answer);
    eprintln!("status of a stopped VM in {took:?}: {said}");
    assert_eq!(answer["isError"], true, "{said}");
    assert!(
        said.starts_with("frozen not-answering (last answer "),
        "{said}"
    );
    assert!(
        said.contains("is not answering: no reply to a round trip within 1500 ms"),
        "{said}"
    );
    // (well under the 5 s the report itself is given: the round trip decides)
    assert!(took < Duration::from_secs(4), "{took:?}: {said}");

    unsafe { libc::kill(beam, libc::SIGSTOP) };
    let list = c.call("status", json!({})).await;
    unsafe { libc::kill(beam, libc::SIGCONT) };
    let listed = text(&list);
    assert!(listed.starts_with("frozen not-answering"), "{listed}");
    assert!(
        list["structuredContent"]["nodes"][0]["not_answering"].is_object(),
        "{list}"
    );

    let again = c.ok("status", json!({"name": "frozen"})).await;
    assert_eq!(again["nodes"][0]["state"], "running", "{again}");
    assert!(again["nodes"][0].get("not_answering").is_none(), "{again}");
}
