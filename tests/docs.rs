//! `docs/ARCHITECTURE.md` stays true: its module list names every file under `src/` and
//! `erlang/`, every file it names exists, and each line quotes the whole first sentence of its
//! file's module doc.
//!
//! The README stays short and true for users: under 15,000 bytes, starting with what a user
//! does, with the tool table the server's own tool list makes (one row per tool: its toolset,
//! read-only mark and description, written by `OS_SUP_WRITE_DOCS=1 cargo test --test docs`)
//! and the defaults `--help` prints; CONTRIBUTING.md opens with where to change what and a map
//! of the code, whose paths exist, and names every script and fixture; the walk of one call is
//! told once; the links of every doc resolve. (`docs/tools.md` says more of a tool than its
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

/// The `## Modules` list: file → the text after its name.
fn listed() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let section = doc
        .split("\n## Modules\n")
        .nth(1)
        .expect("docs/ARCHITECTURE.md has a `## Modules` section");
    section
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| {
            let (file, rest) = l.split_once('`')?;
            Some((
                file.to_string(),
                rest.strip_prefix(": ").unwrap_or(rest).to_string(),
            ))
        })
        .collect()
}

/// The first paragraph of a file's module doc, its lines joined by spaces: a Rust file's
/// leading `//!` lines; an Erlang module's `@doc` up to its first blank line, list or heading
/// (EDoc's `` `code' `` quoting written as Markdown's `` `code` ``); a header's first comment.
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
    let text = lines.join(" ");
    if path.ends_with(".erl") {
        edoc_quotes_as_markdown(&text)
    } else {
        text
    }
}

/// `` `name' `` (EDoc) as `` `name` `` (Markdown).
fn edoc_quotes_as_markdown(text: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in text.chars() {
        match c {
            '`' => {
                in_code = true;
                out.push(c);
            }
            '\'' if in_code => {
                in_code = false;
                out.push('`');
            }
            _ => out.push(c),
        }
    }
    out
}

/// The first sentence of `text`: up to the first period that ends a sentence, one followed by
/// whitespace or the end, outside a `` `code` `` span, and not that of `e.g.` or `i.e.` (a
/// period inside a name, `os_sup_mcp.serve` or `priv/*.beam`, is followed by no space).
fn first_sentence(text: &str) -> &str {
    let mut in_code = false;
    for (at, c) in text.char_indices() {
        match c {
            '`' => in_code = !in_code,
            '.' if !in_code => {
                let after = &text[at + 1..];
                let before = &text[..at];
                let ends = after.is_empty() || after.starts_with(char::is_whitespace);
                let abbreviation = before.ends_with("e.g") || before.ends_with("i.e");
                if ends && !abbreviation {
                    return &text[..=at];
                }
            }
            _ => {}
        }
    }
    text
}

#[test]
fn the_module_list_names_every_module_and_only_those() {
    let listed: BTreeSet<String> = listed().into_keys().collect();
    let present = modules();
    let missing: Vec<_> = present.difference(&listed).collect();
    let gone: Vec<_> = listed.difference(&present).collect();
    assert!(
        missing.is_empty() && gone.is_empty(),
        "docs/ARCHITECTURE.md `## Modules`: add {missing:?} (one line each, the first sentence \
         of its module doc); remove {gone:?}; `OS_SUP_WRITE_DOCS=1 cargo test --test docs` \
         writes the list anew"
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

/// The `## Modules` list as it should read: one line per module file, `src/` then `erlang/`,
/// each the first sentence of its module doc.
fn module_list() -> (Vec<String>, Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut rust, mut erlang) = (Vec::new(), Vec::new());
    for path in modules() {
        let source = std::fs::read_to_string(root.join(&path)).unwrap();
        let line = format!(
            "- `{path}`: {}",
            first_sentence(&module_doc(&path, &source))
        );
        if path.starts_with("src/") {
            rust.push(line);
        } else {
            erlang.push(line);
        }
    }
    (rust, erlang)
}

/// `OS_SUP_WRITE_DOCS=1 cargo test --test docs` writes the module list of
/// docs/ARCHITECTURE.md anew from the module docs (the two lists under their headings).
#[test]
fn the_module_list_is_written_on_request() {
    if std::env::var("OS_SUP_WRITE_DOCS").as_deref() != Ok("1") {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("docs/ARCHITECTURE.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (rust, erlang) = module_list();
    let mut out = Vec::new();
    let mut skipping = false;
    for line in doc.lines() {
        if line.starts_with("### Rust") || line.starts_with("### Erlang") {
            out.push(line.to_string());
            out.push(String::new());
            out.extend(
                if line.starts_with("### Rust") {
                    &rust
                } else {
                    &erlang
                }
                .iter()
                .cloned(),
            );
            skipping = true;
            continue;
        }
        if skipping && (line.starts_with("- `") || line.is_empty()) {
            continue;
        }
        if skipping {
            out.push(String::new());
            skipping = false;
        }
        out.push(line.to_string());
    }
    std::fs::write(&path, out.join("\n") + "\n").unwrap();
}

#[test]
fn the_module_list_quotes_each_first_sentence_whole() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listed = listed();
    let mut wrong = Vec::new();
    for path in modules() {
        let source = std::fs::read_to_string(root.join(&path)).unwrap();
        let doc = module_doc(&path, &source);
        let sentence = first_sentence(&doc);
        assert!(
            !sentence.is_empty(),
            "{path} has no module doc: start it with one that says what it owns"
        );
        if listed.get(&path).is_some_and(|quoted| quoted != sentence) {
            wrong.push(format!("- `{path}`: {sentence}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md `## Modules` does not quote these first sentences (of the module \
         docs) as they are; the lines should read:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_first_sentence_ends_at_a_full_stop_not_at_a_name() {
    assert_eq!(
        first_sentence("Serving: what `os_sup_mcp` does. Checks the policy."),
        "Serving: what `os_sup_mcp` does."
    );
    assert_eq!(
        first_sentence("os_sup_mcp.serve runs it, e.g. from `main.rs`. Then more."),
        "os_sup_mcp.serve runs it, e.g. from `main.rs`."
    );
    assert_eq!(
        first_sentence("Compiles `erlang/*.erl` into priv/*.beam. Committed."),
        "Compiles `erlang/*.erl` into priv/*.beam."
    );
    assert_eq!(first_sentence("No full stop"), "No full stop");
    assert_eq!(
        edoc_quotes_as_markdown("`os_sup_dev''s `recompile'"),
        "`os_sup_dev`'s `recompile`"
    );
}
