//! Keeps the recipe for adding a tool (`CONTRIBUTING.md`, "Adding a tool") true, both
//! ways: every place a tool is named in `src/` and `erlang/` is one the recipe lists, a file
//! generated from one ([`GENERATED`]), a feature built on the tool ([`BEYOND_THE_RECIPE`]) or
//! the same word meaning something else ([`OTHER_WORDS`]), so the recipe cannot understate
//! what a tool takes; every place the recipe lists is there for each tool it applies to; the
//! recipe names exactly the files of [`RECIPE`], at most [`MOST_PLACES`] of them, and no tool
//! takes more. Everything else a tool shows up in is derived from the table of tools: the
//! server's instructions (at run time), the README's tool table (written by
//! `OS_SUP_WRITE_DOCS=1 cargo test --test docs`), the helper's bounds header (`build.rs`) and
//! `priv/otpNN/*.beam` (`scripts/build_helper.sh`).
//!
//! "Naming a tool" is what code does with it. In Rust (comments, unit tests, and the prose of
//! prompts left out): its slice file, any string literal
//! that is the tool's name (`ToolCall::new("ets")`, `name = "ets"`, a match arm, a list of
//! names; not a JSON key such as `{"status": …}`), `mod ets;`, `ets_router`, a path
//! `tools::ets`, and a bound `src/bounds.rs` documents as the tool's (`` /// `ets`: … ``). In
//! Erlang: its line in the table (`os_sup_helper_tools`), an exported `ets/1`, and its bounds (`?ETS_LIMIT_MAX`, and their
//! `-define`s in the generated header). On the node a tool's name is also an ordinary atom
//! (`process_info` is a BIF, `ets` a module), so atoms elsewhere are not counted; there the
//! guarantee is that `os_sup_helper_tools:table/0` is the only table (`the_node_has_one_table_of_tools`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The files the recipe names (`<tool>`, `<group>` and `<part>` as written there), in its order:
/// the places a person edits to add a tool.
const RECIPE: &[&str] = &[
    "src/mcp/tools/<tool>.rs",
    "src/mcp/tools/mod.rs",
    "src/bounds.rs",
    "erlang/os_sup_<group>_<part>.erl",
    "erlang/os_sup_helper_tools.erl",
    "tests/<tool>.rs",
];

/// The most places a tool takes.
const MOST_PLACES: usize = 6;

/// Files under `src/` and `erlang/` that name tools but are written from another, never by hand.
const GENERATED: &[(&str, &str)] = &[
    // (file, what writes it)
    ("erlang/os_sup_bounds.hrl", "build.rs, from src/bounds.rs"),
];

