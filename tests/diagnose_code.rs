//! Code that differs from disk: a node that compiled a hot fix of one of its modules at boot
//! (`Code.compile_file`, loaded from memory over the module's `.beam`) has the `code`
//! finding first, naming the module, the file it was compiled from and the function that
//! loaded it (its next call is that code); a healthy node has
//! none; and in a cluster where one member alone runs another version of a module, `diagnose`
//! of the cluster names that member, the module and both origins, never `healthy: all N
//! members`. Code compiled outside the node (`mix compile`) and not loaded is said to be
//! older than its `.beam`, and `recompile` (which loads the `.beam` files it wrote) leaves
//! nothing that differs. The code tools leave `code_server`'s memory as they found it. Every
//! node dies with its server, also when an assertion fails.

mod common;

use common::{
    ailments, cluster_app, demo_app, diagnose_with, fixture_copy, next_of, shows_next, text,
    Client, Server,
};
use serde_json::{json, Value};

/// `diagnose` on `name` (a node or a cluster, whose answer is longer): its text and data.
async fn diagnose(c: &mut Client, name: &str) -> (String, Value) {
    diagnose_with(c, json!({"name": name}), 2048).await
}

#[tokio::test]
async fn a_module_hot_fixed_from_memory_is_the_first_finding_with_its_source() {
    let server = Server::start();
    let mut c = server.client().await;
    c.ok(
        "start",
        json!({"name": "fixed", "path": ailments(), "env": {"AILMENT": "hotfix"}}),
    )
    .await;
    c.ok(
        "start",
        json!({"name": "plain", "path": ailments(), "env": {"AILMENT": "none"}}),
    )
    .await;

    let (answer, report) = diagnose(&mut c, "fixed").await;
    let finding = &report["findings"][0];
    assert_eq!(finding["kind"], "code", "{answer}");
    assert_eq!(finding["module"], "Ailments.Discounts", "{answer}");
    let line = finding["line"].as_str().unwrap();
    assert!(
        line.starts_with(
            "code: Ailments.Discounts runs code loaded from memory, not its .beam: compiled \
             from priv/hotfix/discounts.ex; its .beam _build/"
        ),
        "{line}"
    );
    assert!(
        line.contains("/ebin/Elixir.Ailments.Discounts.beam has other code"),
        "{line}"
    );
    assert!(
        line.contains("(exports +rate/1") || line.contains("(the same exports)"),
        "{line}"
    );
    // Who loaded it, seen by the helper from the boot on: the cause, whose code is next.
    assert!(
        line.contains(" ago by Ailments.Hotfix.start_link/0 lib/ailments/hotfix.ex:"),
        "{line}"
    );
    assert_eq!(
        finding["next"],
        next_of(
            "source",
            json!({"name": "fixed", "target": "Ailments.Hotfix.start_link/0"})
        )
    );
    assert!(shows_next(&answer, &finding["next"]), "{answer}");
    assert_eq!(report["healthy"], false);

    // Where it leads: the module's source, which says the running code is not the file's.
    let source = text(
        &c.call(
            "source",
            json!({"name": "fixed", "target": "Ailments.Discounts"}),
        )
        .await,
    );
    eprintln!("source:\n{source}");
    assert!(
        source.contains(
            "the running code was loaded from memory, not from a .beam: compiled from \
             priv/hotfix/discounts.ex"
        ),
        "{source}"
    );
    assert!(source.contains("def rate(:silver), do: 0.05"), "{source}");

    // The same application without the hot fix: nothing differs.
    let (answer, report) = diagnose(&mut c, "plain").await;
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["kind"] != "code"),
        "{answer}"
    );
    assert_eq!(report["findings"], json!([]), "{answer}");
    c.ok("stop", json!({"name": "fixed"})).await;
    c.ok("stop", json!({"name": "plain"})).await;
}

