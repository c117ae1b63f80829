//! Embeds the compiled helper (built by `scripts/build_helper.sh`): `priv/os_sup_boot.beam` and
//! each set `priv/otpNN/*.beam`, as `helper::BEAMS`, so adding an Erlang module (or a set for
//! another release) needs no Rust change; and writes
//! `erlang/os_sup_bounds.hrl` from `src/bounds.rs`, so the helper's bounds are never edited by
//! hand (`tests/helper_beam.rs` fails until `scripts/build_helper.sh` compiles them in).

#[allow(dead_code)]
#[path = "src/bounds.rs"]
mod bounds;

use std::fmt::Write;

fn main() {
    println!("cargo:rerun-if-changed=priv");
    println!("cargo:rerun-if-changed=src/bounds.rs");
    let header = "erlang/os_sup_bounds.hrl";
    if std::fs::read_to_string(header).ok() != Some(bounds::erlang_header()) {
        std::fs::write(header, bounds::erlang_header()).expect("write erlang/os_sup_bounds.hrl");
    }
    // priv/os_sup_boot.beam, then one set per priv/otpNN/ directory, oldest release first.
    println!("cargo:rerun-if-changed=priv/os_sup_boot.beam");
    let mut sets: Vec<(u32, String)> = std::fs::read_dir("priv")
        .expect("priv/ exists (run scripts/build_helper.sh)")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            Some((name.strip_prefix("otp")?.parse().ok()?, name))
        })
        .collect();
    sets.sort();
    let mut code = String::from("HelperBeams {\n    boot: include_bytes!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/priv/os_sup_boot.beam\")),\n    sets: &[\n");
    for (otp, dir) in &sets {
        println!("cargo:rerun-if-changed=priv/{dir}");
        let mut modules: Vec<String> = std::fs::read_dir(format!("priv/{dir}"))
            .expect("a set's directory")
            .filter_map(|entry| {
                let name = entry.ok()?.file_name().into_string().ok()?;
                name.strip_suffix(".beam").map(str::to_string)
            })
            .collect();
        modules.sort();
        let _ = writeln!(code, "        BeamSet {{ otp: {otp}, modules: &[");
        for module in &modules {
            println!("cargo:rerun-if-changed=priv/{dir}/{module}.beam");
            let _ = writeln!(
                code,
                "            ({module:?}, include_bytes!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/priv/{dir}/{module}.beam\"))),"
            );
        }
        code.push_str("        ] },\n");
    }
    code.push_str("    ],\n}");
    let out =
        std::path::Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("helper_modules.rs");
    std::fs::write(out, code).expect("write helper_modules.rs");
}
