//! The docs stay true, and each thing is said once.
//!
//! The README stays short and true for users: under 15,000 bytes, starting with what a user
//! does, with the tool table the server's own tool list makes (one row per tool: its toolset,
//! read-only mark and description) and the defaults `--help` prints. CONTRIBUTING.md opens
//! with where to change what and a map of the code, whose paths exist and whose layout of
//! `erlang/` lists every helper module; it names every script and fixture. The walk of one
//! call is told once; the links of every doc resolve; every path, helper module and Rust name
//! a doc gives in backticks is one the code has; every module starts with its doc.
//! `OS_SUP_WRITE_DOCS=1 cargo test --test docs` writes what is generated: the README's tool
//! table and CONTRIBUTING's layout of `erlang/`. (`docs/tools.md` says more of a tool than its
//! row only when there is more to say: it is not one of a new tool's places.)

mod common;

use common::StdioServer;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

fn files(dir: &Path, ends: &[&str], out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, ends, out);
        } else if ends.iter().any(|e| path.to_string_lossy().ends_with(e)) {
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            out.insert(path.strip_prefix(root).unwrap().display().to_string());
        }
    }
}

/// Every module file: `src/**/*.rs`, `erlang/*.erl` and `erlang/*.hrl`.
fn modules() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut present = BTreeSet::new();
    files(&root.join("src"), &[".rs"], &mut present);
    files(&root.join("erlang"), &[".erl", ".hrl"], &mut present);
    present
}

/// The first paragraph of a file's module doc, its lines joined by spaces: a Rust file's
/// leading `//!` lines; an Erlang module's `@doc` up to its first blank line, list or heading;
/// a header's first comment.
fn module_doc(path: &str, source: &str) -> String {
    let lines: Vec<&str> = if path.ends_with(".rs") {
        source
            .lines()
            .map_while(|l| l.strip_prefix("//!"))
            .map(str::trim)
            .skip_while(|l| l.is_empty())
            .take_while(|l| !l.is_empty())
            .collect()
    } else if path.ends_with(".erl") {
        source
            .lines()
            .skip_while(|l| !l.contains("@doc"))
            .map(|l| l.trim_start_matches('%').trim())
            .map(|l| l.strip_prefix("@doc").unwrap_or(l).trim())
            .take_while(|l| !l.is_empty() && !l.starts_with('<') && !l.starts_with("=="))
            .collect()
    } else {
        source
            .lines()
            .map_while(|l| l.strip_prefix('%'))
            .map(|l| l.trim_start_matches('%').trim())
            .collect()
    };
    lines.join(" ")
}

/// Every module starts with a doc that says what it owns: a reader of `src/` or `erlang/`
/// opens the file and reads its first sentence (no list in the docs repeats them).
#[test]
fn every_module_starts_with_a_doc() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let undocumented: Vec<String> = modules()
        .into_iter()
        .filter(|path| {
            let source = std::fs::read_to_string(root.join(path)).unwrap();
            module_doc(path, &source).trim().is_empty()
        })
        .collect();
    assert!(
        undocumented.is_empty(),
        "start these with a module doc that says what they own: {undocumented:?}"
    );
}

/// The helper's groups (`os_sup_<group>_<part>`), in the order CONTRIBUTING's map lists them,
/// each with what it is for: the one layout of `erlang/`. A module's group is its name's
/// first word after `os_sup_`.
const ERLANG_GROUPS: &[(&str, &str)] = &[
    ("helper", "boot, the protocol and the table of tools (`os_sup_helper_tools`), the `status` reply, the boot announcements, what the helper's own work makes"),
    ("eval", "`eval` (evaluation, captured output, the processes an eval left behind)"),
    ("lib", "what the others share, the only modules another may `-import` (a tool's reply and guard, arguments, a process from what an agent typed, labels, calls under a deadline, rendering, text, time, ranking)"),
    ("proc", "processes (`processes`, `process_info` with a mailbox by shape, origin and profile, `get_state`, `supervision_tree`, which processes run OTP loops, the walks that count them in groups)"),
    ("node", "the node as a whole (`applications`, `system_info`, `ets`, `ports`, timers, the vital signs sampled every 2 s)"),
    ("diagnose", "`diagnose`, the report (`os_sup_diagnose`) and one module per kind of finding or evidence (what each checks: docs/tools.md)"),
    ("waits", "`waits` (who waits on whom, deadlocks)"),
    ("trace", "`trace`, `trace_messages`, `trace_results`, `system_monitor` (sessions and their tracers)"),
    ("log", "the node's log (the `logger` handler and its keeper, one event's line, counts and volume for health, what died first in a cascade: the Erlang half of the log fold)"),
    ("code", "`docs`, `source`, `callers`, `find`, and which send a `receive` waits for, over what `.beam` files say; who loaded code from memory"),
    ("dev", "`recompile` (compile apart, load, watch the application survive)"),
    ("cluster", "a cluster's member (its peers, what it holds that they should too)"),
    ("boot", "the first module a node loads (`erlang/boot/`), which picks the set of beams for its release"),
    ("bounds", "the ranges of `src/bounds.rs`, written by `build.rs` (never edit)"),
];

