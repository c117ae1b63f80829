//! Embeds every compiled helper module in `priv/*.beam` (built by `scripts/build_helper.sh`)
//! as `helper::MODULES`, so adding an Erlang module needs no Rust change; and writes
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
    let mut modules: Vec<String> = std::fs::read_dir("priv")
        .expect("priv/ exists (run scripts/build_helper.sh)")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".beam").map(str::to_string)
        })
        .collect();
    modules.sort();
    let mut code = String::from("&[\n");
    for module in &modules {
        println!("cargo:rerun-if-changed=priv/{module}.beam");
        let _ = writeln!(
            code,
            "    ({module:?}, include_bytes!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/priv/{module}.beam\"))),"
        );
    }
    code.push(']');
    let out =
        std::path::Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("helper_modules.rs");
    std::fs::write(out, code).expect("write helper_modules.rs");
}
