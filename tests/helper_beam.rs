//! The helper's beams (`priv/otpNN/*.beam`, `priv/os_sup_boot.beam`) must be exactly what
//! `erlc +deterministic` of the release each is named after makes of `erlang/`: the binary
//! embeds them, so a stale beam would ship old helper code. On every release the suite runs on
//! (`scripts/test.sh --toolchain`), the sources compile without a warning and the set made for
//! that release loads, every module of it.

mod common;

use common::otp_release;
use std::path::Path;
use std::process::Command;

fn compile(sources: &[std::path::PathBuf], out: &Path) {
    let status = Command::new("erlc")
        .args(["+deterministic", "-Werror", "-o"])
        .arg(out)
        .args(sources)
        .status()
        .expect("erlc is installed (scripts/test.sh installs it)");
    assert!(
        status.success(),
        "the helper compiles without a warning on this release"
    );
}

fn sources(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut sources: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "erl"))
        .collect();
    sources.sort();
    sources
}

#[test]
fn priv_beams_are_fresh_and_embedded() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().unwrap();
    let sources = sources(&root.join("erlang"));
    assert!(!sources.is_empty());
    compile(&sources, out.path());
    compile(&[root.join("erlang/boot/os_sup_boot.erl")], out.path());
    let beams = &os_sup_mcp::helper::BEAMS;
    let otps: Vec<u32> = beams.sets.iter().map(|s| s.otp).collect();
    assert_eq!(otps, [25, 27], "the sets scripts/build_helper.sh makes");
    for set in beams.sets {
        assert_eq!(
            set.modules.len(),
            sources.len(),
            "one beam per source in otp{}",
            set.otp
        );
    }
    let otp = otp_release();
    // Only the release a set is named after makes its beams; on the others the compile above
    // checked the sources, and the next test that the set for this release loads.
    let Some(set) = beams.sets.iter().find(|s| s.otp == otp) else {
        return;
    };
    for source in &sources {
        let module = source.file_stem().unwrap().to_str().unwrap();
        let fresh = std::fs::read(out.path().join(format!("{module}.beam"))).unwrap();
        let committed = std::fs::read(root.join(format!("priv/otp{otp}/{module}.beam"))).unwrap();
        assert!(
            fresh == committed,
            "priv/otp{otp}/{module}.beam is stale: run scripts/build_helper.sh"
        );
        let (_, beam) = set.modules.iter().find(|(m, _)| *m == module).unwrap();
        assert_eq!(
            *beam,
            committed.as_slice(),
            "the binary embeds priv/otp{otp}/{module}.beam"
        );
    }
    if otp == beams.sets[0].otp {
        let fresh = std::fs::read(out.path().join("os_sup_boot.beam")).unwrap();
        assert!(
            fresh == beams.boot
                && fresh == std::fs::read(root.join("priv/os_sup_boot.beam")).unwrap(),
            "priv/os_sup_boot.beam is stale: run scripts/build_helper.sh"
        );
    }
}

/// What a node of this release does at boot: `os_sup_boot` picks the set made for it, and every
/// module of that set loads (OTP 29 refuses some beams of OTP 25; OTP 25 all of OTP 27).
#[test]
fn the_set_for_this_release_loads_whole() {
    let code = os_sup_mcp::helper::HelperCode::install().unwrap();
    let dir = code.dir().display();
    let probe = format!(
        "{{ok, Set, _}} = os_sup_boot:set_dir(\"{dir}\", list_to_integer(erlang:system_info(otp_release))), \
         Files = filelib:wildcard(filename:join(Set, \"*.beam\")), \
         Refused = [{{filename:basename(F), R}} || F <- Files, {{error, R}} <- [code:load_abs(filename:rootname(F))]], \
         io:format(\"~s ~b ~p~n\", [filename:basename(Set), length(Files), Refused]), halt()."
    );
    let out = Command::new("erl")
        .args(["-noshell", "-pa", &dir.to_string(), "-eval", &probe])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let expected_set = os_sup_mcp::helper::BEAMS.set_for(otp_release());
    let want = format!("otp{} {} []", expected_set.otp, expected_set.modules.len());
    assert_eq!(
        said.trim(),
        want,
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
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

/// `os_sup_boot` picks, for a node's release, the newest set not newer than it (the oldest for
/// an older node), as `HelperBeams::set_for` does for an attach; and a node that refuses the
/// helper says so at once: on the control socket when it refuses `os_sup_helper` itself (a node
/// older than every set), or, when only some modules are refused, in one sentence from
/// `refused/0` once the rest is loaded (OTP 29 given only the set of OTP 25).
#[test]
fn the_boot_picks_a_set_per_release_and_says_what_is_refused() {
    let code = os_sup_mcp::helper::HelperCode::install().unwrap();
    let dir = code.dir().display().to_string();
    let picks = format!(
        "io:format(\"~p\", [[element(3, os_sup_boot:set_dir(\"{dir}\", R)) || R <- [24, 25, 26, 27, 28, 29, 30]]]), halt()."
    );
    let out = Command::new("erl")
        .args(["-noshell", "-pa", &dir, "-eval", &picks])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "[25,25,25,27,27,27,27]"
    );
    let beams = &os_sup_mcp::helper::BEAMS;
    assert_eq!(
        [24, 26, 30].map(|r| beams.set_for(r).otp),
        [25, 25, 27],
        "the server's choice for an attach is the boot's"
    );

    let otp = otp_release();
    // A directory with one set: the one this release cannot (wholly) load.
    let (keep, expected): (u32, &str) = match otp {
        ..=26 => (
            27,
            "refused OTP 25 refused the helper (os_sup_helper, compiled by OTP 27)",
        ),
        29.. => (
            25,
            "the helper is incomplete on this node: OTP 29 refused os_sup_",
        ),
        _ => {
            eprintln!("OTP {otp} loads both sets: nothing to refuse here (tested on 25 and 29)");
            return;
        }
    };
    let one = tempfile::tempdir().unwrap();
    std::fs::copy(
        code.dir().join("os_sup_boot.beam"),
        one.path().join("os_sup_boot.beam"),
    )
    .unwrap();
    let set = one.path().join(format!("otp{keep}"));
    std::fs::create_dir(&set).unwrap();
    for entry in std::fs::read_dir(code.dir().join(format!("otp{keep}"))).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, set.join(path.file_name().unwrap())).unwrap();
    }
    let mut erl = Command::new("erl");
    if keep > otp {
        // The control socket of a node the server starts (stdout here), where `os_sup_boot`
        // says the node refused the helper. (Not for a helper that starts: it would watch it.)
        erl.env("OS_SUP_CONTROL_FD", "1");
    }
    let out = erl
        .args(["-noshell", "-pa"])
        .arg(one.path())
        .args([
            "-eval",
            "os_sup_boot:start(), \
             case erlang:function_exported(os_sup_helper, load_rest, 0) of \
                 true -> io:format(\"~ts\", [os_sup_helper:load_rest()]); \
                 false -> ok \
             end, halt().",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    // (The node's own reports of what it refused come first.)
    assert!(
        said.lines().any(|line| line.starts_with(expected)),
        "OTP {otp} given only the set of OTP {keep} said {said:?} (stderr {:?})",
        String::from_utf8_lossy(&out.stderr)
    );
}