/// The layout of `erlang/` as CONTRIBUTING's map says it: one line per group of
/// [`ERLANG_GROUPS`], naming its modules.
fn erlang_layout() -> String {
    let mut by_group: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for path in modules().iter().filter(|p| p.starts_with("erlang/")) {
        let file = path.rsplit('/').next().unwrap();
        let name = file.trim_end_matches(".erl");
        let rest = name.strip_prefix("os_sup_").unwrap_or(name);
        let group = rest.split(['_', '.']).next().unwrap();
        let (known, _) = ERLANG_GROUPS
            .iter()
            .find(|(g, _)| *g == group)
            .unwrap_or_else(|| panic!("{path}: add its group `{group}` to ERLANG_GROUPS"));
        by_group.entry(known).or_default().push(format!("`{name}`"));
    }
    ERLANG_GROUPS
        .iter()
        .filter_map(|(group, what)| {
            let modules = by_group.get(group)?;
            Some(format!("- **{group}**, {what}: {}.\n", modules.join(", ")))
        })
        .collect()
}

/// CONTRIBUTING's map lists every module of `erlang/` in its group (written by
/// `OS_SUP_WRITE_DOCS=1 cargo test --test docs`, never by hand).
#[test]
fn contributing_lays_out_every_helper_module() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("CONTRIBUTING.md");
    let contributing = read("CONTRIBUTING.md");
    let marker =
        "<!-- The layout of erlang/: written by OS_SUP_WRITE_DOCS=1 cargo test --test docs \
                  from ERLANG_GROUPS in tests/docs.rs. -->\n";
    let (before, rest) = contributing
        .split_once(marker)
        .expect("CONTRIBUTING.md's map has the layout of erlang/");
    let end: usize = rest
        .split_inclusive('\n')
        .take_while(|l| l.starts_with("- "))
        .map(str::len)
        .sum();
    let (found, after) = (&rest[..end], &rest[end..]);
    let wanted = erlang_layout();
    if std::env::var("OS_SUP_WRITE_DOCS").as_deref() == Ok("1") {
        std::fs::write(&path, format!("{before}{marker}{wanted}{after}")).unwrap();
        return;
    }
    assert!(
        found == wanted,
        "CONTRIBUTING.md's layout of erlang/ is not the modules there: run \
         `OS_SUP_WRITE_DOCS=1 cargo test --test docs` to write it. It should read:\n{wanted}"
    );
}

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The README's budget: a user reads it in one sitting; depth goes to docs/tools.md.
const README_BYTES: usize = 15_000;

#[test]
fn the_readme_is_short_and_starts_with_what_a_user_does() {
    let readme = read("README.md");
    assert!(
        readme.len() <= README_BYTES,
        "README.md is {} bytes, over {README_BYTES}: move depth to docs/tools.md",
        readme.len()
    );
    let sections: Vec<&str> = readme.lines().filter(|l| l.starts_with("## ")).collect();
    assert_eq!(
        sections.first(),
        Some(&"## Install"),
        "the README starts with installing: {sections:?}"
    );
    // The two commands: the example project, and the whole suite that CI runs.
    for command in ["scripts/run.sh     # ", "scripts/test.sh    # "] {
        assert!(readme.contains(command), "README.md lost `{command}`");
    }
    // CI runs the README's command, then the newest toolchain in full and the middle one's
    // tests that start nodes (CONTRIBUTING, "Erlang and Elixir releases").
    let ci = read(".ci/run");
    for line in [
        "\nscripts/test.sh\n",
        "\nscripts/test.sh --toolchain sid\n",
        "\nscripts/test.sh --toolchain trixie --nodes\n",
    ] {
        assert!(ci.contains(line), ".ci/run lost `{}`", line.trim());
    }
}

