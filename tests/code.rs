//! Code knowledge from the running node (`docs`, `source`, `callers`, `find`): on the demo
//! fixture (its `DemoApp.Ledger`, documented and specced, called by `DemoApp.Till`) and on a
//! plain `erl` node, through a real MCP client. Lines are checked against the fixture's files.

mod common;

use common::{ailments, demo_app, demo_node, elixir_at_least, names, text, Client, Server};
use serde_json::{json, Value};

/// The 1-based line of the first line of `file` (under the fixture) that contains `needle`.
fn line_of(file: &str, needle: &str) -> u64 {
    let source = std::fs::read_to_string(demo_app().join(file)).unwrap();
    let index = source
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle} not in {file}"));
    index as u64 + 1
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap_or_default().to_string())
        .collect()
}

/// What `tool` (`docs`, `source`, `callers`) says of `target` on node `code`.
async fn look_up(c: &mut Client, tool: &str, target: &str) -> Value {
    c.ok(tool, json!({"name": "code", "target": target})).await
}

/// The functions a `callers` answer lists, in order.
fn functions(answer: &Value) -> Vec<&str> {
    let rows = answer["rows"].as_array().expect("rows");
    rows.iter()
        .map(|r| r["function"].as_str().unwrap())
        .collect()
}

/// Why `tool` refuses `target` on node `code`.
async fn refusal(c: &mut Client, tool: &str, target: &str) -> String {
    c.err(tool, json!({"name": "code", "target": target})).await
}

#[tokio::test]
async fn docs_give_signatures_specs_and_docs_on_the_fixture() {
    let (_server, mut c) = demo_node("code").await;
    // docs of an Elixir function: signature, spec and doc, under 2 KB of text.
    let result = c
        .call("docs", json!({"name": "code", "target": "Enum.map/2"}))
        .await;
    let body = text(&result);
    assert!(body.len() <= 2048, "{} bytes: {body}", body.len());
    let docs = &result["structuredContent"];
    assert_eq!(docs["kind"], "function", "{docs}");
    let entry = &docs["entries"][0];
    assert_eq!(strings(&entry["signatures"]), ["map(enumerable, fun)"]);
    assert_eq!(
        strings(&entry["specs"]),
        ["@spec map(t(), (element() -> any())) :: list()"]
    );
    assert!(
        entry["doc"]
            .as_str()
            .unwrap()
            .starts_with("Returns a list where each element"),
        "{entry}"
    );

    // A fixture module and function written with @moduledoc, @doc and @spec.
    let module = look_up(&mut c, "docs", "DemoApp.Ledger").await;
    assert!(
        module["moduledoc"]
            .as_str()
            .unwrap()
            .starts_with("A tiny ledger"),
        "{module}"
    );
    assert_eq!(strings(&module["functions"]), ["balance/1", "post/2"]);
    assert_eq!(strings(&module["types"]), ["amount/0"]);
    let post = look_up(&mut c, "docs", "DemoApp.Ledger.post").await;
    assert_eq!(post["target"], "DemoApp.Ledger.post/2", "{post}");
    assert_eq!(
        strings(&post["entries"][0]["specs"]),
        ["@spec post(String.t(), amount()) :: {:ok, {String.t(), amount()}}"]
    );
    assert_eq!(
        post["entries"][0]["doc"],
        "Posts `amount` to `account`; returns the entry."
    );

    // A callback and a type.
    let callback = look_up(&mut c, "docs", "GenServer.handle_call/3").await;
    assert_eq!(callback["kind"], "callback", "{callback}");
    assert!(
        strings(&callback["entries"][0]["specs"])[0].starts_with("@callback handle_call("),
        "{callback}"
    );
    let ty = look_up(&mut c, "docs", "t:Enum.t/0").await;
    assert_eq!(
        strings(&ty["entries"][0]["specs"]),
        ["@type t() :: Enumerable.t()"]
    );

    // A missing target says what to do.
    let missing = refusal(&mut c, "docs", "Enum.mapp/2").await;
    assert!(
        missing.contains("no function Enum.mapp/2; did you mean Enum.map/2?"),
        "{missing}"
    );
}

#[tokio::test]
async fn unknown_names_asked_of_docs_and_callers_make_no_atoms() {
    let (_server, mut c) = demo_node("code").await;
    let atoms = "length(:erlang.registered()) >= 0 and :erlang.system_info(:atom_count)";
    // The first eval, and the first unknown name each tool is asked about, load the code
    // that runs them, and that code's atoms: count from after them.
    c.eval("code", atoms).await;
    refusal(&mut c, "docs", "No.Such.Module_w8.fun/1").await;
    refusal(&mut c, "callers", "Enum.no_such_fun_w8/1").await;
    let before = c.eval("code", atoms).await["value"].clone();
    refusal(&mut c, "docs", "No.Such.Module_x9.fun/1").await;
    refusal(&mut c, "callers", "Enum.no_such_fun_x9/1").await;
    let after = c.eval("code", atoms).await["value"].clone();
    let (before, after): (u64, u64) = (
        before.as_str().unwrap().parse().unwrap(),
        after.as_str().unwrap().parse().unwrap(),
    );
    assert!(
        after < before + 20,
        "unknown names must not become atoms: {before} → {after}"
    );
}

