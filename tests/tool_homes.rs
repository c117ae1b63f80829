//! Keeps the recipe for adding a tool (`docs/ARCHITECTURE.md`, "Adding a tool") true: a tool
//! lives in its slice (`src/mcp/tools/<tool>.rs`), its Erlang module, one line in each side's
//! table (`McpServer::routers_by_set` in `src/mcp/tools/mod.rs`, `TOOLS` in
//! `erlang/os_sup_helper.erl`) and its test, so no tool is named in more than 5 source files
//! under `src/` and `erlang/`, no helper module keeps a tool list of its own, and nothing
//! outside the two tables matches on tool names.
//!
//! "Naming a tool" is what code does with it: in Rust its slice file, `mod name;`,
//! `name_router`, a path `tools::name`, `ToolCall::new("name")`, its `name = "name"` attribute
//! or a match arm on `"name"`; in Erlang its `TOOLS` line (`name => {os_sup_…`) or an exported
//! `name/1`. Comments, unit tests, and the prose of prompts and of the server's instructions
//! are not code (a tool's name is also an ordinary word: `status`, `find`, `source`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Most source files a tool may be named in.
const MAX_FILES: usize = 5;

/// Features built on a tool, which name it beside its own files: not part of adding a tool.
const CONSUMERS: &[(&str, &str)] = &[
    // The `beam://NAME/tree` resource shows the tree as text.
    ("supervision_tree", "src/mcp/resources.rs"),
    // The `beam://NAME/profile/PID` resource and the dashboard's flame graph draw a profile
    // (`process_info::profile_call`).
    ("process_info", "src/mcp/resources.rs"),
    ("process_info", "src/dashboard/api.rs"),
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

/// Every tool: the MCP tools (`name = "…"` in `src/mcp/tools/*.rs`) and the node's
/// (`TOOLS` in `os_sup_helper.erl`).
fn tools() -> Vec<String> {
    let mut names = Vec::new();
    let mut slices = Vec::new();
    files(&root().join("src/mcp/tools"), &["rs"], &mut slices);
    for file in slices {
        let source = std::fs::read_to_string(file).unwrap();
        for (_, rest) in source
            .match_indices("name = \"")
            .map(|(at, m)| (at, &source[at + m.len()..]))
        {
            names.push(rest.split('"').next().unwrap().to_string());
        }
    }
    names.extend(helper_table().into_keys());
    names.sort();
    names.dedup();
    names
}

/// `os_sup_helper`'s `TOOLS`: tool → `{Module, Function}` text.
fn helper_table() -> BTreeMap<String, String> {
    let helper = std::fs::read_to_string(root().join("erlang/os_sup_helper.erl")).unwrap();
    let table = helper
        .split_once("-define(TOOLS, #{")
        .and_then(|(_, rest)| rest.split_once("})."))
        .expect("os_sup_helper.erl defines TOOLS")
        .0;
    table
        .split("},")
        .filter_map(|entry| {
            let (name, target) = entry.split_once("=>")?;
            Some((
                name.trim().to_string(),
                target.trim().trim_end_matches('}').to_string(),
            ))
        })
        .collect()
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `needle` in `text` with no word character before it.
fn starts_word(text: &str, needle: &str) -> bool {
    text.match_indices(needle)
        .any(|(at, _)| !text[..at].chars().next_back().is_some_and(is_word_char))
}

/// A Rust file's code: no comments, no unit tests, no server instructions (prose).
fn rust_code(source: &str) -> String {
    let source = source.split("#[cfg(test)]").next().unwrap_or_default();
    let source = match source.split_once("const INSTRUCTIONS") {
        Some((before, after)) => {
            before.to_string() + after.split_once("\";").map_or("", |(_, rest)| rest)
        }
        None => source.to_string(),
    };
    source
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a source file's code names `tool`.
fn names(path: &Path, source: &str, tool: &str) -> bool {
    if path.extension().is_some_and(|e| e == "rs") {
        // The prose of prompts is not code.
        if path.ends_with("src/mcp/prompts.rs") {
            return false;
        }
        let code = rust_code(source);
        path.ends_with(format!("src/mcp/tools/{tool}.rs"))
            || code.contains(&format!("ToolCall::new(\"{tool}\")"))
            || code.contains(&format!("name = \"{tool}\""))
            || code.contains(&format!("\"{tool}\" =>"))
            || code.contains(&format!("\"{tool}\" |"))
            || code.contains(&format!("mod {tool};"))
            || starts_word(&code, &format!("{tool}_router"))
            || starts_word(&code, &format!("tools::{tool}"))
    } else {
        starts_word(source, &format!("{tool} => {{os_sup_"))
            || source
                .split("-export([")
                .skip(1)
                .filter_map(|rest| rest.split_once("])").map(|(list, _)| list))
                .any(|list| list.split(',').any(|f| f.trim() == format!("{tool}/1")))
    }
}

#[test]
fn every_tool_lives_in_at_most_five_source_files() {
    let mut sources = Vec::new();
    files(&root().join("src"), &["rs"], &mut sources);
    files(&root().join("erlang"), &["erl", "hrl"], &mut sources);
    let texts: Vec<(PathBuf, String)> = sources
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect();
    let tools = tools();
    assert!(tools.len() >= 25, "found the tools: {tools:?}");
    let mut too_many = Vec::new();
    for tool in &tools {
        let homes: Vec<String> = texts
            .iter()
            .filter(|(path, text)| names(path, text, tool))
            .map(|(path, _)| path.strip_prefix(root()).unwrap().display().to_string())
            .filter(|file| !CONSUMERS.contains(&(tool.as_str(), file.as_str())))
            .collect();
        eprintln!("{tool}: {} {homes:?}", homes.len());
        if homes.len() > MAX_FILES {
            too_many.push(format!("{tool}: {homes:?}"));
        }
    }
    assert!(
        too_many.is_empty(),
        "a tool lives in its slice, its Erlang module, one line of each table and its test \
         (docs/ARCHITECTURE.md, \"Adding a tool\"); these are named in more than \
         {MAX_FILES} files:\n{}",
        too_many.join("\n")
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
                "{} exports {export}: tools are found through os_sup_helper's TOOLS only",
                module.display()
            );
        }
    }
    let table = helper_table();
    assert!(table.len() >= 20, "{table:?}");
    // Every entry names an exported function of its module.
    for (tool, target) in &table {
        let (module, function) = target
            .trim_start_matches('{')
            .split_once(',')
            .unwrap_or_else(|| panic!("{tool} => {target}"));
        let source = std::fs::read_to_string(root().join(format!("erlang/{}.erl", module.trim())))
            .unwrap_or_else(|_| panic!("{tool}: no module {module}"));
        assert!(
            names(Path::new("x.erl"), &source, function.trim()),
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
    let tools = tools();
    for path in sources {
        // (The dashboard's own actions, `POST /api/nodes/{name}/start`, are words of its API.)
        let source = rust_code(&std::fs::read_to_string(&path).unwrap());
        for tool in &tools {
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