/// The tools a server started with `args` lists (`tools/list`), asked over stdio (no node is
/// started).
fn listed_tools(args: &[&str]) -> Vec<serde_json::Value> {
    let state = common::private_dir();
    let state_dir = ["--state-dir", state.path().to_str().unwrap()];
    let mut server = StdioServer::start(&[&state_dir, args].concat());
    server.send_initialize();
    server.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = server.reply(2);
    list["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The names of the tools a server started with `args` offers.
fn offered(args: &[&str]) -> BTreeSet<String> {
    listed_tools(args)
        .iter()
        .filter_map(|tool| Some(tool["name"].as_str()?.to_string()))
        .collect()
}

/// The README's tool table as the server has it: one row per tool it serves, by toolset
/// (`core` first, in the order of `--help`'s sets) and by name within one, with its set, ✓ when
/// `--read-only` offers it, and its description as an agent reads it in `tools/list`.
fn tool_table() -> String {
    let sets = ["core", "introspect", "trace", "dev", "code"];
    let core = offered(&["--tools", "core"]);
    let read_only = offered(&["--read-only"]);
    let mut set_of: BTreeMap<String, &str> = core.iter().map(|t| (t.clone(), "core")).collect();
    for set in &sets[1..] {
        for tool in offered(&["--tools", set]).difference(&core) {
            assert!(
                set_of.insert(tool.clone(), set).is_none(),
                "{tool} is in two sets"
            );
        }
    }
    let mut rows: Vec<(usize, String, String)> = listed_tools(&[])
        .iter()
        .map(|tool| {
            let name = tool["name"].as_str().unwrap().to_string();
            let set = set_of
                .get(&name)
                .unwrap_or_else(|| panic!("{name} is in no set"));
            let mark = if read_only.contains(&name) { "✓" } else { "" };
            let what = tool["description"].as_str().unwrap_or_default();
            let row = format!(
                "| `{name}` | {set} | {mark} | {} |",
                what.replace('|', "\\|")
            );
            (sets.iter().position(|s| s == set).unwrap(), name, row)
        })
        .collect();
    rows.sort();
    let mut table = String::from("| tool | set | read-only | what it does |\n|---|---|---|---|\n");
    for (_, _, row) in rows {
        table += &row;
        table.push('\n');
    }
    table
}

/// The README's tool table is the tools the server serves (written by
/// `OS_SUP_WRITE_DOCS=1 cargo test --test docs`, never by hand).
#[test]
fn the_readme_tool_table_is_the_servers_tool_list() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = read("README.md");
    let head = "| tool | set | read-only | what it does |";
    let (before, rest) = readme
        .split_once(head)
        .expect("README.md has the tool table");
    let end = rest.find("\n\n").map_or(rest.len(), |at| at + 1);
    let (found, after) = (format!("{head}{}", &rest[..end]), &rest[end..]);
    let wanted = tool_table();
    if std::env::var("OS_SUP_WRITE_DOCS").as_deref() == Ok("1") {
        std::fs::write(&path, format!("{before}{wanted}{after}")).unwrap();
        return;
    }
    assert!(
        found == wanted,
        "README.md's tool table is not the tools the server serves: run \
         `OS_SUP_WRITE_DOCS=1 cargo test --test docs` to write it. It should read:\n{wanted}"
    );
}

#[test]
fn the_readme_limits_are_the_defaults_help_prints() {
    let help = Command::new(env!("CARGO_BIN_EXE_os_sup_mcp"))
        .arg("--help")
        .output()
        .expect("run --help");
    let help = String::from_utf8_lossy(&help.stdout);
    let readme = read("README.md");
    for flag in [
        "--max-nodes",
        "--max-sessions",
        "--max-evals",
        "--log-lines",
        "--log-bytes",
    ] {
        let default = help
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{flag} <")))
            .and_then(|l| l.split("[default: ").nth(1))
            .and_then(|d| d.split(']').next())
            .unwrap_or_else(|| panic!("--help shows {flag}'s default:\n{help}"));
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{flag}`")))
            .unwrap_or_else(|| panic!("README.md's limits table has a row for {flag}"));
        let value = row
            .trim_end_matches('|')
            .rsplit('|')
            .next()
            .unwrap_or("")
            .trim();
        assert!(
            value == default || value.starts_with(&format!("{default} ")),
            "README.md says {flag} is {value:?}; --help says {default}"
        );
    }
}

#[test]
fn contributing_names_every_script_and_fixture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let contributing = read("CONTRIBUTING.md");
    let names = |dir: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    for script in names("scripts") {
        let named = format!("`scripts/{script}");
        assert!(
            contributing.contains(&named),
            "CONTRIBUTING.md: say what {named}` is for"
        );
    }
    let fixtures = contributing
        .split("\n## Fixtures\n")
        .nth(1)
        .expect("CONTRIBUTING.md has a `## Fixtures` section");
    let fixtures = fixtures.split("\n## ").next().unwrap_or_default();
    for fixture in names("tests/fixtures") {
        assert!(
            fixtures.contains(&format!("- `{fixture}`")),
            "CONTRIBUTING.md, Fixtures: say what tests/fixtures/{fixture} is for"
        );
    }
}

/// GitHub's anchor for a heading: lower case, spaces as `-`, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The docs whose links are checked, and whose structure the tests below keep.
const DOCS: &[&str] = &[
    "README.md",
    "CONTRIBUTING.md",
    "docs/tools.md",
    "docs/ARCHITECTURE.md",
];

#[test]
fn the_links_of_the_docs_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    for doc in DOCS {
        let text = read(doc);
        let dir = Path::new(doc).parent().unwrap();
        for found in link.captures_iter(&text) {
            let target = &found[1];
            // (A module doc quoted in the module list links Rust items: `crate::node::Registry`.)
            let web = target.starts_with("http://") || target.starts_with("https://");
            if web || target.contains("::") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let file = if path.is_empty() {
                Path::new(doc).to_path_buf()
            } else {
                dir.join(path)
            };
            assert!(root.join(&file).exists(), "{doc}: link to missing {target}");
            if !fragment.is_empty() {
                let anchors: BTreeSet<String> = std::fs::read_to_string(root.join(&file))
                    .unwrap()
                    .lines()
                    .filter_map(|l| l.strip_prefix('#'))
                    .map(|l| anchor(l.trim_start_matches('#')))
                    .collect();
                assert!(
                    anchors.contains(fragment),
                    "{doc}: link to {target}, but {} has no such heading",
                    file.display()
                );
            }
        }
    }
}