#[tokio::test]
async fn source_gives_clause_lines_and_code_on_the_fixture() {
    let (_server, mut c) = demo_node("code").await;
    // source: each clause's first line, checked against the file.
    let source = look_up(&mut c, "source", "DemoApp.Ledger.post/2").await;
    let file = "lib/demo_app/ledger.ex";
    assert_eq!(source["file"], file, "{source}");
    let first = line_of(file, "def post(account, amount) when");
    let second = line_of(file, "def post(account, amount) do");
    assert_eq!(source["line"], json!(first), "{source}");
    assert_eq!(source["entries"][0]["clauses"], json!([first, second]));
    // One function's code comes with it, numbered from the file: both clauses, not the next
    // function.
    let code = source["code"].as_str().unwrap_or_default();
    assert!(
        code.starts_with(&format!("{first}  ")) && code.contains("def post(account, amount) do"),
        "{source}"
    );
    assert!(code.ends_with("  end"), "{source}");
    assert!(!code.contains("balance"), "{source}");
    // A literal last expression (`:ok`) has no line in the debug info: the code still runs
    // to the function's `end`, and stops before the next function.
    let start_all = look_up(&mut c, "source", "DemoApp.Worker.start_all/0").await;
    let code = start_all["code"].as_str().unwrap_or_default();
    assert!(code.ends_with("\n13      :ok\n14    end"), "{start_all}");
    assert!(!code.contains("start_link"), "{start_all}");
    // A module comes with its functions and their lines; a registered name is no module.
    let module = look_up(&mut c, "source", "DemoApp.Worker").await;
    let start_all_line = module["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["function"] == "start_all/0")
        .map(|f| f["line"].clone());
    assert_eq!(start_all_line, Some(json!(8)), "{module}");
    let name = refusal(&mut c, "source", "DemoApp.WorkerSup.init/1").await;
    assert!(
        name.contains("DemoApp.WorkerSup is no module: it is the registered name of process"),
        "{name}"
    );
    let module = look_up(&mut c, "source", "DemoApp.Till").await;
    assert_eq!(module["file"], "lib/demo_app/till.ex");
    assert_eq!(module["line"], json!(1));

    // A missing module says which one was meant.
    let missing = refusal(&mut c, "source", "DemoApp.Ledgr").await;
    assert!(
        missing.contains("no module DemoApp.Ledgr") && missing.contains("DemoApp.Ledger"),
        "{missing}"
    );
}

#[tokio::test]
async fn callers_name_the_fixtures_callers_and_callees_with_lines() {
    let (_server, mut c) = demo_node("code").await;
    // callers: the fixture's callers of post/2 with their lines, and not audit/0.
    let callers = look_up(&mut c, "callers", "DemoApp.Ledger.post/2").await;
    assert_eq!(callers["partial"], false, "{callers}");
    let rows = callers["rows"].as_array().unwrap();
    assert_eq!(
        functions(&callers),
        ["DemoApp.Till.refund/1", "DemoApp.Till.sell/1"],
        "{callers}"
    );
    let till = "lib/demo_app/till.ex";
    assert_eq!(rows[0]["file"], till);
    assert_eq!(
        rows[0]["lines"],
        json!([line_of(till, "DemoApp.Ledger.post(\"refunds\"")])
    );
    assert_eq!(rows[1]["lines"], json!([line_of(till, "def sell(price)")]));
    // A function calling itself is not its own caller: said after the count, not listed.
    let result = c
        .call(
            "callers",
            json!({"name": "code", "target": "DemoApp.Hot.spin/2"}),
        )
        .await;
    let spin = &result["structuredContent"];
    assert_eq!(functions(spin), ["DemoApp.Hot.spin/1"], "{spin}");
    assert_eq!(spin["own_call_sites"], 2, "{spin}");
    let text = text(&result);
    assert!(
        text.contains(&format!(
            "it calls itself at lib/demo_app/hot.ex:{},",
            line_of("lib/demo_app/hot.ex", "spin(counter, work(n))")
        )),
        "{text}"
    );
    let callees = c
        .ok(
            "callers",
            json!({"name": "code", "target": "DemoApp.Till.refund/1", "callees": true}),
        )
        .await;
    assert_eq!(
        functions(&callees),
        ["DemoApp.Ledger.balance/1", "DemoApp.Ledger.post/2"],
        "{callees}"
    );
}

#[tokio::test]
async fn find_ranks_the_fixtures_modules_first() {
    let (_server, mut c) = demo_node("code").await;
    // find: the fixture's modules first, with the first doc line.
    let found = c
        .ok("find", json!({"name": "code", "query": "Ledger"}))
        .await;
    let first = &found["hits"][0];
    assert_eq!(first["name"], "DemoApp.Ledger", "{found}");
    assert_eq!(first["project"], true);
    assert!(
        first["doc"].as_str().unwrap().starts_with("A tiny ledger"),
        "{found}"
    );
    let found = c
        .ok(
            "find",
            json!({"name": "code", "query": "/^DemoApp\\.Till\\./"}),
        )
        .await;
    let names = names(&found["hits"]);
    assert_eq!(
        names,
        [
            "DemoApp.Till.audit/0",
            "DemoApp.Till.refund/1",
            "DemoApp.Till.sell/1"
        ],
        "{found}"
    );
    let found = c
        .ok(
            "find",
            json!({"name": "code", "query": "chunk_while", "limit": 5}),
        )
        .await;
    assert!(
        found["hits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["name"] == "Enum.chunk_while/4" && h["arity"] == 4),
        "{found}"
    );
}

#[tokio::test]
async fn code_tools_on_a_plain_erlang_node_and_read_only() {
    let server = Server::start_with(&["--read-only"]);
    let mut c = server.client().await;
    let names = c.tool_names().await;
    for tool in ["docs", "source", "callers", "find"] {
        assert!(
            names.iter().any(|n| n == tool),
            "{tool} not offered read-only: {names:?}"
        );
    }
    drop(c);
    drop(server);

    let server = Server::start();
    let mut c = server.client().await;
    c.start_erl("e").await;
    for target in ["lists:seq/3", ":lists.seq/3"] {
        let result = c.call("docs", json!({"name": "e", "target": target})).await;
        let body = text(&result);
        let docs = &result["structuredContent"];
        assert_ne!(result["isError"], json!(true), "{body}");
        assert_eq!(docs["target"], "lists:seq/3", "{docs}");
        // With or without OTP's doc chunks, and the answer says which.
        if docs["docs_chunk"] == false {
            assert!(body.contains("no docs chunk for lists"), "{body}");
        } else {
            assert!(docs["entries"][0]["doc"].is_string(), "{docs}");
        }
        assert!(
            strings(&docs["entries"][0]["specs"])[0].starts_with("-spec seq(From, To, Incr)"),
            "{docs}"
        );
    }
    let module = c.ok("docs", json!({"name": "e", "target": "lists"})).await;
    assert!(
        strings(&module["functions"]).contains(&"seq/3".to_string()),
        "{module}"
    );
    let missing = c
        .err("docs", json!({"name": "e", "target": "lists:seqq/2"}))
        .await;
    assert!(
        missing.contains("no function lists:seqq/2; did you mean lists:seq/2"),
        "{missing}"
    );
    let source = c
        .ok("source", json!({"name": "e", "target": "lists:seq/3"}))
        .await;
    assert!(
        source["file"].as_str().unwrap().ends_with("lists.erl"),
        "{source}"
    );
    assert!(source["line"].as_u64().unwrap() > 1, "{source}");
    let found = c
        .ok("find", json!({"name": "e", "query": "lists:seq"}))
        .await;
    assert_eq!(found["hits"][0]["name"], "lists:seq/2", "{found}");
    let callers = c
        .ok("callers", json!({"name": "e", "target": "lists:seq/2"}))
        .await;
    assert_eq!(callers["partial"], false, "{callers}");
}

/// Calls the Elixir compiler inlines or rewrites are in a BEAM under the name it compiled them
/// to (`String.to_atom/1` as `:erlang.binary_to_atom/2`, `Process.monitor/1` as
/// `:erlang.monitor/2`): `callers` finds them under either name.
#[tokio::test]
async fn callers_find_calls_the_compiler_rewrote() {
    let server = Server::start();
    let mut c = server.client().await;
    c.start_project("rw", &ailments()).await;
    for (target, caller, compiled) in [
        (
            "String.to_atom/1",
            "Ailments.Tagger.tag/1",
            // Elixir 1.14 inlines it as `:erlang.binary_to_atom(text, :utf8)`, 1.18 and 1.20
            // as `:erlang.binary_to_atom(text)` (utf8 is its default since OTP 23).
            if elixir_at_least(1, 18) {
                ":erlang.binary_to_atom/1"
            } else {
                ":erlang.binary_to_atom/2"
            },
        ),
        (
            "Process.monitor/1",
            "Ailments.Watcher.watch/1",
            ":erlang.monitor/2",
        ),
    ] {
        let found = c
            .call("callers", json!({"name": "rw", "target": target}))
            .await;
        let answer = text(&found);
        assert!(
            answer.contains(&format!("(compiled as {compiled})")),
            "{answer}"
        );
        let rows = found["structuredContent"]["rows"].as_array().unwrap();
        assert!(
            rows.iter().any(|r| r["function"] == caller),
            "{target}: {answer}"
        );
    }
    c.ok("stop", json!({"name": "rw"})).await;
}