/// Code beyond the recipe's files that names a tool: a feature built on the tool, or the node
/// layer doing the work of a tool that does not run inside the node.
#[rustfmt::skip]
const BEYOND_THE_RECIPE: &[(&str, &str, &str)] = &[
    // (tool, file, what it does with the tool)
    ("supervision_tree", "src/mcp/resources.rs", "`beam://NAME/tree` shows the tree as text"),
    ("process_info", "src/mcp/resources.rs", "`beam://NAME/profile/PID` draws a profile"),
    ("process_info", "src/dashboard/api.rs", "the dashboard's flame graph draws a profile"),
    ("processes", "src/dashboard/api.rs", "the dashboard lists the top processes"),
    ("supervision_tree", "src/dashboard/api.rs", "the dashboard draws the tree"),
    ("supervision_tree", "src/mcp/apps.rs", "an MCP Apps view draws the tree"),
    ("process_info", "src/mcp/apps.rs", "an MCP Apps view draws a profile"),
    ("diagnose", "src/mcp/apps.rs", "an MCP Apps view draws the diagnosis beside the vitals"),
    ("status", "src/client/command.rs", "the command-line client calls the tool"),
    ("start", "src/client/command.rs", "the command-line client calls the tool"),
    ("stop", "src/client/command.rs", "the command-line client calls the tool"),
    ("restart", "src/client/command.rs", "the command-line client calls the tool"),
    ("remove", "src/client/command.rs", "the command-line client calls the tool"),
    ("eval", "src/client/command.rs", "the command-line client calls the tool"),
    ("logs", "src/client/command.rs", "the command-line client calls the tool"),
    ("diagnose", "src/client/command.rs", "the command-line client calls the tool"),
    ("waits", "src/client/command.rs", "the command-line client calls the tool"),
    ("trace", "src/client/command.rs", "the command-line client calls the tool"),
    ("trace_results", "src/client/command.rs", "the command-line client calls the tool"),
    ("diagnose", "src/mcp/fanout.rs", "a cluster's name goes to the cluster's diagnosis"),
    ("diagnose", "src/mcp/cluster_diagnose.rs", "a cluster's diagnosis, from its members'"),
    ("diagnose", "src/node/diagnose/mod.rs", "the typed diagnosis the tool writes out"),
    ("diagnose", "src/node/mod.rs", "`node::diagnose` builds the typed diagnosis"),
    ("applications", "src/mcp/fanout.rs", "a cluster's answer shows what differs"),
    ("eval", "src/node/diagnose/concern.rs", "a finding's next call"),
    ("get_state", "src/node/diagnose/concern_tests.rs", "a finding's next call, checked"),
    ("processes", "src/node/diagnose/concern_tests.rs", "a finding's next call, checked"),
    ("process_info", "src/mcp/cluster_load.rs", "a cluster finding's next call"),
    ("system_info", "src/node/diagnose/concern_tests.rs", "a finding's next call, checked"),
    ("process_info", "src/node/diagnose/work.rs", "a finding's next call"),
    ("processes", "src/node/diagnose/work.rs", "a finding's next call"),
    ("source", "src/node/diagnose/work.rs", "a finding's next call"),
    ("process_info", "src/node/diagnose/concern_tests.rs", "a finding's next call, checked"),
    ("logs", "src/node/diagnose/restarted.rs", "a finding's next call"),
    ("callers", "src/mcp/cluster_compare.rs", "a cluster finding's next call"),
    ("diagnose", "src/mcp/cluster_compare.rs", "a cluster finding's next call"),
    ("eval", "src/mcp/cluster_compare.rs", "a cluster finding's next call"),
    ("status", "src/mcp/cluster_compare.rs", "a cluster finding's next call"),
    ("supervision_tree", "src/mcp/cluster_compare.rs", "a cluster finding's next call"),
    ("source", "src/mcp/cluster_code.rs", "a cluster finding's next call"),
    ("logs", "src/node/diagnose/rank.rs", "a finding's next call, checked"),
    ("process_info", "src/node/diagnose/cause_tests.rs", "a finding's next call, checked"),
    ("source", "src/node/diagnose/cause_tests.rs", "a finding's next call, checked"),
    (
        "source",
        "src/node/diagnose/cause.rs",
        "findings whose next call reads one function",
    ),
    ("get_state", "src/node/diagnose/concern.rs", "a finding's next call"),
    ("system_info", "src/node/diagnose/concern.rs", "a finding's next call"),
    ("ets", "src/node/diagnose/concern.rs", "a finding's next call"),
    ("trace", "src/node/diagnose/concern.rs", "a finding's next call"),
    ("processes", "src/node/diagnose/concern.rs", "a finding's next call"),
    ("get_state", "src/node/diagnose/process_holder.rs", "a finding's next call"),
    ("system_info", "src/node/diagnose/process_holder.rs", "a finding's next call"),
    ("processes", "src/node/diagnose/process_holder.rs", "a finding's next call"),
    ("process_info", "src/node/diagnose/holder_text.rs", "a finding's next call"),
    ("processes", "src/node/diagnose/holder_text.rs", "a finding's next call"),
    ("source", "src/node/diagnose/holder_text.rs", "a finding's next call"),
    ("partition", "src/node/cluster/split.rs", "splits and heals a cluster"),
    ("start", "src/node/cluster/mod.rs", "`node::cluster::start` starts a cluster"),
    ("start", "src/node/cluster/start.rs", "starts a cluster's members"),
    ("wait_ready", "src/node/registry_calls.rs", "waits for a node to be ready"),
    ("attach", "src/node/mod.rs", "`node::attach` attaches to a node"),
    ("stop", "src/node/supervisor/mod.rs", "`supervisor::stop` stops a node by steps"),
    ("start", "src/node/start_spec.rs", "its input, also a `[[node]]` of the configuration"),
    ("logs", "src/node/mod.rs", "`node::logs` keeps what the tool reads"),
    ("mix", "src/node/mix_task.rs", "runs the task"),
    ("eval", "src/helper/eval.rs", "the helper's `eval` request runs the code"),
];

