//! The command line as a web developer uses it: a web app started in one line (`--command`,
//! `--ready-url`, `--restart`) that serves HTTP, its status headed by its application's when
//! that dies, its controller traced (`trace`, `trace-results NODE`: the
//! newest session's events, each request's conn told by its method, path and status), `waits`,
//! `logs --since` a time as log lines print it, `tools NAME` with every argument's forms, and
//! the client over a Unix socket.

mod common;

use common::{cli, demo_app, Server};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// A TCP port free on 127.0.0.1 a moment ago.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// `GET path` on 127.0.0.1:`port`: the response's status line.
fn get(port: u16, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    response.lines().next().unwrap_or("").to_string()
}

/// Runs the client until its stdout satisfies `done`, within 60 s; returns that stdout.
fn cli_until(addr: &str, args: &[&str], done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, out, err) = cli(addr, args);
        if code == 0 && done(&out) {
            return out;
        }
        assert!(Instant::now() < deadline, "{args:?}: {code} {out} {err}");
        // Clock: paces this poll; the deadline above bounds it.
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_web_app_starts_in_one_line_and_its_requests_trace_by_method_path_and_status() {
    let server = Server::start();
    let addr = server.addr.as_str();
    let port = free_port();
    let serve = format!("mix run --no-halt -e 'DemoApp.Web.serve({port})'");
    let url = format!("http://127.0.0.1:{port}/");
    let demo = demo_app();
    let (code, out, err) = cli(
        addr,
        &[
            "start",
            "web",
            demo.to_str().unwrap(),
            "--command",
            &serve,
            "--ready-url",
            &url,
            "--restart",
            "temporary",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("started: web running"), "{out}");
    assert_eq!(get(port, "/"), "HTTP/1.1 200 OK");

    let (code, out, err) = cli(
        addr,
        &[
            "trace",
            "web",
            "DemoApp.Web.Pages",
            "show",
            "--max-events",
            "2",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("session id: web:t1"), "{out}");
    assert_eq!(get(port, "/"), "HTTP/1.1 200 OK");
    assert_eq!(get(port, "/missing"), "HTTP/1.1 404 Not Found");
    // No session named: the node's newest session, with its events.
    let results = cli_until(addr, &["trace-results", "web"], |out| {
        out.contains("2 calls: 2 returned")
    });
    eprintln!("{} bytes:\n{results}", results.len());
    assert!(results.starts_with("session id: web:t1\n"), "{results}");
    // Each conn (a `Plug.Conn`'s fields, 3 KB) is told by what tells one request from another.
    assert!(
        results.contains(r#"-> %DemoApp.Web.Conn{method: "GET", request_path: "/", status: 200"#),
        "{results}"
    );
    assert!(
        results.contains(
            r#"-> %DemoApp.Web.Conn{method: "GET", request_path: "/missing", status: 404"#
        ),
        "{results}"
    );
    assert!(results.len() <= 2048, "{} bytes:\n{results}", results.len());
    // The tool's name works as a verb too; a session id reads that session.
    let (code, out, _) = cli(addr, &["trace_results", "web:t1", "--limit", "1"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 more; call again with since=2"), "{out}");

    let (code, out, err) = cli(addr, &["waits", "web", "--window-ms", "100"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.is_empty());

    // A log line's time, as it prints, is a `since`.
    let (code, _, err) = cli(
        addr,
        &[
            "eval",
            "web",
            r#"require Logger; Logger.warning("clock mark")"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let logged = cli_until(
        addr,
        &["logs", "web", "--grep", "clock mark", "--tail", "1"],
        |out| out.contains("clock mark"),
    );
    let line = logged.lines().last().unwrap();
    let clock = line.split_whitespace().nth(1).unwrap();
    assert_eq!(clock.len(), "17:29:04.183".len(), "{line}");
    let (code, out, err) = cli(addr, &["logs", "web", "--since", clock]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("clock mark"), "{out}");
    let (code, _, err) = cli(addr, &["logs", "web", "--since", "25:61:00"]);
    assert_eq!(code, 1);
    assert!(err.contains("a time as log lines print it"), "{err}");

    // The application dies, the VM lives on (`temporary`: left up to be looked at): the
    // headline is the application's.
    let (code, _, err) = cli(
        addr,
        &[
            "eval",
            "web",
            "spawn(fn -> Process.sleep(100); Process.exit(Process.whereis(DemoApp.Supervisor), :kill) end)",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let status = cli_until(addr, &["status", "web"], |out| {
        out.contains("app demo_app: exited")
    });
    assert!(status.starts_with("web app-exited pid="), "{status}");

    let (code, out, err) = cli(addr, &["stop", "web"]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn tools_name_shows_every_argument_its_forms_and_an_example() {
    let server = Server::start();
    let (code, out, err) = cli(&server.addr, &["tools", "start"]);
    assert_eq!(code, 0, "{err}");
    eprintln!("{out}");
    assert!(
        out.contains(r#"  ready: "app" | {"log": string} | {"port": integer} | {"url": string}"#),
        "{out}"
    );
    assert!(out.contains("  name: string, required"), "{out}");
    assert!(
        out.contains("  restart: one of: transient, permanent, temporary"),
        "{out}"
    );
    assert!(out.contains("example: os_sup_mcp call start '{"), "{out}");
    assert!(out.contains("or: os_sup_mcp start"), "{out}");
    // An argument the listing leaves out (shared by the tools that show terms) is shown.
    let (code, out, _) = cli(&server.addr, &["tools", "processes"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("  format: one of: auto, elixir, erlang"),
        "{out}"
    );
    assert!(
        out.contains("  group_by: one of: initial_call, current_function"),
        "{out}"
    );
    // The example is a call that runs.
    let example = out
        .lines()
        .find_map(|l| l.strip_prefix("example: os_sup_mcp call processes "))
        .expect("an example")
        .trim_matches('\'');
    let (_, _, err) = cli(&server.addr, &["call", "processes", example]);
    assert!(err.contains("no node named `web`"), "{err}");
}

#[test]
fn the_client_connects_over_a_unix_socket_and_a_start_flag_is_checked() {
    let dir = common::private_dir();
    let socket = format!("unix:{}", dir.path().join("os_sup.sock").display());
    let server = Server::start_with(&["--listen", &socket]);
    assert_eq!(server.addr, socket);
    let (code, out, err) = cli(&socket, &["status"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("no nodes"), "{out}");
    let (code, _, err) = cli(&socket, &["start", "x", ".", "--command", "mix 'unclosed"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is not closed"), "{err}");
    let (code, _, err) = cli(
        &socket,
        &[
            "start",
            "x",
            ".",
            "--ready-url",
            "http://a/",
            "--ready-port",
            "1",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
    let gone = format!("unix:{}", dir.path().join("none.sock").display());
    let (code, _, err) = cli(&gone, &["status"]);
    assert_eq!(code, 2);
    assert!(err.contains("--connect unix:PATH"), "{err}");
}