/// The docs are sorted by who reads them: the README sends a user to `docs/tools.md` for each
/// tool; CONTRIBUTING.md opens with where to change what and a map of the code; the walk of
/// one call is told once, in docs/ARCHITECTURE.md, and the others point to it.
#[test]
fn each_doc_serves_its_reader() {
    let readme = read("README.md");
    assert!(
        readme.contains("](docs/tools.md#tools)"),
        "README.md sends users to docs/tools.md for each tool"
    );
    let contributing = read("CONTRIBUTING.md");
    let sections: Vec<&str> = contributing
        .lines()
        .filter(|l| l.starts_with("## "))
        .take(2)
        .collect();
    assert_eq!(
        sections,
        ["## Where to change what", "## Map of the code"],
        "CONTRIBUTING.md opens with where to change what, then the map of the code"
    );
    let walk = "## Walk of one call";
    assert!(read("docs/ARCHITECTURE.md").contains(walk));
    let lib = read("src/lib.rs");
    for (file, text) in [("src/lib.rs", &lib), ("CONTRIBUTING.md", &contributing)] {
        assert!(
            text.contains("Walk") && text.contains("docs/ARCHITECTURE.md"),
            "{file} points to docs/ARCHITECTURE.md's walk of one call"
        );
        assert!(
            !text.contains("transport.rs` (or"),
            "{file} walks a call itself: point to docs/ARCHITECTURE.md's instead"
        );
    }
}