/// Words spelled like a tool that mean something else where they are written.
#[rustfmt::skip]
const OTHER_WORDS: &[(&str, &str, &str)] = &[
    // (word, file, what it means there)
    ("start", "src/dashboard/api.rs", "the dashboard's own action, POST /api/nodes/NAME/start"),
    ("stop", "src/dashboard/api.rs", "the dashboard's own action"),
    ("restart", "src/dashboard/api.rs", "the dashboard's own action"),
    ("start", "src/helper/mod.rs", "os_sup_helper:start/0, called when loading it"),
    ("status", "src/helper/mod.rs", "the helper's `status` request"),
    ("system_info", "src/helper/mod.rs", "erlang:system_info(otp_release), to pick the beams"),
    ("logs", "src/node/persist/mod.rs", "the state dir's `logs/` folder, where nodes' logs are kept"),
    ("stop", "src/helper/mod.rs", "the helper's `stop` request"),
    ("eval", "src/helper/mod.rs", "`helper::eval`, the helper's `eval` request"),
    ("eval", "src/helper/events.rs", "the helper's `eval` events"),
    ("logs", "src/mcp/resources.rs", "the resource `beam://NAME/logs`"),
    ("vitals", "src/mcp/resources.rs", "the resource `beam://NAME/vitals`"),
    ("status", "src/mcp/tools/recompile.rs", "a field of recompile's data"),
    ("trace", "src/mcp/toolsets.rs", "the toolset `trace`"),
    ("vitals", "src/node/mod.rs", "`node::vitals`, the history the server keeps"),
    ("mix", "src/node/spawn.rs", "the `mix` command"),
    ("processes", "src/node/vitals.rs", "the node's process count"),
    ("ports", "src/node/vitals.rs", "the node's port count"),
    ("ports", "src/node/diagnose/concern.rs", "the node's port count"),
    ("remove", "erlang/os_sup_dev_load.erl", "`remove/1` deletes modules whose `.beam` is gone"),
];

fn files(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, exts, out);
        } else if path
            .extension()
            .is_some_and(|e| exts.iter().any(|x| e == *x))
        {
            out.push(path);
        }
    }
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|_| panic!("{relative}"))
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root()).unwrap().display().to_string()
}

/// An MCP tool as its slice declares it.
#[derive(Debug)]
struct McpTool {
    slice: String,
}

/// Every MCP tool by name: `#[tool(name = "…", …)]` in the slices under `src/mcp/tools/`.
fn mcp_tools() -> BTreeMap<String, McpTool> {
    let mut slices = Vec::new();
    files(&root().join("src/mcp/tools"), &["rs"], &mut slices);
    let mut tools = BTreeMap::new();
    for path in slices {
        let source = std::fs::read_to_string(&path).unwrap();
        for attribute in source.split("#[tool(").skip(1) {
            let attribute = attribute.split("pub async fn").next().unwrap();
            let Some((_, rest)) = attribute.split_once("name = \"") else {
                continue;
            };
            let name = rest.split('"').next().unwrap().to_string();
            let slice = relative(&path);
            tools.insert(name, McpTool { slice });
        }
    }
    assert!(tools.len() >= 25, "found the tools: {tools:?}");
    tools
}

/// The helper's table of tools (`os_sup_helper_tools:table/0`): tool → (module, function).
fn helper_table() -> BTreeMap<String, (String, String)> {
    let helper = read("erlang/os_sup_helper_tools.erl");
    let table = helper
        .split_once("table() ->\n    #{")
        .and_then(|(_, rest)| rest.split_once("}}."))
        .map(|(table, _)| format!("{table}}}"))
        .expect("os_sup_helper_tools.erl defines table/0");
    let table = table.as_str();
    table
        .split("},")
        .filter_map(|entry| {
            let (name, target) = entry.split_once("=>")?;
            let target = target.trim().trim_start_matches('{').trim_end_matches('}');
            let (module, function) = target.split_once(',')?;
            Some((
                name.trim().to_string(),
                (module.trim().to_string(), function.trim().to_string()),
            ))
        })
        .collect()
}

/// Every bound and default of `src/bounds.rs` by name, with the tools its doc names
/// (`` /// `trace`, `trace_messages`: … ``); panics on one that names none.
fn bounds() -> BTreeMap<String, Vec<String>> {
    let source = read("src/bounds.rs");
    let mut bounds = BTreeMap::new();
    let mut doc = String::new();
    for line in source.lines() {
        let line = line.trim();
        if let Some(text) = line.strip_prefix("///") {
            if doc.is_empty() {
                doc = text.trim().to_string();
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("pub const ") {
            let (name, kind) = rest.split_once(':').unwrap();
            if kind.trim_start().starts_with("Bound") || kind.trim_start().starts_with("u64") {
                let owners = doc.split_once(':').map_or("", |(owners, _)| owners);
                let tools: Vec<String> = owners
                    .split(',')
                    .filter_map(|t| t.trim().strip_prefix('`')?.strip_suffix('`'))
                    .map(str::to_string)
                    .collect();
                assert!(
                    !tools.is_empty(),
                    "src/bounds.rs: {name}'s doc starts with the tools it bounds (`tool`: …)"
                );
                bounds.insert(name.to_string(), tools);
            }
        }
        doc.clear();
    }
    assert!(bounds.len() >= 30, "{bounds:?}");
    bounds
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `word` occurs in `text` as a whole word.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
    })
}

