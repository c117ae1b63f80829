//! The dependency rules of `src/lib.rs`'s Layout, checked on the source: the MCP layer and the
//! dashboard reach nodes only through `node` (never `helper`, `dist` or raw terms), MCP knows
//! nothing of the dashboard (which reads MCP's activity feed, one way), and the configuration
//! file (`config.rs`) owns its format without importing anything from `mcp`; no text the
//! product rendered is read back into data (`diagnose` first, the whole product by four marks);
//! no files of `src/` import each other in a circle, and none is over its length (#56).

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
///    rendering (`Why`, `Reason`, `Line`, `Piled`, `Status`, `Next`, `Message`, `Child`): a
///    crash reason split at its `" at "`, a finding's line stripped of its `"leak: "`, a
///    child's module read from its rendered name.
/// 5. Erlang: a split or match at a separator the helper writes in text (`" × "` after a
///    count, `";"` between folded frames): a list entry's count read back from `X × 3`.
/// 6. Rust: a string test for a label the product writes (`"next: "`): the CLI found each
///    `next:` line of an answer to rewrite it.
///
/// Test code (from `#[cfg(test)]` on) and comments are not looked at. Not caught: a reading
/// under another name; the check is a tripwire, not a proof.
fn rendered_text_read_back(root: &Path) -> Vec<String> {
    // What is left, each with why (keep this short).
    let allowed: [(&str, &str); 2] = [
        // An HTTP request's `Origin` header: input from outside, not a rendering of ours.
        ("src/mcp/http.rs", "origin.strip_prefix("),
        // A member's error answer: the node's message only (a helper's error is a kind and a
        // message, no data), so a node it names (`… it lives on c_1@host`) is known only there.
        ("src/mcp/fanout.rs", "a.text.contains(node"),
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
        r"(string:(find|prefix|split|str)|binary:(match|matches|split)|re:run)\((Why|Reason|Line|Piled|Status|Next|Message|Child)\b",
    )
    .unwrap();
    let erlang_separator = regex::Regex::new(
        r#"(string:(find|split)|binary:(match|matches|split))\([^()]*,\s*<<"( × |;)"(/utf8)?>>"#,
    )
    .unwrap();
    let label_read = regex::Regex::new(&format!(r#"\.({methods})\("next: "#)).unwrap();
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
                    || next_by_hand.is_match(line)
                    || label_read.is_match(line))
            {
                found.push(format!("{file}:{}: {line}", n + 1));
            }
        }
    }
    for entry in std::fs::read_dir(root.join("erlang")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with(".erl") {
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
            if (erlang_reads.is_match(line) || erlang_separator.is_match(line)) && !allowed {
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

/// A token of Rust source, comments left out: what the import graph needs to see.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    PathSep,
    Punct(char),
}

/// Whether the char before `i` continues an identifier (so `chars[i]` does not start a token).
fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// The length of the prefix of a raw or byte string starting at `i` (`r"`, `r#"`, `b"`,
/// `br#"`…), if one starts there.
fn string_prefix(chars: &[char], i: usize) -> Option<usize> {
    if ident_before(chars, i) {
        return None;
    }
    ["br", "cr", "r", "b", "c"].iter().find_map(|prefix| {
        let n = prefix.len();
        let matches = prefix
            .chars()
            .enumerate()
            .all(|(k, p)| chars.get(i + k) == Some(&p));
        let raw = prefix.contains('r');
        let hashes = if raw {
            chars[i + n..].iter().take_while(|&&h| h == '#').count()
        } else {
            0
        };
        (matches && chars.get(i + n + hashes) == Some(&'"')).then_some(n)
    })
}

/// The tokens of `source`, each with its line; comments, char literals and lifetimes dropped,
/// so that a path in a comment or a string is not taken for an import.
fn tokens(source: &str) -> Vec<(Token, usize)> {
    let chars: Vec<char> = source.chars().collect();
    let (mut out, mut i, mut line) = (Vec::new(), 0, 1);
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if at(i) == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == '"' || string_prefix(&chars, i).is_some() {
            // A string, raw string or byte string: read to its end.
            let prefix = string_prefix(&chars, i).unwrap_or(0);
            let raw = chars[i..i + prefix].contains(&'r');
            let mut j = i + prefix;
            let hashes = chars[j..].iter().take_while(|&&h| h == '#').count();
            j += hashes + 1;
            let start_line = line;
            let mut text = String::new();
            loop {
                let d = at(j);
                if d == '\0' {
                    break;
                }
                if !raw && d == '\\' {
                    text.push(d);
                    text.push(at(j + 1));
                    j += 2;
                    continue;
                }
                if d == '"' && (0..hashes).all(|h| at(j + 1 + h) == '#') {
                    j += 1 + hashes;
                    break;
                }
                if d == '\n' {
                    line += 1;
                }
                text.push(d);
                j += 1;
            }
            out.push((Token::Str(text), start_line));
            i = j;
        } else if c == 'b' && at(i + 1) == '\'' && !ident_before(&chars, i) {
            // A byte: `b'x'` or `b'\n'`, read as a char literal.
            i += 1;
        } else if c == '\'' {
            if at(i + 1) == '\\' {
                i += 2;
                while at(i) != '\'' && at(i) != '\0' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                // A lifetime: its name is read as an identifier, harmless.
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while at(i).is_alphanumeric() || at(i) == '_' {
                i += 1;
            }
            out.push((Token::Ident(chars[start..i].iter().collect()), line));
        } else if c == ':' && at(i + 1) == ':' {
            out.push((Token::PathSep, line));
            i += 2;
        } else {
            out.push((Token::Punct(c), line));
            i += 1;
        }
    }
    out
}

/// What one file declares and names: its out-of-line child modules, its inline modules, and
/// every path its code outside `#[cfg(test)]` names (`use` trees expanded), each with the inline
/// module it is written in.
#[derive(Default)]
struct FileScan {
    /// (inline prefix + name, `#[path]`, under `#[cfg(test)]`)
    children: Vec<(Vec<String>, Option<String>, bool)>,
    inline: Vec<Vec<String>>,
    /// (inline prefix, path, line)
    paths: Vec<(Vec<String>, Vec<String>, usize)>,
}

fn ident(tokens: &[(Token, usize)], i: usize) -> Option<&str> {
    match tokens.get(i) {
        Some((Token::Ident(name), _)) => Some(name),
        _ => None,
    }
}

fn is(tokens: &[(Token, usize)], i: usize, want: &Token) -> bool {
    tokens.get(i).is_some_and(|(t, _)| t == want)
}

/// The leaves of the `use` tree at `tokens[*i]`, each a full path from the tree's root.
fn use_tree(tokens: &[(Token, usize)], i: &mut usize, mut prefix: Vec<String>) -> Vec<Vec<String>> {
    loop {
        if is(tokens, *i, &Token::Punct('{')) {
            *i += 1;
            let mut leaves = Vec::new();
            while !is(tokens, *i, &Token::Punct('}')) && *i < tokens.len() {
                leaves.extend(use_tree(tokens, i, prefix.clone()));
                if is(tokens, *i, &Token::Punct(',')) {
                    *i += 1;
                }
            }
            *i += 1;
            return leaves;
        }
        if is(tokens, *i, &Token::Punct('*')) {
            *i += 1;
            return vec![prefix];
        }
        if is(tokens, *i, &Token::PathSep) {
            *i += 1;
            continue;
        }
        match ident(tokens, *i) {
            Some("self") if !prefix.is_empty() => {}
            Some(name) => prefix.push(name.to_string()),
            None => return vec![prefix],
        }
        *i += 1;
        if ident(tokens, *i) == Some("as") {
            *i += 2;
        }
        if !is(tokens, *i, &Token::PathSep) {
            return vec![prefix];
        }
    }
}

fn scan(source: &str) -> FileScan {
    let tokens = tokens(source);
    let mut scan = FileScan::default();
    let mut depth = 0usize;
    // The inline modules around the token: name, depth of their brace, under `#[cfg(test)]`.
    let mut inline: Vec<(String, usize, bool)> = Vec::new();
    let (mut test_attr, mut path_attr) = (false, None);
    let prefix = |inline: &[(String, usize, bool)]| -> Vec<String> {
        inline.iter().map(|(name, _, _)| name.clone()).collect()
    };
    let in_test = |inline: &[(String, usize, bool)]| inline.iter().any(|(_, _, test)| *test);
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i].0 {
            Token::Punct('#') if is(&tokens, i + 1, &Token::Punct('[')) => {
                let end = (i..tokens.len())
                    .find(|&k| is(&tokens, k, &Token::Punct(']')))
                    .unwrap_or(tokens.len());
                let attr = &tokens[i + 2..end];
                match attr.first() {
                    Some((Token::Ident(name), _)) if name == "cfg" => {
                        test_attr |= attr.iter().any(|(t, _)| *t == Token::Ident("test".into()));
                    }
                    Some((Token::Ident(name), _)) if name == "path" => {
                        if let Some((Token::Str(p), _)) = attr.get(2) {
                            path_attr = Some(p.clone());
                        }
                    }
                    _ => {}
                }
                i = end + 1;
                continue;
            }
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth -= 1;
                if inline.last().is_some_and(|(_, d, _)| *d == depth) {
                    inline.pop();
                }
                (test_attr, path_attr) = (false, None);
            }
            Token::Punct(';') => (test_attr, path_attr) = (false, None),
            Token::Ident(word) if word == "mod" => {
                if let Some(name) = ident(&tokens, i + 1) {
                    let mut path = prefix(&inline);
                    path.push(name.to_string());
                    if is(&tokens, i + 2, &Token::Punct(';')) {
                        let test = test_attr || in_test(&inline);
                        scan.children.push((path, path_attr.take(), test));
                        test_attr = false;
                    } else if is(&tokens, i + 2, &Token::Punct('{')) {
                        scan.inline.push(path);
                        inline.push((name.to_string(), depth, test_attr));
                        depth += 1;
                        (test_attr, path_attr) = (false, None);
                        i += 3;
                        continue;
                    }
                }
            }
            Token::Ident(word) if word == "use" => {
                let line = tokens[i].1;
                i += 1;
                for leaf in use_tree(&tokens, &mut i, Vec::new()) {
                    if !in_test(&inline) {
                        scan.paths.push((prefix(&inline), leaf, line));
                    }
                }
                continue;
            }
            Token::Ident(word)
                if matches!(word.as_str(), "crate" | "super" | "self")
                    && is(&tokens, i + 1, &Token::PathSep)
                    && !(i > 0 && is(&tokens, i - 1, &Token::PathSep)) =>
            {
                let line = tokens[i].1;
                let mut path = vec![word.clone()];
                let mut j = i + 1;
                while is(&tokens, j, &Token::PathSep) {
                    match ident(&tokens, j + 1) {
                        Some(name) => path.push(name.to_string()),
                        None => break,
                    }
                    j += 2;
                }
                if !in_test(&inline) {
                    scan.paths.push((prefix(&inline), path, line));
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    scan
}

/// One file of `src/` in the crate's module tree.
struct ModuleFile {
    path: PathBuf,
    module: Vec<String>,
    /// Declared under `#[cfg(test)]`: test code, whose imports are not counted.
    test: bool,
    scan: FileScan,
}

/// The files of the library crate, found from `src/lib.rs` by their `mod` declarations.
fn module_files(src: &Path) -> Vec<ModuleFile> {
    let mut files: Vec<ModuleFile> = Vec::new();
    let mut queue = vec![(src.join("lib.rs"), Vec::new(), false)];
    while let Some((path, module, test)) = queue.pop() {
        let source = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let dir = path.parent().unwrap().to_path_buf();
        let owns_dir = ["lib.rs", "mod.rs", "main.rs"]
            .iter()
            .any(|n| path.file_name().unwrap() == *n);
        let child_dir = if owns_dir {
            dir.clone()
        } else {
            dir.join(path.file_stem().unwrap())
        };
        let scan = scan(&source);
        for (rel, path_attr, child_test) in &scan.children {
            let name = rel.last().unwrap();
            let file = match path_attr {
                Some(p) => dir.join(p),
                None => {
                    let flat = child_dir.join(format!("{name}.rs"));
                    if flat.exists() {
                        flat
                    } else {
                        child_dir.join(name).join("mod.rs")
                    }
                }
            };
            let mut child = module.clone();
            child.extend(rel.iter().cloned());
            queue.push((file, child, test || *child_test));
        }
        files.push(ModuleFile {
            path,
            module,
            test,
            scan,
        });
    }
    files
}

/// The files each file imports: `use crate::…`, `super::…`, `self::…` and such paths in code,
/// each resolved to the file of the deepest module it names; with the line that names it.
fn import_graph(files: &[ModuleFile]) -> Vec<std::collections::BTreeMap<usize, usize>> {
    let mut owner = std::collections::HashMap::new();
    for (index, file) in files.iter().enumerate() {
        owner.insert(file.module.clone(), index);
        for inline in &file.scan.inline {
            let mut module = file.module.clone();
            module.extend(inline.iter().cloned());
            owner.insert(module, index);
        }
    }
    let mut graph = vec![std::collections::BTreeMap::new(); files.len()];
    for (index, file) in files.iter().enumerate() {
        if file.test {
            continue;
        }
        for (inline, path, line) in &file.scan.paths {
            let mut at = file.module.clone();
            at.extend(inline.iter().cloned());
            let mut segments = path.iter().peekable();
            match segments.peek().map(|s| s.as_str()) {
                Some("crate") => {
                    at.clear();
                    segments.next();
                }
                Some("self") => {
                    segments.next();
                }
                Some("super") => {}
                _ => continue,
            }
            while segments.peek().is_some_and(|s| *s == "super") {
                at.pop();
                segments.next();
            }
            at.extend(segments.cloned());
            let target = (0..=at.len())
                .rev()
                .find_map(|n| owner.get(&at[..n]))
                .copied()
                .unwrap();
            if target != index {
                graph[index].entry(target).or_insert(*line);
            }
        }
    }
    graph
}

/// The strongly connected components of `graph` that hold more than one file (Tarjan).
fn circles(graph: &[std::collections::BTreeMap<usize, usize>]) -> Vec<Vec<usize>> {
    struct Walk<'a> {
        graph: &'a [std::collections::BTreeMap<usize, usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on_stack: Vec<bool>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    fn visit(w: &mut Walk, v: usize) {
        w.index[v] = Some(w.next);
        w.low[v] = w.next;
        w.next += 1;
        w.stack.push(v);
        w.on_stack[v] = true;
        for &u in w.graph[v].keys() {
            match w.index[u] {
                None => {
                    visit(w, u);
                    w.low[v] = w.low[v].min(w.low[u]);
                }
                Some(iu) if w.on_stack[u] => w.low[v] = w.low[v].min(iu),
                Some(_) => {}
            }
        }
        if Some(w.low[v]) == w.index[v] {
            let mut component = Vec::new();
            loop {
                let u = w.stack.pop().unwrap();
                w.on_stack[u] = false;
                component.push(u);
                if u == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                w.found.push(component);
            }
        }
    }
    let n = graph.len();
    let mut walk = Walk {
        graph,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on_stack: vec![false; n],
        next: 0,
        found: Vec::new(),
    };
    for v in 0..n {
        if walk.index[v].is_none() {
            visit(&mut walk, v);
        }
    }
    walk.found
}

/// No circle of imports between the files of `src/` (#56): a file that imports a file which
/// (through others) imports it back cannot be read, changed or tested alone. A `#[cfg(test)]`
/// child module may import the file that declares it; declaring a module is not importing it.
#[test]
fn no_circle_of_imports_between_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = module_files(&root.join("src"));
    let mut on_disk = Vec::new();
    rust_files(&root.join("src"), &mut on_disk);
    on_disk.retain(|p| !p.ends_with("main.rs"));
    assert_eq!(
        files.len(),
        on_disk.len(),
        "every file of src/ (but main.rs) is found from lib.rs by its `mod` declaration"
    );
    let graph = import_graph(&files);
    assert!(
        graph.iter().map(|edges| edges.len()).sum::<usize>() > files.len(),
        "the import graph was read (its edges moved?)"
    );
    let name = |i: usize| {
        files[i]
            .path
            .strip_prefix(root)
            .unwrap()
            .display()
            .to_string()
    };
    let report: Vec<String> = circles(&graph)
        .iter()
        .map(|component| {
            let edges: Vec<String> = component
                .iter()
                .flat_map(|&from| {
                    graph[from]
                        .iter()
                        .filter(|(to, _)| component.contains(to))
                        .map(move |(&to, line)| (from, to, *line))
                })
                .map(|(from, to, line)| format!("  {}:{line} imports {}", name(from), name(to)))
                .collect();
            format!("circle of {} files:\n{}", component.len(), edges.join("\n"))
        })
        .collect();
    assert!(
        report.is_empty(),
        "files of src/ import each other in a circle; move what both need into a file below \
         both:\n{}",
        report.join("\n")
    );
}

/// Each file one concern and small (#56): a Rust file of `src/` is at most 600 lines, an Erlang
/// module of the helper at most 700.
#[test]
fn no_file_is_over_its_length() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut rust = Vec::new();
    rust_files(&root.join("src"), &mut rust);
    let erlang: Vec<PathBuf> = std::fs::read_dir(root.join("erlang"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "erl"))
        .collect();
    assert!(
        rust.len() > 50 && erlang.len() > 20,
        "found src/ and erlang/"
    );
    let mut long = Vec::new();
    for (files, limit) in [(rust, 600), (erlang, 700)] {
        for file in files {
            let lines = std::fs::read_to_string(&file).unwrap().lines().count();
            if lines > limit {
                let shown = file.strip_prefix(root).unwrap().display().to_string();
                long.push(format!("{shown}: {lines} lines (at most {limit})"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "files over their length; split each by concern:\n{}",
        long.join("\n")
    );
}
