//! `docs/ARCHITECTURE.md` stays true: its module list names every file under `src/` and
//! `erlang/`, and every file it names exists.

use std::collections::BTreeSet;
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

#[test]
fn the_module_list_names_every_module_and_only_those() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let section = doc
        .split("\n## Modules\n")
        .nth(1)
        .expect("docs/ARCHITECTURE.md has a `## Modules` section");
    let listed: BTreeSet<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| l.split('`').next())
        .map(String::from)
        .collect();
    let mut present = BTreeSet::new();
    files(&root.join("src"), &[".rs"], &mut present);
    files(&root.join("erlang"), &[".erl", ".hrl"], &mut present);
    let missing: Vec<_> = present.difference(&listed).collect();
    let gone: Vec<_> = listed.difference(&present).collect();
    assert!(
        missing.is_empty() && gone.is_empty(),
        "docs/ARCHITECTURE.md `## Modules`: add {missing:?} (one line each, the first sentence \
         of its module doc); remove {gone:?}"
    );
}