/// A Rust file's code: no comments, no unit tests (the `#[cfg(test)] mod` a file ends with).
fn rust_code(source: &str) -> String {
    let source = source
        .split("#[cfg(test)]\nmod ")
        .next()
        .unwrap_or_default();
    source
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The string literals of Rust code that are not JSON keys (`"status": …` in `json!`).
fn literals(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            // A char literal holding a quote is no string.
            '\'' if chars.get(i + 1) == Some(&'"') => i += 3,
            '\'' if chars.get(i + 1) == Some(&'\\') => i += 4,
            '"' => {
                let raw = i > 0 && chars[i - 1] == 'r';
                let mut literal = String::new();
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && !raw {
                        literal.push(chars[i]);
                        i += 1;
                    }
                    literal.push(chars[i]);
                    i += 1;
                }
                i += 1;
                let rest: String = chars[i.min(chars.len())..].iter().take(3).collect();
                let rest = rest.trim_start();
                let key = rest.starts_with(':') && !rest.starts_with("::");
                if !key {
                    found.push(literal);
                }
            }
            _ => i += 1,
        }
    }
    found
}

/// Whether `code` (a Rust file's, at `path`) names tool `tool`, whose bounds are `bounds`.
fn rust_names(path: &str, code: &str, literals: &[String], tool: &str, bounds: &[&str]) -> bool {
    path == format!("src/mcp/tools/{tool}.rs")
        || literals.iter().any(|l| l == tool)
        || code.contains(&format!("mod {tool};"))
        || has_word(code, &format!("{tool}_router"))
        || code
            .match_indices(&format!("tools::{tool}"))
            .any(|(at, m)| !code[at + m.len()..].starts_with(is_word_char))
        || bounds.iter().any(|b| has_word(code, b))
}

/// Whether an Erlang file's `source` names tool `tool`, whose bounds are `bounds`.
fn erlang_names(source: &str, tool: &str, bounds: &[&str]) -> bool {
    let exported = source
        .split("-export([")
        .skip(1)
        .filter_map(|rest| rest.split_once("])").map(|(list, _)| list))
        .any(|list| list.split(',').any(|f| f.trim() == format!("{tool}/1")));
    let in_table = source
        .match_indices(&format!("{tool} => {{os_sup_"))
        .any(|(at, _)| !source[..at].ends_with(is_word_char));
    let bound = bounds.iter().any(|b| {
        ["_MIN", "_MAX", ""].iter().any(|end| {
            has_word(source, &format!("?{b}{end}"))
                || has_word(source, &format!("-define({b}{end}"))
        })
    });
    exported || in_table || bound
}

/// Every file under `src/` and `erlang/` that names each tool (MCP tools and the node's).
fn homes() -> BTreeMap<String, BTreeSet<String>> {
    let mut sources = Vec::new();
    files(&root().join("src"), &["rs"], &mut sources);
    files(&root().join("erlang"), &["erl", "hrl"], &mut sources);
    let mut tools: BTreeSet<String> = mcp_tools().into_keys().collect();
    tools.extend(helper_table().into_keys());
    let bounds = bounds();
    let bounds_of = |tool: &str| -> Vec<&str> {
        bounds
            .iter()
            .filter(|(_, tools)| tools.iter().any(|t| t == tool))
            .map(|(name, _)| name.as_str())
            .collect()
    };
    let mut homes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in sources {
        let file = relative(&path);
        let source = std::fs::read_to_string(&path).unwrap();
        let rust = file.ends_with(".rs");
        // The prose of prompts is not code.
        if file == "src/mcp/prompts.rs" {
            continue;
        }
        let code = if rust { rust_code(&source) } else { source };
        let literals = if rust { literals(&code) } else { Vec::new() };
        for tool in &tools {
            let bounds = bounds_of(tool);
            let names = if rust {
                rust_names(&file, &code, &literals, tool, &bounds)
            } else {
                erlang_names(&code, tool, &bounds)
            };
            if names {
                homes.entry(tool.clone()).or_default().insert(file.clone());
            }
        }
    }
    homes
}

