//! Tests wait for conditions, not for time: every sleep in `tests/` is either the pause
//! between two looks of a poll under a deadline (`common::wait_until` or a loop of its own) or
//! a wait where the clock is the condition (a rate window that must pass, proof that something
//! does not happen within a time), and says which on a `// Clock:` comment.

use std::path::{Path, PathBuf};

/// What marks a sleep as meant: on its line or on the line above.
const MARK: &str = "// Clock:";

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if !path.ends_with("fixtures") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_sleep_in_the_tests_says_why_the_clock_is_the_condition() {
    // Built from parts so that this line is no sleep of its own.
    let call = ["::", "sleep("].concat();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("tests"), &mut files);
    files.sort();
    assert!(files.len() > 30, "found the test files: {files:?}");
    let mut unexplained = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = source.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let imported = line.trim_start().starts_with("use ") && line.contains("sleep");
            if !(line.contains(&call) || imported) {
                continue;
            }
            let above = n.checked_sub(1).map_or("", |i| lines[i].trim_start());
            if imported || !(line.contains(MARK) || above.starts_with(MARK)) {
                let file = file.strip_prefix(root).unwrap_or(file).display();
                unexplained.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "a test waits for the condition it needs with `common::wait_until`; a sleep that \
         stays (a poll's pause, a window that must pass) says why on a `{MARK}` comment on \
         its line or the line above, and is called by its path (`tokio::time::sleep`):\n{}",
        unexplained.join("\n")
    );
}
