//! `priv/os_sup_helper.beam` must be exactly what `erlc +deterministic` makes of the source:
//! the binary embeds it, so a stale beam would ship old helper code.

use std::path::Path;
use std::process::Command;

#[test]
fn priv_beam_is_fresh() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().unwrap();
    let status = Command::new("erlc")
        .arg("+deterministic")
        .arg("-o")
        .arg(out.path())
        .arg(root.join("erlang/os_sup_helper.erl"))
        .status()
        .expect("erlc is installed (scripts/test.sh installs it)");
    assert!(status.success(), "the helper compiles");
    let fresh = std::fs::read(out.path().join("os_sup_helper.beam")).unwrap();
    let committed = std::fs::read(root.join("priv/os_sup_helper.beam")).unwrap();
    assert!(
        fresh == committed,
        "priv/os_sup_helper.beam is stale: run scripts/build_helper.sh"
    );
    assert_eq!(
        committed,
        os_sup_mcp::helper::BEAM,
        "the binary embeds priv/"
    );
}