/// The files the recipe gives tool `tool`, found from its slice, the helper's table and bounds.
fn recipe_files(tool: &str) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    if let Some(mcp) = mcp_tools().get(tool) {
        files.insert(mcp.slice.clone());
        files.insert("src/mcp/tools/mod.rs".to_string());
    }
    if let Some((module, _)) = helper_table().get(tool) {
        files.insert("erlang/os_sup_helper_tools.erl".to_string());
        files.insert(format!("erlang/{module}.erl"));
    }
    if bounds()
        .values()
        .any(|tools| tools.iter().any(|t| t == tool))
    {
        files.insert("src/bounds.rs".to_string());
    }
    files
}

#[test]
fn every_place_a_tool_is_named_is_in_the_recipe_or_listed() {
    let node_only: BTreeSet<String> = {
        let mcp = mcp_tools();
        helper_table()
            .into_keys()
            .filter(|t| !mcp.contains_key(t))
            .collect()
    };
    let mut unlisted = Vec::new();
    let mut report = String::new();
    for (tool, homes) in homes() {
        let recipe = recipe_files(&tool);
        let (mut counted, mut generated, mut beyond) = (Vec::new(), Vec::new(), Vec::new());
        for file in &homes {
            // A tool only the server calls (`vitals`, `heal`…) is sent from the code that
            // needs it.
            let caller = node_only.contains(&tool)
                && read(file).contains(&format!("ToolCall::new(\"{tool}\")"));
            if recipe.contains(file) || caller {
                counted.push(file.as_str());
            } else if GENERATED.iter().any(|(f, _)| f == file) {
                generated.push(file.as_str());
            } else if BEYOND_THE_RECIPE
                .iter()
                .any(|(t, f, _)| *t == tool && f == file)
            {
                beyond.push(file.as_str());
            } else if !OTHER_WORDS.iter().any(|(w, f, _)| *w == tool && f == file) {
                unlisted.push(format!("{tool}: {file}"));
            }
        }
        report += &format!(
            "  {tool:<17} {} {counted:?}, {} generated, and {} beyond: {beyond:?}\n",
            counted.len(),
            generated.len(),
            beyond.len()
        );
    }
    eprintln!("files naming each tool (src/ and erlang/), by the recipe:\n{report}");
    assert!(
        unlisted.is_empty(),
        "these files name a tool outside the recipe (CONTRIBUTING.md, \"Adding a tool\"): \
         say it in the tool's slice or its line of the table, derive it from them (GENERATED \
         when a file is written from another), or list it in BEYOND_THE_RECIPE (a feature built on the tool) or OTHER_WORDS (another word):\n{}",
        unlisted.join("\n")
    );
    // Every listed exception is still true.
    let homes = homes();
    for (word, file, why) in BEYOND_THE_RECIPE.iter().chain(OTHER_WORDS) {
        let names = homes.get(*word).is_some_and(|h| h.contains(*file))
            || (!homes.contains_key(*word)
                && literals(&rust_code(&read(file))).iter().any(|l| l == word));
        assert!(
            names,
            "{file} no longer names `{word}` ({why}): drop it from the list"
        );
    }
}

/// The test files that call `tool` (`"tool"` in them), but not the tests of the recipe itself.
fn tests_of(tool: &str) -> Vec<String> {
    let mut tests = Vec::new();
    files(&root().join("tests"), &["rs"], &mut tests);
    tests
        .iter()
        .map(|p| relative(p))
        .filter(|file| {
            ![
                "tests/tool_data.rs",
                "tests/tool_list.rs",
                "tests/tool_homes.rs",
            ]
            .contains(&file.as_str())
        })
        .filter(|file| read(file).contains(&format!("\"{tool}\"")))
        .collect()
}

