//! Clusters: `start` with `nodes` on a fixture that uses `:pg` and `:global`; the members
//! connected at start; `processes`, `diagnose` and `logs` asked of every member at once and
//! merged with each member's status; a name found on the member that holds it; a partition
//! shown on both sides and healed, with `:global`'s conflict resolution in the logs; a killed
//! member named in a partial answer and restarted; a frozen one named by the deadline; a
//! server one member runs for the others named with its callers by member.

mod common;

use common::erl::ErlNode;
use common::{cluster_app, diagnose_with, names, text, timed, wait_until, Client, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn statuses(answer: &Value) -> Vec<(String, String)> {
    answer["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["member"].as_str().unwrap().to_string(),
                m["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

async fn view(c: &mut Client) -> Value {
    c.ok("status", json!({"name": "c"})).await["cluster"].clone()
}

/// Evaluates `code` on `node` until its value is `value` (or fails after `within`).
async fn eval_until(c: &mut Client, node: &str, code: &str, value: &str, within: Duration) {
    wait_until(
        within,
        code,
        async || c.eval(node, code).await,
        |answer| answer["value"] == value,
    )
    .await;
}

/// The logs of every member, merged, until one line matches `needle` (or 20 s).
async fn wait_log(c: &mut Client, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let logs = text(
            &c.call(
                "logs",
                json!({"name": "c", "tail": 200, "grep": needle, "skip_eval": true}),
            )
            .await,
        );
        if logs.lines().skip(1).any(|l| l.contains(needle)) || Instant::now() > deadline {
            return logs;
        }
        // Clock: paces this poll; the deadline above bounds it.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test]
async fn a_three_node_cluster_is_asked_split_healed_and_survives_a_killed_member() {
    let server = Server::start();
    let mut c = server.client().await;
    // A readiness every member would share is refused: the first member up would answer it.
    let shared = c
        .err(
            "start",
            json!({"name": "c", "path": cluster_app(), "nodes": 3, "ready": {"port": 4000}}),
        )
        .await;
    assert!(shared.contains("for every member"), "{shared}");
    let started = c
        .ok(
            "start",
            // A crashed member comes back after 20 s: longer than a cluster call's deadline,
            // so the call made while it is down cannot find it back.
            json!({"name": "c", "path": cluster_app(), "nodes": 3,
                   "env": {"PORT": "{4000+index}"},
                   "backoff_ms": 20000, "max_backoff_ms": 20000}),
        )
        .await;
    assert_eq!(started["view"]["fully_connected"], true, "{started}");
    let members = names(&started["members"]);
    assert_eq!(members, ["c-1", "c-2", "c-3"]);
    // Introduced once both ends have their cookies: no member refused a handshake while
    // booting; connected before their applications started: no `:global` name to resolve.
    let refused = c
        .call(
            "logs",
            json!({"name": "c", "grep": "rejected|global name conflict"}),
        )
        .await;
    assert!(text(&refused).ends_with("no lines\n"), "{}", text(&refused));
    // Each member knows its index; the :pg group spans the cluster.
    let index = c.eval("c-2", "System.get_env(\"OS_SUP_NODE_INDEX\")").await;
    assert_eq!(index["value"], "\"2\"");
    let port = c.eval("c-2", "System.get_env(\"PORT\")").await;
    assert_eq!(port["value"], "\"4002\"");
    let pg = "length(:pg.get_members(:workers))";
    eval_until(&mut c, "c-1", pg, "3", Duration::from_secs(10)).await;

    // One question to every member, merged, each member's status in it.
    let procs = c.call("processes", json!({"name": "c", "limit": 2})).await;
    let data = &procs["structuredContent"];
    assert_eq!(
        statuses(data),
        members
            .iter()
            .map(|m| (m.to_string(), "ok".to_string()))
            .collect::<Vec<_>>()
    );
    let procs_text = text(&procs);
    for m in &members {
        assert!(procs_text.contains(&format!("── {m}\n")), "{procs_text}");
    }
    let diagnosed = c.call("diagnose", json!({"name": "c"})).await;
    let diagnosed_text = text(&diagnosed);
    assert!(
        diagnosed_text.starts_with("diagnose on cluster c: 3 members, 3 answered\n"),
        "{diagnosed_text}"
    );
    assert!(diagnosed_text.len() < 2048, "{diagnosed_text}");
    let logs = wait_log(&mut c, "connected to").await;
    assert!(
        logs.lines()
            .any(|l| l.contains(" c-1 ") && l.contains("os_sup_cluster")),
        "{logs}"
    );
    let times: Vec<&str> = logs.lines().skip(1).map(|l| &l[..12]).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "merged by time: {logs}"
    );

    // Lists are shown by what differs across members.
    let apps = text(&c.call("applications", json!({"name": "c"})).await);
    assert!(
        apps.contains("applications alike on every member; none differs"),
        "{apps}"
    );
    c.eval("c-2", "Application.put_env(:cluster_app, :mode, :canary)")
        .await;
    let env = text(
        &c.call("applications", json!({"name": "c", "app": "cluster_app"}))
            .await,
    );
    assert!(
        env.contains("  :mode: c-2 :canary; absent on c-1, c-3"),
        "{env}"
    );

    // A name is found on the member that holds it; the others say where it lives.
    c.eval(
        "c-2",
        "pid = spawn(fn -> Process.sleep(:infinity) end); Process.register(pid, :only_here); :ok",
    )
    .await;
    let found = c
        .call("process_info", json!({"name": "c", "pid": "only_here"}))
        .await;
    let found_statuses = statuses(&found["structuredContent"]);
    assert_eq!(
        found_statuses[1],
        ("c-2".to_string(), "ok".to_string()),
        "{found}"
    );
    assert!(found_statuses[0].1.starts_with("error: "), "{found}");
    let leader = c
        .call(
            "process_info",
            json!({"name": "c", "pid": "Elixir.ClusterApp.Leader"}),
        )
        .await;
    let leader_text = text(&leader);
    // Values stay as the node wrote them; a legend names each member's node.
    let c1_node = c.node_status("c-1").await["node"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        leader_text.contains(&format!("it lives on {c1_node};")),
        "{leader_text}"
    );
    assert!(
        leader_text.contains(&format!("c-1 is {c1_node}")),
        "{leader_text}"
    );
    // A `:pg` group: each member answers with its own member of the group.
    let group = c
        .call("process_info", json!({"name": "c", "pid": "workers"}))
        .await;
    assert_eq!(
        statuses(&group["structuredContent"]),
        members
            .iter()
            .map(|m| (m.to_string(), "ok".to_string()))
            .collect::<Vec<_>>(),
        "{group}"
    );
    assert!(
        text(&group).contains("ClusterApp.Worker"),
        "{}",
        text(&group)
    );

    // Who waits on whom across members: c-2's callers of a `:global` server on c-1 grouped,
    // the server named as c-1 writes it, with its global name and its member.
    let holder = "pid = spawn(fn -> receive do _ -> Process.sleep(:infinity) end end); \
                  :yes = :global.register_name(:slow_books, pid); pid";
    let pid = c.eval("c-1", holder).await["value"].clone();
    let callers = "for _ <- 1..5, do: spawn(fn -> GenServer.call({:global, :slow_books}, \
                   :post, :infinity) end)";
    c.eval("c-2", callers).await;
    let waits = text(&c.call("waits", json!({"name": "c"})).await);
    let at_c2 = &waits[waits.find("── c-2").expect(&waits)..];
    let expected = format!("{} (global :slow_books) on c-1", pid.as_str().unwrap());
    assert!(at_c2.contains(&expected), "{expected} in {waits}");
    assert!(at_c2.contains("+4 more waiting the same way"), "{waits}");
    // So many callers held up by one process of another member are contention on theirs.
    let diagnosed = text(&c.call("diagnose", json!({"name": "c-2"})).await);
    let crowd = format!("contention: 5 processes blocked in calls on {expected}");
    assert!(diagnosed.contains(&crowd), "{crowd} in {diagnosed}");

    // A member whose process, restarted after a crash, is no longer in the group its peers'
    // processes are in: the cluster's diagnosis names it and where the code joins groups.
    c.eval(
        "c-2",
        "replica = Process.whereis(ClusterApp.Replica); ref = Process.monitor(replica); \
         Process.exit(replica, :kill); receive do {:DOWN, ^ref, _, _, _} -> :ok end",
    )
    .await;
    // Restarted, and in no group.
    eval_until(
        &mut c,
        "c-2",
        "{is_pid(Process.whereis(ClusterApp.Replica)), :pg.get_local_members(:replicas)}",
        "{true, []}",
        Duration::from_secs(10),
    )
    .await;
    let diagnosed = c.call("diagnose", json!({"name": "c"})).await;
    let diagnosed_text = text(&diagnosed);
    assert!(
        diagnosed_text.contains("1. cluster: c-2 has no process in pg group :pg :replicas"),
        "{diagnosed_text}"
    );
    assert!(
        diagnosed_text.contains("next: callers {\"name\":\"c-2\",\"target\":\":pg.join\"}"),
        "{diagnosed_text}"
    );
    assert_eq!(diagnosed["structuredContent"]["healthy"], false);
    // And the env value only c-2 holds (put above).
    assert!(
        diagnosed_text.contains(
            "cluster: c-2 holds a different application env value than every other member at \
             :cluster_app :mode\n   next: eval {\"name\":\"c-2\",\"code\":\
             \"Application.get_env(:cluster_app, :mode)\"}"
        ),
        "{diagnosed_text}"
    );

    // A partition: both sides in the matrix, each side's own view, :global elects on each.
    let split = c
        .ok("partition", json!({"name": "c", "side": ["c-1"]}))
        .await;
    assert_eq!(split["split"], json!([["c-1"], ["c-2", "c-3"]]), "{split}");
    let seen = view(&mut c).await;
    let row = |v: &Value, m: &str| {
        v["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["member"] == m)
            .unwrap()
            .clone()
    };
    assert_eq!(row(&seen, "c-1")["sees"], json!([]), "{seen}");
    assert_eq!(row(&seen, "c-2")["sees"], json!(["c-3"]), "{seen}");
    assert_eq!(row(&seen, "c-1")["blocks"], json!(["c-2", "c-3"]), "{seen}");
    // It holds: a reconnection from the other side is refused.
    let refused = c
        .eval(
            "c-2",
            &format!(
                "Node.connect(:\"{}\")",
                row(&seen, "c-1")["node"].as_str().unwrap()
            ),
        )
        .await;
    assert_eq!(refused["value"], "false", "{refused}");
    // The cluster's diagnosis says so first, whatever each member says of itself.
    let diagnosed = c.call("diagnose", json!({"name": "c"})).await;
    let diagnosed_text = text(&diagnosed);
    assert!(
        diagnosed_text.contains(
            "1. cluster: PARTITIONED into 2 sides that do not see each other: [c-1] | [c-2, c-3]"
        ),
        "{diagnosed_text}"
    );
    assert!(!diagnosed_text.contains("healthy: all"), "{diagnosed_text}");
    assert_eq!(diagnosed["structuredContent"]["healthy"], false);
    let side_leader =
        "case :global.whereis_name(ClusterApp.Leader), do: (:undefined -> :none; p -> node(p))";
    wait_until(
        Duration::from_secs(10),
        "a leader on the split-off side",
        async || c.eval("c-3", side_leader).await,
        |leader| {
            let node = leader["value"].as_str().unwrap();
            node.contains("c-2_") || node.contains("c-3_")
        },
    )
    .await;

    // Heal: connected again, and the logs show :global resolving the two leaders.
    let healed = c.ok("partition", json!({"name": "c", "heal": true})).await;
    assert_eq!(healed["fully_connected"], true, "{healed}");
    let conflict = wait_log(&mut c, "global name conflict").await;
    assert!(
        conflict.contains("global name conflict on ClusterApp.Leader"),
        "{conflict}"
    );
    let lost = wait_log(&mut c, "blocked by a partition").await;
    assert!(lost.contains("lost c-"), "{lost}");

    // A killed member: a partial answer naming it, then restarted by its policy.
    let pid = c.node_status("c-3").await["os_pid"].as_u64().unwrap() as u32;
    common::kill(pid, libc::SIGKILL);
    let partial = c.call("processes", json!({"name": "c", "limit": 1})).await;
    let partial_statuses = statuses(&partial["structuredContent"]);
    assert_eq!(partial_statuses[0].1, "ok", "{partial}");
    // Why: restarting, or (asked in the instant before this server saw the exit) its
    // connection lost.
    let why = &partial_statuses[2].1;
    assert!(
        why.starts_with("not running (restarting)") || why.contains("connection to"),
        "{partial}"
    );
    assert_ne!(
        partial["isError"], true,
        "a partial answer is an answer: {partial}"
    );
    let back = c.wait_restarted("c-3", pid.into()).await;
    assert_eq!(back["restarts"], 1, "{back}");
    // ...and connects itself to the others again.
    wait_until(
        Duration::from_secs(15),
        "the cluster fully connected again",
        async || view(&mut c).await,
        |view| view["fully_connected"] == true,
    )
    .await;

    // Asking a cluster one thing that acts on one node says so.
    let refused = c.err("eval", json!({"name": "c", "code": "1"})).await;
    assert!(refused.contains("name one"), "{refused}");
    assert!(refused.contains("all: true"), "{refused}");
    // ...unless the caller opts in: then every member runs it, and each answer is its own.
    let everywhere = c
        .call(
            "eval",
            json!({"name": "c", "code": "System.get_env(\"OS_SUP_NODE_INDEX\")", "all": true}),
        )
        .await;
    let everywhere_statuses = statuses(&everywhere["structuredContent"]);
    assert!(
        everywhere_statuses.iter().all(|(_, s)| s == "ok"),
        "{everywhere}"
    );
    let answers = text(&everywhere);
    for (member, index) in [("c-1", "\"1\""), ("c-2", "\"2\""), ("c-3", "\"3\"")] {
        let at = answers.find(&format!("── {member}\n")).expect(&answers);
        assert!(answers[at..].lines().nth(1) == Some(index), "{answers}");
    }
    // Node names in values are the nodes' own, never rewritten into member names.
    let listed = text(
        &c.call(
            "eval",
            json!({"name": "c", "code": "Node.list()", "all": true}),
        )
        .await,
    );
    let c2_node = c.node_status("c-2").await["node"]
        .as_str()
        .unwrap()
        .to_string();
    let at_c1 = &listed[listed.find("── c-1\n").expect(&listed)..];
    assert!(at_c1.contains(&c2_node), "{listed}");
    assert!(!listed.contains(":\"c-2\""), "{listed}");
    let not_cluster = c
        .err("eval", json!({"name": "c-1", "code": "1", "all": true}))
        .await;
    assert!(not_cluster.contains("not a cluster"), "{not_cluster}");

    // A frozen member: the answer still comes, by the deadline, naming it.
    let pid = c.node_status("c-2").await["os_pid"].as_u64().unwrap() as u32;
    common::freeze(pid);
    let (frozen, took) = timed(c.call("processes", json!({"name": "c", "limit": 1}))).await;
    common::kill(pid, libc::SIGCONT);
    let frozen_statuses = statuses(&frozen["structuredContent"]);
    assert_ne!(frozen_statuses[1].1, "ok", "{frozen}");
    assert_eq!(frozen_statuses[0].1, "ok", "{frozen}");
    assert!(took < Duration::from_secs(25), "{took:?}");

    let stopped = c.call("stop", json!({"name": "c"})).await;
    assert_ne!(stopped["isError"], true, "{stopped}");
}

/// Attaching to one node of a cluster this server did not start shows its peers as cluster
/// `NAME*`; a peer is attached (same cookie) only when a call needs it, and a node that
/// joins later is a member from the next call on.
#[tokio::test]
async fn attaching_one_member_of_a_running_cluster_shows_them_all() {
    let cookie = format!("c{}", std::process::id());
    let peers: Vec<ErlNode> = ["pa", "pb", "pc", "pd"]
        .iter()
        .map(|base| ErlNode::build(base).cookie(&cookie).start())
        .collect();
    let server = Server::start();
    let mut c = server.client().await;
    let attached = c
        .attach(json!({"name": "p", "node": peers[0].name, "cookie": cookie}))
        .await;
    assert_eq!(attached["state"], "attached");
    // The nodes connect to each other (as an app's clustering would).
    let connect = format!(
        "[net_kernel:connect_node('{}') || _ <- [1]] ++ [net_kernel:connect_node('{}') || _ <- [1]]",
        peers[1].name, peers[2].name
    );
    // The other two may still be booting: until both answer.
    eval_until(
        &mut c,
        "p",
        &connect,
        "[true,true]",
        Duration::from_secs(20),
    )
    .await;
    c.ok("remove", json!({"name": "p"})).await;
    c.attach(json!({"name": "p", "node": peers[0].name, "cookie": cookie}))
        .await;

    // Only `p` is attached until a call needs the others.
    let listed = c.ok("status", json!({})).await;
    assert_eq!(listed["nodes"].as_array().unwrap().len(), 1, "{listed}");
    let cluster = c.ok("status", json!({"name": "p*"})).await;
    assert_eq!(
        cluster["cluster"]["members"].as_array().unwrap().len(),
        3,
        "{cluster}"
    );
    // `global` meshes the nodes the test connected to the first.
    wait_until(
        Duration::from_secs(15),
        "the attached cluster fully connected",
        async || c.ok("status", json!({"name": "p*"})).await,
        |status| status["cluster"]["fully_connected"] == true,
    )
    .await;
    let procs = c.call("processes", json!({"name": "p*", "limit": 1})).await;
    assert!(
        text(&procs).starts_with("processes on cluster p*, 3 members: 3 ok (all ok)"),
        "{}",
        text(&procs)
    );
    let refused = c
        .err("partition", json!({"name": "p*", "side": ["p"]}))
        .await;
    assert!(refused.contains("found by `attach`"), "{refused}");
    // A node that joins the cluster later is a member of the next call.
    let join = format!("net_kernel:connect_node('{}')", peers[3].name);
    eval_until(&mut c, "p", &join, "true", Duration::from_secs(20)).await;
    let procs = c.call("processes", json!({"name": "p*", "limit": 1})).await;
    assert!(
        text(&procs).starts_with("processes on cluster p*, 4 members: 4 ok (all ok)"),
        "{}",
        text(&procs)
    );
    // Detaching the node attached first forgets the cluster; its peers stay attached.
    c.ok("remove", json!({"name": "p"})).await;
    let gone = c
        .err("partition", json!({"name": "p*", "heal": true}))
        .await;
    assert!(gone.contains("no cluster"), "{gone}");
    let listed = c.ok("status", json!({})).await;
    assert_eq!(listed["nodes"].as_array().unwrap().len(), 3, "{listed}");
}

/// The same registered process is compared member to member: one member doing several times
/// its peers' work is the cluster's first finding, named with the member, before each member's
/// own findings.
/// A server one member runs for the others: its finding names the members whose processes
/// call it, with how many calls each has in flight.
#[tokio::test]
async fn a_server_its_peers_call_is_named_with_its_callers_by_member() {
    let server = Server::start();
    let mut c = server.client().await;
    c.ok(
        "start",
        json!({"name": "r", "path": cluster_app(), "nodes": 3, "env": {"PORT": "{4200+index}"}}),
    )
    .await;
    // Pricing on r-1 works a while on every call; four callers on each of r-2 and r-3.
    c.eval(
        "r-1",
        r#"pid = spawn(fn ->
             f = fn f ->
               receive do
                 {:"$gen_call", from, {:price, n}} ->
                   _ = Enum.reduce(1..200_000, 0, &(&1 + &2))
                   GenServer.reply(from, n)
               end
               f.(f)
             end
             f.(f)
           end)
           Process.register(pid, Pricing)
           :ok"#,
    )
    .await;
    // The node's name as an Elixir atom literal (`:"r-1_ab12@127.0.0.1"`).
    let hot = c.eval("r-1", "node()").await["value"]
        .as_str()
        .unwrap()
        .to_string();
    for member in ["r-2", "r-3"] {
        c.eval(
            member,
            &format!(
                r#"for _ <- 1..4 do
                     spawn(fn ->
                       f = fn f, n -> GenServer.call({{Pricing, {hot}}}, {{:price, n}}, 60_000); f.(f, n + 1) end
                       f.(f, 0)
                     end)
                   end
                   :ok"#
            ),
        )
        .await;
    }
    let (answer, report) = wait_until(
        Duration::from_secs(60),
        "r-1's finding on Pricing with its callers",
        async || diagnose_with(&mut c, json!({"name": "r-1"}), 2400).await,
        |(_, report)| {
            report["findings"].as_array().is_some_and(|f| {
                f.iter()
                    .any(|f| f["facts"]["remote_callers"].as_u64() > Some(0))
            })
        },
    )
    .await;
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["facts"]["remote_callers"].as_u64() > Some(0))
        .unwrap_or_else(|| panic!("{answer}"));
    let line = finding["line"].as_str().unwrap();
    assert!(line.contains("Pricing"), "{line}");
    assert!(line.contains("called now from other members: r-"), "{line}");
    c.ok("stop", json!({"name": "r"})).await;
}

#[tokio::test]
async fn one_member_doing_its_peers_work_is_the_first_finding() {
    let server = Server::start();
    let mut c = server.client().await;
    c.ok(
        "start",
        json!({"name": "w", "path": cluster_app(), "nodes": 3, "env": {"PORT": "{4100+index}"}}),
    )
    .await;
    // The same worker on every member, the first without a pause; the others pause 20 ms
    // every 1000 rounds: a third of its work or less on OTP 25 to 29 (with 5 ms, OTP 29's
    // peers did 2.9× less, under the 3× that makes an imbalance).
    for (member, pause) in [("w-1", 0), ("w-2", 20), ("w-3", 20)] {
        c.eval(
            member,
            &format!(
                r#"pid = spawn(fn ->
                  f = fn f, n -> if rem(n, 1000) == 0 and {pause} > 0, do: Process.sleep({pause}); _ = Enum.sum(1..50); f.(f, n + 1) end
                  f.(f, 0)
                end)
                Process.register(pid, Burner)
                :ok"#
            ),
        )
        .await;
    }
    let diagnosed = c.call("diagnose", json!({"name": "w"})).await;
    let answer = text(&diagnosed);
    assert!(
        answer
            .starts_with("diagnose on cluster w: 3 members, 3 answered\n1. cluster: Burner works "),
        "{answer}"
    );
    assert!(answer.contains("× as hard on w-1 ("), "{answer}");
    let data = &diagnosed["structuredContent"];
    let first = &data["cluster_findings"][0];
    assert_eq!(first["next"]["tool"], "process_info", "{first}");
    assert_eq!(first["next"]["arguments"]["name"], "w-1", "{first}");
    assert_eq!(data["healthy"], false, "{answer}");
    c.ok("stop", json!({"name": "w"})).await;
}
