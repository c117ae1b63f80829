//! The dependency rules of `src/lib.rs`'s Layout, checked on the source: the MCP layer and the
//! dashboard reach nodes only through `node` (never `helper`, `dist` or raw terms), MCP knows
//! nothing of the dashboard (which reads MCP's activity feed, one way), and the configuration
//! file (`config.rs`) owns its format without importing anything from `mcp`; no text the
//! product rendered is read back into data (`diagnose` first, the whole product by four marks).

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
    found.extend(rendered_text_read_back(root));
    assert!(
        found.is_empty(),
        "text the product rendered is read back as data (carry the fact typed, a bool, an \
         enum, a struct, from where it is known to where it is used; render it once, at the \
         edge):\n{}",
        found.join("\n")
    );
    assert!(files.len() >= 6, "the diagnose files moved: {files:?}");
}

/// Text written for a reader tested as data anywhere in the product (#56), by four marks:
///
/// 1. Rust: a string test (`contains`, `starts_with`, `strip_prefix`, `split`…) on a field
///    that holds rendered text (`x.text`, `x.line`, `x.status`, `x.next`, `x.reason`,
///    `x.origin`, `x.why`) or on a variable of those names but the generic `text` and `line`
///    (most of those hold what a child printed or a file of the OS said, which is fine to
///    read). It caught a log line's `text.starts_with(FIRST_TO_DIE)`, a cluster member's
///    `status.starts_with("ok")` and a module's `origin.starts_with("memory")`.
/// 2. Rust: a next call written by hand as text (`"status {{\"name\":…"`) instead of a typed
///    `Next` written by `call_text` / `call_json`: what reads it next has only text.
/// 3. A text constant of the helper (`-define(NAME, <<"some text">>)`) that the Rust code
///    holds too: the two sides agree on a rendering, so one reads what the other wrote (the
///    `first to die` prefix was one).
/// 4. Erlang: `string:find`/`string:prefix`/`binary:match`/`re:run`… on a value named as a
///    rendering (`Why`, `Reason`, `Line`, `Piled`, `Status`, `Next`, `Message`): a crash
///    reason split at its `" at "`, a finding's line stripped of its `"leak: "`.
///
/// Test code (from `#[cfg(test)]` on) and comments are not looked at. Not caught: a reading
/// under another name; the check is a tripwire, not a proof.
fn rendered_text_read_back(root: &Path) -> Vec<String> {
    // TODO(#56 finding record): diagnose/ joins this check when its finding record lands
    let excluded_rust = ["src/node/diagnose/"];
    let excluded_erlang = [
        "os_sup_diagnose_leaks.erl",
        "os_sup_diagnose.erl",
        "os_sup_diagnose_logs.erl",
    ];
    // What is left, each with why (keep this short).
    let allowed: [(&str, &str); 4] = [
        // An HTTP request's `Origin` header: input from outside, not a rendering of ours.
        ("src/mcp/http.rs", "origin.strip_prefix("),
        // TODO(#56): a failed start's reason says whether the node exited (the boot's own
        // exit, or `wait_ready`'s "the node exited while waiting") only in its text; carry it
        // as a typed error of `wait_ready`.
        ("src/node/supervisor/mod.rs", "reason.contains(\"exited\")"),
        // The contention finding takes over a leak's line as the node's finding renders it
        // (`piled`, the leak's whole line): the leak carries no other form of it until the
        // finding record lands.
        ("os_sup_diagnose_crashes.erl", "string:prefix(Piled"),
        // An exit reason with no frame in the application (a term the node rendered, as
        // `{:timeout, {GenServer, :call, ...}}`) names the child's function only in its text.
        ("os_sup_diagnose_crashes.erl", "re:run(Message"),
    ];
    let methods = "contains|starts_with|ends_with|split|split_once|rsplit_once|find|rfind|\
                   strip_prefix|strip_suffix|matches";
    let on_field = regex::Regex::new(&format!(
        r"\.(text|line|status|next|reason|origin|why)\s*\.\s*({methods})\("
    ))
    .unwrap();
    let on_variable = regex::Regex::new(&format!(
        r"(^|[^.\w])(status|next|reason|origin|why)\s*\.\s*({methods})\("
    ))
    .unwrap();
    let next_by_hand = regex::Regex::new(r#""[a-z_]+ \{\{\\"name\\""#).unwrap();
    let erlang_reads = regex::Regex::new(
        r"(string:(find|prefix|split|str)|binary:(match|matches|split)|re:run)\((Why|Reason|Line|Piled|Status|Next|Message)\b",
    )
    .unwrap();
    let erlang_text = regex::Regex::new(r#"^-define\(\w+,\s*<<"([^"]{8,})">>\)"#).unwrap();

    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let rust: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            let shown = f.strip_prefix(root).unwrap().display().to_string();
            let source = std::fs::read_to_string(f).unwrap();
            let code = source.split("#[cfg(test)]").next().unwrap().to_string();
            (shown, code)
        })
        .filter(|(f, _)| !excluded_rust.iter().any(|e| f.starts_with(e)))
        .collect();
    let mut found = Vec::new();
    for (file, code) in &rust {
        for (n, line) in code.lines().enumerate() {
            let line = line.trim();
            if line.starts_with("//") {
                continue;
            }
            let allowed = allowed
                .iter()
                .any(|(f, what)| file == f && line.contains(what));
            if !allowed
                && (on_field.is_match(line)
                    || on_variable.is_match(line)
                    || next_by_hand.is_match(line))
            {
                found.push(format!("{file}:{}: {line}", n + 1));
            }
        }
    }
    for entry in std::fs::read_dir(root.join("erlang")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with(".erl") || excluded_erlang.contains(&name.as_str()) {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        for (n, line) in source.lines().enumerate() {
            let line = line.trim();
            if line.starts_with('%') {
                continue;
            }
            let allowed = allowed
                .iter()
                .any(|(file, what)| *file == name && line.contains(what));
            if erlang_reads.is_match(line) && !allowed {
                found.push(format!("erlang/{name}:{}: {line}", n + 1));
            }
            if let Some(text) = erlang_text.captures(line).map(|c| c[1].to_string()) {
                for (file, code) in &rust {
                    if code.contains(&format!("\"{text}")) {
                        found.push(format!(
                            "erlang/{name}:{} and {file}: both hold \"{text}\"",
                            n + 1
                        ));
                    }
                }
            }
        }
    }
    found
}
