//! The binary as a client of a running server (`os_sup_mcp status`, `eval`, `logs`…), and the
//! `--config` file that starts nodes with the server.

mod common;

use common::{cli, demo_app, Server};
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn config_file_starts_nodes_and_the_client_talks_to_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("os_sup.toml");
    std::fs::write(
        &config,
        format!(
            "[[node]]\nname = \"cfg\"\npath = \"{}\"\nmax_restarts = 2\n",
            demo_app().display()
        ),
    )
    .unwrap();
    let server = Server::start_with(&["--config", config.to_str().unwrap()]);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (code, out, _) = cli(&server.addr, &["status"]);
        assert_eq!(code, 0);
        if out.contains("cfg running") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the configured node never ran: {out}"
        );
        // Clock: paces this poll; the deadline above bounds it.
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, out, _) = cli(&server.addr, &["eval", "cfg", "20 + 22"]);
    assert_eq!((code, out.trim()), (0, "42"));
    let (code, _, err) = cli(&server.addr, &["eval", "cfg", r#"raise "nope""#]);
    assert_eq!(code, 1, "a failed call exits 1");
    assert!(err.contains("nope"), "{err}");
    let (code, out, _) = cli(&server.addr, &["logs", "cfg", "--tail", "5"]);
    assert_eq!(code, 0);
    assert!(out.contains("matched"), "{out}");
    let (code, out, _) = cli(&server.addr, &["call", "status", r#"{"name":"cfg"}"#]);
    assert_eq!(code, 0);
    assert!(out.contains("otp="), "{out}");
    let (code, _, err) = cli(&server.addr, &["call", "status", "{not json"]);
    assert_eq!(code, 2, "{err}");
    let (code, out, _) = cli(
        &server.addr,
        &[
            "eval",
            "cfg",
            "ok.",
            "--lang",
            "erlang",
            "--timeout-ms",
            "2000",
        ],
    );
    assert_eq!((code, out.trim()), (0, "ok"));
    let (code, out, _) = cli(
        &server.addr,
        &[
            "logs",
            "cfg",
            "--source",
            "logger",
            "--min-level",
            "error",
            "--skip-eval",
        ],
    );
    assert_eq!(code, 0, "{out}");
    // The verbs a user reaches for first: diagnose, eval on every member (refused with a
    // reason for a node that is no cluster).
    let (code, out, _) = cli(&server.addr, &["diagnose", "cfg", "--window-ms", "200"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("healthy") || out.contains("figures:"),
        "{out}"
    );
    let (code, _, err) = cli(&server.addr, &["eval", "cfg", "1", "--all"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is not a cluster's name"), "{err}");

    let (code, out, _) = cli(&server.addr, &["tools"]);
    assert_eq!(code, 0);
    assert!(out.lines().any(|l| l.starts_with("eval ")), "{out}");
    let (code, out, _) = cli(&server.addr, &["tools", "eval"]);
    assert_eq!(code, 0);
    assert!(out.contains("  code: string, required"), "{out}");
    let (code, _, err) = cli(&server.addr, &["tools", "evall"]);
    assert_eq!(code, 2);
    assert!(err.contains("no tool `evall`"), "{err}");
}

#[test]
fn the_client_explains_an_unreachable_server() {
    let (code, _, err) = cli("127.0.0.1:1", &["status"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot connect"), "{err}");
}

#[test]
fn a_bad_config_file_stops_the_server_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "[[node]]\nname = \"x\"\npath = \"nowhere\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_os_sup_mcp"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--config",
            config.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not usable"), "{err}");
}
