//! `priv/*.beam` must be exactly what `erlc +deterministic` makes of `erlang/*.erl`: the binary
//! embeds them, so a stale beam would ship old helper code.

use std::path::Path;
use std::process::Command;

#[test]
fn priv_beams_are_fresh_and_embedded() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().unwrap();
    let mut sources: Vec<_> = std::fs::read_dir(root.join("erlang"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "erl"))
        .collect();
    sources.sort();
    assert!(!sources.is_empty());
    let status = Command::new("erlc")
        .arg("+deterministic")
        .arg("-o")
        .arg(out.path())
        .args(&sources)
        .status()
        .expect("erlc is installed (scripts/test.sh installs it)");
    assert!(status.success(), "the helper compiles");
    let embedded = os_sup_mcp::helper::MODULES;
    assert_eq!(
        embedded.len(),
        sources.len(),
        "one embedded beam per source"
    );
    for source in &sources {
        let module = source.file_stem().unwrap().to_str().unwrap();
        let fresh = std::fs::read(out.path().join(format!("{module}.beam"))).unwrap();
        let committed = std::fs::read(root.join(format!("priv/{module}.beam"))).unwrap();
        assert!(
            fresh == committed,
            "priv/{module}.beam is stale: run scripts/build_helper.sh"
        );
        let (_, beam) = embedded.iter().find(|(m, _)| *m == module).unwrap();
        assert_eq!(
            *beam,
            committed.as_slice(),
            "the binary embeds priv/{module}.beam"
        );
    }
}

/// The helper stays split recon-style, one concern per module: the shared helpers are the
/// `os_sup_lib_*` modules, the only ones another module may `-import` (everything else is
/// called by its full name); a module past 800 lines is a sign it holds more than one concern.
#[test]
fn helper_modules_are_split_by_concern_and_import_only_the_lib() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("erlang")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "erl") {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let source = std::fs::read_to_string(&path).unwrap();
        let lines = source.lines().count();
        assert!(
            lines <= 800,
            "erlang/{name} has {lines} lines: it holds more than one concern, split it by concern"
        );
        for line in source.lines() {
            if let Some(rest) = line.trim_start().strip_prefix("-import(") {
                let module = rest.split(',').next().unwrap_or("").trim();
                assert!(
                    module.starts_with("os_sup_lib_"),
                    "erlang/{name} imports {module}: only the shared os_sup_lib_* modules may be \
                     imported"
                );
            }
        }
        checked += 1;
    }
    assert!(checked > 1, "the helper modules were found");
}

/// Every helper module is in `os_sup_helper`'s `SIBLINGS`: a release boots in embedded mode,
/// which loads nothing on demand, so a module left out is missing there.
#[test]
fn every_helper_module_is_loaded_at_boot() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let helper = std::fs::read_to_string(root.join("erlang/os_sup_helper.erl")).unwrap();
    let start = helper
        .find("-define(SIBLINGS, [")
        .expect("SIBLINGS is defined");
    let list = &helper[start..start + helper[start..].find("]).").unwrap()];
    let listed: Vec<&str> = list
        .trim_start_matches("-define(SIBLINGS, [")
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|m| !m.is_empty())
        .collect();
    for entry in std::fs::read_dir(root.join("erlang")).unwrap() {
        let path = entry.unwrap().path();
        let module = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.extension().is_some_and(|e| e == "erl") && module != "os_sup_helper" {
            assert!(
                listed.contains(&module.as_str()),
                "erlang/{module}.erl is not in os_sup_helper's SIBLINGS"
            );
        }
    }
}
