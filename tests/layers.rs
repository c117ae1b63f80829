//! The dependency rules of `src/lib.rs`'s Layout, checked on the source: the MCP layer and the
//! dashboard reach nodes only through `node` (never `helper`, `dist` or raw terms), MCP knows
//! nothing of the dashboard (which reads MCP's activity feed, one way), and the configuration
//! file (`config.rs`) owns its format without importing anything from `mcp`; `diagnose` reads no
//! text back into data.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Lines of `file` that name one of `modules` as `crate::<module>` (or inside a
/// `crate::{…}` group on that line).
fn uses(file: &Path, modules: &[&str]) -> Vec<String> {
    let source = std::fs::read_to_string(file).unwrap();
    source
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            let group = line.split_once("crate::{").map(|(_, rest)| rest);
            modules.iter().any(|m| {
                let in_group = group.is_some_and(|g| {
                    g.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .any(|word| word == *m)
                });
                let needle = format!("crate::{m}");
                in_group
                    || line.match_indices(&needle).any(|(at, _)| {
                        let next = line[at + needle.len()..].chars().next();
                        !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    })
            })
        })
        .map(|(n, line)| format!("{}:{}: {}", file.display(), n + 1, line.trim()))
        .collect()
}

/// Lines of the Rust files under `src/<dir>` that name one of `modules`; panics if there are
/// fewer than `at_least` files (the directory moved).
fn uses_under(dir: &str, modules: &[&str], at_least: usize) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src").join(dir), &mut files);
    assert!(files.len() >= at_least, "found the files of src/{dir}");
    files.iter().flat_map(|f| uses(f, modules)).collect()
}

#[test]
fn mcp_reaches_nodes_only_through_node() {
    let offending = uses_under("mcp", &["helper", "dist", "term"], 10);
    assert!(
        offending.is_empty(),
        "src/mcp must use `crate::node` (which re-exports what tools need), not helper, dist \
         or term:\n{}",
        offending.join("\n")
    );
}

#[test]
fn the_dashboard_reaches_nodes_only_through_node() {
    let offending = uses_under("dashboard", &["helper", "dist", "term"], 1);
    assert!(
        offending.is_empty(),
        "src/dashboard must use `crate::node` (the same calls as the tools), not helper, dist \
         or term:\n{}",
        offending.join("\n")
    );
    let backwards = uses_under("mcp", &["dashboard"], 10);
    assert!(
        backwards.is_empty(),
        "src/mcp must not use the dashboard (serve.rs wires it in):\n{}",
        backwards.join("\n")
    );
}

#[test]
fn config_imports_nothing_from_mcp() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let offending = uses(&root.join("src/config.rs"), &["mcp"]);
    assert!(
        offending.is_empty(),
        "src/config.rs owns its format (node::StartSpec); it must not import mcp:\n{}",
        offending.join("\n")
    );
}

/// `diagnose` is typed end to end (`src/node/diagnose/`): the node's reply is decoded once, a
/// pid stays a pid until printed, and no text is read back into data — in Rust (no JSON
/// re-read, no line parsed) nor on the node (no pid rendered and parsed back).
#[test]
fn diagnose_never_reads_text_back_into_data() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src/node/diagnose"), &mut files);
    files.push(root.join("src/mcp/tools/diagnose.rs"));
    files.push(root.join("src/mcp/cluster_diagnose.rs"));
    let rust_reads = [
        "from_value",
        "from_str",
        "lines().next()",
        "split_once",
        "parse::<",
        "[\"line\"]",
        "[\"findings\"]",
        "[\"pid\"]",
    ];
    let mut found = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        for (n, line) in source.lines().enumerate() {
            if rust_reads.iter().any(|r| line.contains(r)) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    for entry in std::fs::read_dir(root.join("erlang")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.starts_with("os_sup_diagnose") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        for (n, line) in source.lines().enumerate() {
            if ["parse_pid", "list_to_pid"]
                .iter()
                .any(|r| line.contains(r))
            {
                found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "diagnose reads text back into data (keep the value typed until it is printed):\n{}",
        found.join("\n")
    );
    assert!(files.len() >= 6, "the diagnose files moved: {files:?}");
}