/// Every path CONTRIBUTING.md's opening tables and map name exists (a `<tool>`, `*` or `…`
/// in one is a pattern, not checked).
#[test]
fn the_paths_contributing_names_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let contributing = read("CONTRIBUTING.md");
    let opening = contributing
        .split("\n## Build\n")
        .next()
        .expect("CONTRIBUTING.md has `## Build`");
    let code = regex::Regex::new(r"`([^`\s]+)`").unwrap();
    let mut checked = 0;
    for found in code.captures_iter(opening) {
        let path = &found[1];
        let rooted = ["src/", "erlang/", "tests/", "scripts/", "docs/", "priv/"]
            .iter()
            .any(|dir| path.starts_with(dir));
        if !rooted || path.contains(['<', '*', '…']) {
            continue;
        }
        assert!(
            root.join(path.trim_end_matches('/')).exists(),
            "CONTRIBUTING.md names {path}, which does not exist"
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} paths found");
}

/// Every word of the code (`[A-Za-z_][A-Za-z0-9_]*`) in `src/`, `erlang/`, `tests/` and
/// `scripts/`, this file left out (it names what the docs must not).
fn code_words() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = BTreeSet::new();
    for dir in ["src", "erlang", "tests", "scripts"] {
        let ends = [
            ".rs", ".erl", ".hrl", ".sh", ".py", ".ex", ".exs", ".js", ".html", ".yml", ".md",
        ];
        files(&root.join(dir), &ends, &mut paths);
    }
    let word = regex::Regex::new(r"[A-Za-z_][A-Za-z0-9_]*").unwrap();
    let mut words = BTreeSet::new();
    for path in paths {
        let skipped = ["/_build/", "/deps/", "/node_modules/"];
        if path == "tests/docs.rs" || skipped.iter().any(|s| path.contains(s)) {
            continue;
        }
        let text = std::fs::read_to_string(root.join(&path)).unwrap_or_default();
        words.extend(word.find_iter(&text).map(|w| w.as_str().to_string()));
    }
    words
}

/// The code a doc names in backticks: `` `src/x.rs` `` (a path under a directory of the
/// repository), `` `os_sup_mod` `` and `` `os_sup_mod:fun/N` `` (the helper's modules),
/// `` `module::Item` `` (a Rust path), and a span that is one `CamelCase` or `snake_case`
/// name (`ToolCall`, `call_tool`, `routers_by_set()`); each with what it must be. Fenced
/// blocks count their words that are paths. A `<tool>`, `*`, `…` or `NN` is a pattern, not a
/// name.
fn named_in(doc: &str) -> Vec<String> {
    let rooted = [
        "src/", "erlang/", "tests/", "scripts/", "docs/", "priv/", ".ci/",
    ];
    let path_word = |w: &str| -> Option<String> {
        let w = w.trim_matches(|c: char| "()[],;:'\"".contains(c));
        let w = w.split(':').next().unwrap_or(w); // `file:line`
        let pattern = w.contains(['<', '*', '…', '{', '$']) || w.contains("NN");
        (rooted.iter().any(|r| w.starts_with(r)) && !pattern).then(|| format!("path {w}"))
    };
    let mut names = Vec::new();
    let mut spans = Vec::new();
    let mut fenced = false;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            names.extend(line.split_whitespace().filter_map(path_word));
        } else {
            spans.push(line);
        }
    }
    let text = spans.join("\n");
    let span = regex::Regex::new(r"`+([^`]+)`+").unwrap();
    let erlang = regex::Regex::new(r"\bos_sup_[a-z0-9_]+(:[a-z_][a-z0-9_]*(/[0-9])?)?").unwrap();
    let rust_path =
        regex::Regex::new(r"\b[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)+").unwrap();
    let camel = regex::Regex::new(r"^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$").unwrap();
    let snake = regex::Regex::new(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?:\(\)|/[0-9])?$").unwrap();
    for found in span.captures_iter(&text) {
        let code = found[1].trim();
        if code.contains(['<', '…']) {
            continue;
        }
        names.extend(code.split_whitespace().filter_map(path_word));
        for m in erlang.find_iter(code) {
            // A bare name inside a longer span may be an atom (`{os_sup_log, …}`).
            let atom = !m.as_str().contains(':') && m.as_str() != code;
            let kind = if atom { "rust" } else { "erlang" };
            names.push(format!("{kind} {}", m.as_str()));
        }
        for m in rust_path.find_iter(code) {
            names.push(format!("rust {}", m.as_str()));
        }
        if camel.is_match(code) || (snake.is_match(code) && !code.starts_with("os_sup_")) {
            names.push(format!("rust {code}"));
        }
    }
    names
}

