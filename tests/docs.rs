//! `docs/ARCHITECTURE.md` stays true: its module list names every file under `src/` and
//! `erlang/`, every file it names exists, and each line quotes the whole first sentence of its
//! file's module doc.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

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
         of its module doc); remove {gone:?}"
    );
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
