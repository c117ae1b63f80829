//! What `status` and the node's log say about a node's health: the restarts its own
//! supervisors make (which the OS-level restart count does not see), and no false alarm of
//! ours (the server's connection to a node it starts leaves nothing in the node's log); an
//! umbrella's applications each named, and a dead one never said to run.

mod common;

use common::{demo_node, text, Server};
use serde_json::json;

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