#[tokio::test]
async fn a_cluster_member_running_another_version_of_a_module_is_named() {
    let server = Server::start();
    let mut c = server.client().await;
    c.ok(
        "start",
        json!({"name": "k", "path": cluster_app(), "nodes": 3,
               "env": {"PORT": "{4100+index}"}}),
    )
    .await;
    // Alike members: no code differs.
    let (answer, report) = diagnose(&mut c, "k").await;
    assert!(!answer.contains("code:"), "{answer}");
    assert!(
        report["cluster_findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| !f["line"].as_str().unwrap().contains("other code")),
        "{answer}"
    );

    // k-2 alone compiles another version of ClusterApp.Leader from a file, in memory: the push
    // to its peers reached none.
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("leader_fix.ex");
    let original = std::fs::read_to_string(cluster_app().join("lib/cluster_app/leader.ex"))
        .unwrap()
        .replace(
            "Process.send_after(self(), :elect, 500)",
            "Process.send_after(self(), :elect, 750)",
        );
    std::fs::write(&fix, original).unwrap();
    let compiled = c
        .eval(
            "k-2",
            &format!(
                "Code.compile_file({:?}) |> Enum.map(&elem(&1, 0))",
                fix.to_str().unwrap()
            ),
        )
        .await;
    assert_eq!(compiled["value"], "[ClusterApp.Leader]", "{compiled}");

    let (answer, report) = diagnose(&mut c, "k").await;
    assert!(!answer.contains("healthy: all"), "{answer}");
    assert_eq!(report["healthy"], false, "{answer}");
    let first = &report["cluster_findings"][0];
    // The same record as a node's finding: kind, numbers, next as {tool, arguments}.
    assert_eq!(first["kind"], "cluster", "{answer}");
    assert_eq!(first["facts"]["modules"], 1, "{answer}");
    assert_eq!(first["next"]["tool"], "source", "{answer}");
    let first = first["line"].as_str().unwrap();
    assert!(
        first.starts_with(
            "cluster: k-2 runs other code of ClusterApp.Leader than k-1, k-3: k-2's from memory, \
             compiled from "
        ),
        "{answer}"
    );
    assert!(first.contains("leader_fix.ex"), "{first}");
    assert!(
        first.contains("theirs from its .beam in _build/dev/lib/cluster_app/ebin"),
        "{first}"
    );
    assert!(
        answer.contains("next: source {\"name\":\"k-2\",\"target\":\"ClusterApp.Leader\"}"),
        "{answer}"
    );
    // k-2's own diagnosis says so too.
    assert!(
        answer.contains("k-2: code: ClusterApp.Leader runs code loaded from memory"),
        "{answer}"
    );
    c.ok("stop", json!({"name": "k"})).await;
}

#[tokio::test]
async fn code_compiled_and_not_loaded_is_found_and_recompile_leaves_none() {
    // Work on a copy: the test edits a source file.
    let (_dir, project) = fixture_copy(&demo_app());
    let server = Server::start();
    let mut c = server.client().await;
    c.start_project("stale", &project).await;
    let counter = project.join("lib/demo_app/counter.ex");
    let source = std::fs::read_to_string(&counter).unwrap();
    std::fs::write(
        &counter,
        source.replacen("use GenServer", "use GenServer\n\n  def hello, do: :new", 1),
    )
    .unwrap();
    // Compiled in its own OS process, as an agent's `mix compile` would: the node keeps the
    // code it loaded.
    let compiled = c
        .ok(
            "mix",
            json!({"task": "compile", "name": "stale", "timeout_ms": 120000}),
        )
        .await;
    eprintln!("{compiled}");

    let (answer, report) = diagnose(&mut c, "stale").await;
    let finding = &report["findings"][0];
    assert_eq!(finding["kind"], "code", "{answer}");
    assert_eq!(finding["module"], "DemoApp.Counter", "{answer}");
    let line = finding["line"].as_str().unwrap();
    assert!(
        line.starts_with("code: DemoApp.Counter runs code that differs from its .beam _build/"),
        "{line}"
    );
    assert!(
        line.contains("after the node started: compiled since and not loaded"),
        "{line}"
    );
    assert!(line.contains("(exports -hello/0)"), "{line}");

    // `recompile` loads the .beam it finds: the node runs what is on disk.
    let done = c.ok("recompile", json!({"name": "stale"})).await;
    eprintln!("{done}");
    let (answer, report) = diagnose(&mut c, "stale").await;
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["kind"] != "code"),
        "{answer}"
    );
    c.ok("stop", json!({"name": "stale"})).await;
}

/// The code tools ask `code_server` one module at a time: `code:all_loaded/0` would have it
/// build every module's entry in its own heap (OTP 25), which grows by megabytes a call and
/// stays grown, a growth of a system process that this server's own calls made.
#[tokio::test]
async fn the_code_tools_leave_the_code_server_as_they_found_it() {
    let server = Server::start();
    let mut c = server.client().await;
    let (_dir, project) = fixture_copy(&demo_app());
    c.start_project("tools", &project).await;
    let code_server = "elem(:erlang.process_info(Process.whereis(:code_server), :memory), 1)";
    let round = async |c: &mut Client| {
        diagnose(c, "tools").await;
        c.ok("recompile", json!({"name": "tools", "force": true}))
            .await;
        c.call("find", json!({"name": "tools", "query": "Counter"}))
            .await;
        c.call(
            "source",
            json!({"name": "tools", "target": "Nosuch.thing/1"}),
        )
        .await;
    };
    let memory = async |c: &mut Client| -> u64 {
        let value = c.eval("tools", code_server).await["value"].clone();
        value.as_str().unwrap().parse().unwrap()
    };
    let before = memory(&mut c).await;
    for _ in 0..3 {
        round(&mut c).await;
    }
    let after = memory(&mut c).await;
    // (with `code:all_loaded/0`, on the demo's 374 modules: from 285 KB to 4.1 MB)
    assert!(
        after < before + 1024 * 1024,
        "code_server grew from {before} to {after} bytes"
    );
}