#[test]
fn every_tool_has_every_place_the_recipe_gives_it() {
    let mcp = mcp_tools();
    let table = helper_table();
    let module_list = read("src/mcp/tools/mod.rs");
    let mut missing = Vec::new();
    for (tool, found) in &mcp {
        let stem = found
            .slice
            .trim_start_matches("src/mcp/tools/")
            .trim_end_matches(".rs");
        if !module_list.contains(&format!("Self::{stem}_router()")) {
            missing.push(format!("{tool}: its line in McpServer::routers_by_set"));
        }
        if tests_of(tool).is_empty() {
            missing.push(format!("{tool}: a test that calls it (tests/<tool>.rs)"));
        }
    }
    for (tool, (module, _)) in &table {
        for set in os_sup_mcp::helper::BEAMS.sets {
            if !set.modules.iter().any(|(m, _)| m == module) {
                missing.push(format!(
                    "{tool}: priv/otp{}/{module}.beam (scripts/build_helper.sh)",
                    set.otp
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the recipe (CONTRIBUTING.md, \"Adding a tool\") gives every tool these places:\n{}",
        missing.join("\n")
    );
}

/// A tool takes at most [`MOST_PLACES`] places: the recipe's files it is named in, and its test.
#[test]
fn a_tool_takes_at_most_six_places() {
    assert!(
        RECIPE.len() <= MOST_PLACES,
        "the recipe lists {} places; derive the others from the table of tools",
        RECIPE.len()
    );
    let homes = homes();
    let mut report = String::new();
    let mut over = Vec::new();
    for tool in mcp_tools().keys() {
        let recipe = recipe_files(tool);
        let mut places: Vec<String> = homes
            .get(tool)
            .map(|h| h.intersection(&recipe).cloned().collect())
            .unwrap_or_default();
        places.push("a test".to_string());
        report += &format!("  {tool:<17} {} {places:?}\n", places.len());
        if places.len() > MOST_PLACES {
            over.push(tool.clone());
        }
    }
    eprintln!("places each tool takes:\n{report}");
    assert!(
        over.is_empty(),
        "{over:?} take more than {MOST_PLACES} places:\n{report}"
    );
}

#[test]
fn the_recipe_names_exactly_these_files() {
    let contributing = read("CONTRIBUTING.md");
    let recipe = contributing
        .split_once("## Adding a tool")
        .and_then(|(_, rest)| rest.split("\n## ").next())
        .expect("CONTRIBUTING.md has \"Adding a tool\"");
    // Each numbered step names its file in its bold head: `1. **Its slice, `…`**`.
    let steps: Vec<&str> = recipe
        .lines()
        .filter_map(|line| {
            let (number, rest) = line.split_once(". **")?;
            number.trim().parse::<u32>().ok()?;
            let head = rest.split("**").next()?;
            head.split('`').nth(1)
        })
        .collect();
    assert_eq!(
        steps, RECIPE,
        "CONTRIBUTING.md's \"Adding a tool\" has one step per file of RECIPE, in order"
    );
}

#[test]
fn the_node_has_one_table_of_tools() {
    let mut modules = Vec::new();
    files(&root().join("erlang"), &["erl"], &mut modules);
    for module in modules {
        let source = std::fs::read_to_string(&module).unwrap();
        for export in ["tools/0", "run/2", "dispatch/2"] {
            let exported = source
                .split("-export([")
                .skip(1)
                .filter_map(|rest| rest.split_once("])").map(|(list, _)| list))
                .any(|list| list.split(',').any(|f| f.trim() == export));
            assert!(
                !exported,
                "{} exports {export}: tools are found through os_sup_helper_tools:table/0 only",
                module.display()
            );
        }
    }
    let table = helper_table();
    assert!(table.len() >= 20, "{table:?}");
    // Every entry names an exported function of its module.
    for (tool, (module, function)) in &table {
        let source = read(&format!("erlang/{module}.erl"));
        assert!(
            erlang_names(&source, function, &[]),
            "{tool}: {module} does not export {function}/1"
        );
    }
}

#[test]
fn nothing_matches_on_tool_names_outside_the_tables() {
    let mut sources = Vec::new();
    for dir in ["src/mcp", "src/node", "src/helper", "src/dist"] {
        files(&root().join(dir), &["rs"], &mut sources);
    }
    let mut tools: BTreeSet<String> = mcp_tools().into_keys().collect();
    tools.extend(helper_table().into_keys());
    for path in sources {
        // (The dashboard's own actions, `POST /api/nodes/{name}/start`, are words of its API.)
        let source = rust_code(&std::fs::read_to_string(&path).unwrap());
        let file = relative(&path);
        for tool in &tools {
            if OTHER_WORDS.iter().any(|(w, f, _)| w == tool && *f == file) {
                continue;
            }
            for arm in [format!("\"{tool}\" =>"), format!("\"{tool}\" |")] {
                assert!(
                    !source.contains(&arm),
                    "{} matches on the tool name `{tool}`: say what differs in the tool's \
                     slice instead",
                    path.display()
                );
            }
        }
    }
}