/// Names the docs may give that no file of the code is, each with why.
const NOT_IN_THE_CODE: &[(&str, &str)] = &[
    // An `os_sup_*` span is a helper module; this one is the crate and its binary.
    (
        "os_sup_mcp",
        "the crate and the binary, not a module of the helper",
    ),
];

/// Every path, helper module (and its function) and Rust name a doc gives in backticks is one
/// the code has: a doc that names `call_tool_typed` after a rename fails here, not in a
/// newcomer's search.
#[test]
fn the_docs_name_only_what_the_code_has() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let words = code_words();
    let mut docs: BTreeSet<String> = ["README.md", "CONTRIBUTING.md"]
        .iter()
        .map(|d| d.to_string())
        .collect();
    files(&root.join("docs"), &[".md"], &mut docs);
    let mut gone = BTreeSet::new();
    for doc in &docs {
        for name in named_in(&read(doc)) {
            let (kind, what) = name.split_once(' ').unwrap();
            if NOT_IN_THE_CODE.iter().any(|(n, _)| *n == what) {
                continue;
            }
            let there = match kind {
                // (An example's output names a fixture's file from the fixture's root.)
                "path" => {
                    let what = what.trim_end_matches('/');
                    root.join(what).exists()
                        || std::fs::read_dir(root.join("tests/fixtures"))
                            .unwrap()
                            .any(|f| f.unwrap().path().join(what).exists())
                }
                "erlang" => {
                    let (module, function) = what.split_once(':').unwrap_or((what, ""));
                    let source = ["erlang/", "erlang/boot/"]
                        .iter()
                        .flat_map(|d| {
                            [".erl", ".hrl"].map(|e| root.join(format!("{d}{module}{e}")))
                        })
                        .find_map(|file| std::fs::read_to_string(file).ok());
                    let function = function.split('/').next().unwrap_or_default();
                    source.is_some_and(|s| {
                        function.is_empty() || s.contains(&format!("\n{function}("))
                    })
                }
                _ => what
                    .trim_end_matches("()")
                    .split(['/', ':'])
                    .filter(|s| !s.is_empty() && !s.chars().all(|c| c.is_ascii_digit()))
                    .all(|segment| words.contains(segment)),
            };
            if !there {
                gone.insert(format!("{doc}: `{what}`"));
            }
        }
    }
    assert!(
        gone.is_empty(),
        "the docs name what the code no longer has (rename it in the doc, or say it without \
         backticks if it is not code):\n{}",
        gone.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn a_doc_names_code_in_backticks_not_prose_tools_keys_or_flags() {
    let doc = "Sent with `call_tool_typed` by `Registry::look` (`ToolCall`), in \
               `src/node/gone.rs`, on the node `os_sup_lib_reply:guarded/2` of \
               `os_sup_helper`; the tool `diagnose`, its key `window_ms` (say `{\"name\": \
               \"web\"}`), `--read-only`, `net_ticktime (60 s)`, a `<tool>` and \
               `priv/otpNN/*.beam`.\n```sh\nscripts/run.sh --stdio   # `not a span`\n```\n";
    assert_eq!(
        named_in(doc),
        [
            "path scripts/run.sh",
            "rust call_tool_typed",
            "rust Registry::look",
            "rust ToolCall",
            "path src/node/gone.rs",
            "erlang os_sup_lib_reply:guarded/2",
            "erlang os_sup_helper",
            "rust window_ms",
        ]
    );
}
