//! Test harness: the real `os_sup_mcp` binary on an ephemeral port, a minimal MCP client over a
//! real TCP socket, and the fixture Mix projects. Every process started here is killed on drop,
//! also when a test fails.
#![allow(dead_code)]

pub mod chromium;
pub mod erl;
pub mod matrix;
pub mod probe;
pub mod raw;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bound on every await in the tests.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(180);

/// Asks `probe` every 100 ms until `done` holds for its answer, and returns that answer; fails
/// the test, naming `what` and the last answer, once `limit` has passed. A test waits this way
/// for the condition it needs, never for a fixed time (`tests/test_hygiene.rs` keeps it so).
pub async fn wait_until<T: std::fmt::Debug>(
    limit: Duration,
    what: &str,
    mut probe: impl AsyncFnMut() -> T,
    mut done: impl FnMut(&T) -> bool,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let answer = probe().await;
        if done(&answer) {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {limit:?}; last: {answer:?}"
        );
        // Clock: paces the probes; the deadline above bounds them.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A temporary directory only this user can enter (mode 0700), as a state dir must be.
pub fn private_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    dir
}

/// The demo fixture.
pub fn demo_app() -> PathBuf {
    compiled_once("demo_app")
}

/// The shop fixture (importer → ledger → audit; see its `lib/shop.ex`).
pub fn shop() -> PathBuf {
    compiled_once("shop")
}

/// The ailments fixture (one ailment chosen by env `AILMENT`; see its `lib/ailments.ex`).
pub fn ailments() -> PathBuf {
    compiled_once("ailments")
}

/// The umbrella fixture (apps `inventory` and `storefront`, each a supervisor with one
/// agent).
pub fn umbrella() -> PathBuf {
    compiled_once("umbrella")
}

/// The cluster fixture (`:pg` group `:workers`, `:global` name `ClusterApp.Leader`; see its
/// `lib/cluster_app/application.ex`).
pub fn cluster_app() -> PathBuf {
    compiled_once("cluster_app")
}

/// The web-like fixture (a top supervisor over a telemetry process, a request logger and a
/// pool of 50 acceptors; see its `lib/web_pool.ex`).
pub fn web_pool() -> PathBuf {
    compiled_once("web_pool")
}

/// Fixture `name`, compiled once per test binary so parallel starts do not race to compile it.
fn compiled_once(name: &'static str) -> PathBuf {
    static COMPILED: Mutex<BTreeMap<&str, PathBuf>> = Mutex::new(BTreeMap::new());
    // A compile that failed panicked holding the lock: the next caller compiles again.
    let mut done = COMPILED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    done.entry(name).or_insert_with(|| compiled(name)).clone()
}

/// A copy of `fixture` (a path as [`shop`] and the others give it, compiled) in a temporary
/// directory, for a test that edits its sources; the copy goes when the `TempDir` drops.
pub fn fixture_copy(fixture: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir
        .path()
        .join(fixture.file_name().expect("a fixture's directory"));
    let copied = Command::new("cp")
        .arg("-a")
        .arg(fixture)
        .arg(&project)
        .status()
        .expect("cp");
    assert!(copied.success(), "copy {}", fixture.display());
    (dir, project)
}

/// Runs `mix compile` in fixture `name`; its path.
fn compiled(name: &str) -> PathBuf {
    let path = fixture(name);
    let out = Command::new("mix")
        .arg("compile")
        .current_dir(&path)
        .output()
        .expect("mix is installed (scripts/test.sh installs it)");
    assert!(out.status.success(), "fixture compile failed: {out:?}");
    path
}

/// Makes the process `cmd` starts die with this test process, even when the test is killed
/// (then `Drop` does not run): a server's nodes die with the server, an `erl` node itself.
pub fn dies_with_test(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: one async-signal-safe syscall between fork and exec; the flag survives exec
    // (`erl` execs the VM).
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A running `os_sup_mcp` server; SIGTERMed (then SIGKILLed) on drop.
pub struct Server {
    pub child: Child,
    pub addr: String,
    /// Everything the server logged so far.
    pub stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The server's state directory when the test did not choose one.
    _state_dir: Option<tempfile::TempDir>,
    /// Kill every BEAM it leaves behind once it is gone (see [`Server::reaping`]).
    reap: bool,
}

impl Server {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_with_env(extra, &[])
    }

    /// Like [`start_with`](Self::start_with), with extra environment variables.
    pub fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Self {
        // A test that sets XDG_STATE_HOME chose the default state dir: no --state-dir then.
        let chosen =
            extra.contains(&"--state-dir") || env.iter().any(|(k, _)| *k == "XDG_STATE_HOME");
        let state_dir = (!chosen).then(private_dir);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_os_sup_mcp"));
        if !extra.contains(&"--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        if let Some(dir) = &state_dir {
            cmd.arg("--state-dir").arg(dir.path());
        }
        dies_with_test(&mut cmd);
        let mut child = cmd
            .args([
                "--log-level",
                &std::env::var("OS_SUP_TEST_LOG").unwrap_or_else(|_| "info".into()),
            ])
            .args(extra)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        let logged = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let lines = logged.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line.clone());
                if !sent {
                    if let Some(addr) = line.split("addr=").nth(1) {
                        let _ = tx.send(addr.split_whitespace().next().unwrap_or("").to_string());
                        sent = true;
                    }
                }
                eprintln!("[server] {line}");
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("server printed its address");
        Self {
            child,
            addr,
            stderr: logged,
            _state_dir: state_dir,
            reap: false,
        }
    }

    /// This server, which once it is gone kills (SIGCONT, then SIGKILL) every BEAM it left
    /// behind, even when the test fails: for tests that kill or freeze the server or its nodes.
    pub fn reaping(mut self) -> Self {
        self.reap = true;
        self
    }

    /// The suffix of every node name this server gives its children.
    pub fn tag(&self) -> String {
        format!("_{:x}@127.0.0.1", self.pid())
    }

    /// SIGTERM, up to 20 s to exit, then SIGKILL.
    fn shut_down(&mut self) {
        let pid = self.child.id() as i32;
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            // Clock: paces this poll; the deadline above bounds it.
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The first line the server logged that contains `needle`, waiting up to 20 s for it.
    pub fn log_line(&self, needle: &str) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(line) = self.logged_line(needle) {
                return line;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server never logged {needle:?}"
            );
            // Clock: paces this poll; the deadline above bounds it.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The first line logged so far that contains `needle`.
    pub fn logged_line(&self, needle: &str) -> Option<String> {
        let lines = self.stderr.lock().unwrap();
        lines.iter().find(|line| line.contains(needle)).cloned()
    }

    /// The value of the first `key=value` the server logged (e.g. `http` for its HTTP address).
    pub fn logged(&self, key: &str) -> String {
        let needle = format!("{key}=");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let found = self.stderr.lock().unwrap().iter().find_map(|line| {
                let value = line.split(&needle).nth(1)?;
                Some(value.split_whitespace().next()?.to_string())
            });
            if let Some(value) = found {
                return value;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server never logged {key}="
            );
            // Clock: paces this poll; the deadline above bounds it.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub async fn client(&self) -> Client {
        Client::connect(&self.addr).await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shut_down();
        if self.reap {
            for pid in beams_matching(&self.tag()) {
                kill(pid, libc::SIGCONT);
                kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Runs the binary as a client of the server at `addr` (`--connect addr ARGS…`): its exit
/// code, stdout and stderr. Killed if it has not exited within [`CALL_TIMEOUT`].
pub fn cli(addr: &str, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_os_sup_mcp"));
    cmd.args(["--connect", addr])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    dies_with_test(&mut cmd);
    let child = cmd.spawn().expect("run the client");
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(out) = rx.recv_timeout(CALL_TIMEOUT) else {
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("the client did not exit within {CALL_TIMEOUT:?}: {args:?}");
    };
    let out = out.expect("the client's output");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A server with the demo app started on it as node `name`, and a client of it.
pub async fn demo_node(name: &str) -> (Server, Client) {
    let server = Server::start();
    let mut c = server.client().await;
    c.start_demo(name).await;
    (server, c)
}

/// The `name` of each item of the array `items` (nodes, members, tools, hits).
pub fn names(items: &Value) -> Vec<&str> {
    items
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {items}"))
        .iter()
        .map(|item| item["name"].as_str().expect("a name"))
        .collect()
}

/// The names of the tools in a `tools/list` answer.
pub fn tool_names(list: &Value) -> Vec<String> {
    names(&list["result"]["tools"])
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// A server speaking MCP on its stdin and stdout (`--stdio`); killed on drop. Every line it
/// writes to stdout must be JSON-RPC (its logs go to stderr).
pub struct StdioServer {
    pub child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl StdioServer {
    /// Starts the server with `--stdio` and `args`.
    pub fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_os_sup_mcp"))
            .arg("--stdio")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Self {
            child,
            stdin,
            lines,
        }
    }

    /// Writes `message` as one line.
    pub fn send(&mut self, message: &Value) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{message}").expect("write to the server");
    }

    /// `initialize`, as id 1, and then `notifications/initialized`, without waiting for the
    /// answer (read it with `reply(1)`).
    pub fn send_initialize(&mut self) {
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "os_sup_mcp-tests", "version": "0"}}});
        self.send(&initialize);
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    /// The answer to request `id`, skipping the other messages before it.
    pub fn reply(&mut self, id: u64) -> Value {
        loop {
            let line = self
                .lines
                .recv_timeout(CALL_TIMEOUT)
                .unwrap_or_else(|_| panic!("no answer to request {id}"));
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|_| panic!("non-JSON on stdout: {line}"));
            if message["id"] == json!(id) {
                return message;
            }
        }
    }

    /// Closes stdin, which ends the session, and waits up to 30 s for the server to exit:
    /// its exit status, or `None` when it did not exit (then it is killed).
    pub fn close(&mut self) -> Option<std::process::ExitStatus> {
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return None;
            }
            // Clock: paces this poll; the deadline above bounds it.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal, strict MCP client: newline-delimited JSON-RPC over TCP.
pub struct Client {
    reader: tokio::io::BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
    next_id: u64,
    /// The `initialize` result (capabilities, server info).
    pub initialized: Value,
    /// Notifications read while waiting for a response, oldest first.
    notifications: std::collections::VecDeque<Value>,
}

impl Client {
    pub async fn connect(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        let (read, writer) = stream.into_split();
        let mut client = Self {
            reader: tokio::io::BufReader::new(read),
            writer,
            next_id: 0,
            initialized: Value::Null,
            notifications: Default::default(),
        };
        let init = client
            .request(
                "initialize",
                json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "os_sup_mcp-tests", "version": "0"}
                }),
            )
            .await;
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        client.initialized = init["result"].clone();
        client.notify("notifications/initialized", json!({})).await;
        client
    }

    pub async fn send_line(&mut self, line: &str) {
        let framed = format!("{line}\n");
        self.writer
            .write_all(framed.as_bytes())
            .await
            .expect("write");
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_line(&msg.to_string()).await;
    }

    /// Sends a request and returns the whole response message (skipping notifications).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&msg.to_string()).await;
        self.response(id).await
    }

    pub async fn response(&mut self, id: u64) -> Value {
        tokio::time::timeout(CALL_TIMEOUT, async {
            loop {
                let msg = self.next_message().await;
                if msg.get("id") == Some(&json!(id)) {
                    return msg;
                }
                if msg.get("id").is_none() && msg.get("method").is_some() {
                    self.notifications.push_back(msg);
                }
            }
        })
        .await
        .expect("response within the test timeout")
    }

    async fn next_message(&mut self) -> Value {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).await.expect("read");
        assert!(n > 0, "server closed the connection");
        serde_json::from_str(&line).expect("server sent JSON")
    }

    /// The next notification named `method` (also one that came while awaiting a response),
    /// or `None` once `limit` passes.
    pub async fn notification(&mut self, method: &str, limit: Duration) -> Option<Value> {
        if let Some(i) = self
            .notifications
            .iter()
            .position(|n| n["method"] == method)
        {
            return self.notifications.remove(i);
        }
        tokio::time::timeout(limit, async {
            loop {
                let msg = self.next_message().await;
                if msg.get("id").is_none() && msg["method"] == method {
                    return msg;
                }
            }
        })
        .await
        .ok()
    }

    /// Calls a tool; returns the `result` (with `isError`, `content`, `structuredContent`).
    pub async fn call(&mut self, tool: &str, args: Value) -> Value {
        let response = self
            .request("tools/call", json!({"name": tool, "arguments": args}))
            .await;
        response
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("tools/call {tool} gave no result: {response}"))
    }

    /// Makes a finding's next call (`tool {json}`, as `diagnose` writes it); its result.
    pub async fn call_next(&mut self, next: &Value) -> Value {
        let (tool, args) = next_call(next);
        self.call(&tool, args).await
    }

    /// Calls a tool that must succeed; returns its structured content.
    pub async fn ok(&mut self, tool: &str, args: Value) -> Value {
        let result = self.call(tool, args).await;
        assert_ne!(
            result["isError"],
            json!(true),
            "{tool} failed: {}",
            text(&result)
        );
        result["structuredContent"].clone()
    }

    /// Calls a tool that must fail; returns its text.
    pub async fn err(&mut self, tool: &str, args: Value) -> String {
        let result = self.call(tool, args).await;
        assert_eq!(
            result["isError"],
            json!(true),
            "{tool} should fail: {result}"
        );
        text(&result)
    }

    /// `attach` with `args`, again while the node is still booting (up to 60 s); the result.
    pub async fn attach(&mut self, args: Value) -> Value {
        let attached = wait_until(
            Duration::from_secs(60),
            "attach kept failing",
            async || self.call("attach", args.clone()).await,
            |result| result["isError"] != true,
        )
        .await;
        attached["structuredContent"].clone()
    }

    /// The names of the tools the server offers.
    pub async fn tool_names(&mut self) -> Vec<String> {
        tool_names(&self.request("tools/list", json!({})).await)
    }

    /// Starts the Mix project at `path` as node `name`, with the default settings.
    pub async fn start_project(&mut self, name: &str, path: &Path) -> Value {
        self.ok("start", json!({"name": name, "path": path})).await
    }

    pub async fn start_demo(&mut self, name: &str) -> Value {
        self.start_project(name, &demo_app()).await
    }

    /// Starts node `name` as a plain Erlang VM (`erl -noshell`: no Mix project, no Elixir).
    pub async fn start_erl(&mut self, name: &str) -> Value {
        self.ok(
            "start",
            json!({"name": name, "command": ["erl", "-noshell"]}),
        )
        .await
    }

    /// Starts node `name` of the ailments fixture, ill with `ailment` (its env `AILMENT`).
    pub async fn start_ailment(&mut self, name: &str, ailment: &str) -> Value {
        let args = json!({"name": name, "path": ailments(), "env": {"AILMENT": ailment}});
        self.ok("start", args).await
    }

    pub async fn eval(&mut self, name: &str, code: &str) -> Value {
        self.ok("eval", json!({"name": name, "code": code})).await
    }

    /// The answer to `resources/read` of `uri`: the whole message (`result` or `error`).
    pub async fn read_resource(&mut self, uri: &str) -> Value {
        self.request("resources/read", json!({"uri": uri})).await
    }

    /// The history the server keeps of node `name`, as `beam://NAME/vitals` gives it:
    /// `{"keys": ["at_ms", meter…], "rows": [[at_ms, value…], …], "every_ms": …}`.
    pub async fn vitals(&mut self, name: &str) -> Value {
        let uri = format!("beam://{name}/vitals");
        let read = self.read_resource(&uri).await;
        let text = read["result"]["contents"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{uri} was not read: {read}"));
        serde_json::from_str(text).expect("the vitals are JSON")
    }

    /// The history of node `name` (as [`Client::vitals`] gives it) once it holds `samples`
    /// samples; fails the test when it does not within 20 s.
    pub async fn vitals_of_at_least(&mut self, name: &str, samples: usize) -> Value {
        wait_until(
            Duration::from_secs(20),
            &format!("{samples} samples of {name}'s vitals"),
            async || self.vitals(name).await,
            |vitals| vitals["rows"].as_array().map_or(0, Vec::len) >= samples,
        )
        .await
    }

    pub async fn node_status(&mut self, name: &str) -> Value {
        let status = self.ok("status", json!({"name": name})).await;
        status["nodes"][0].clone()
    }

    /// Polls `status` until node `name` is in `state`; its status. Fails the test when it is
    /// not within `limit`.
    pub async fn wait_state(&mut self, name: &str, state: &str, limit: Duration) -> Value {
        let node = self.wait_status(name, limit, |n| n["state"] == state).await;
        assert_eq!(node["state"], state, "{name} within {limit:?}: {node}");
        node
    }

    /// Polls `status` until node `name` runs again in an OS process other than `old_pid` (the
    /// server restarted it); its status. Fails the test when it does not within a minute.
    pub async fn wait_restarted(&mut self, name: &str, old_pid: u64) -> Value {
        let again = |n: &Value| n["state"] == "running" && n["os_pid"].as_u64() != Some(old_pid);
        let node = self.wait_status(name, Duration::from_secs(60), again).await;
        assert!(again(&node), "{name} not restarted within a minute: {node}");
        node
    }

    /// Polls `status` until `check` holds or `limit` passes; returns the last status.
    pub async fn wait_status(
        &mut self,
        name: &str,
        limit: Duration,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let status = self.ok("status", json!({})).await;
            let node = status["nodes"]
                .as_array()
                .and_then(|nodes| nodes.iter().find(|n| n["name"] == json!(name)).cloned())
                .unwrap_or(Value::Null);
            if check(&node) || Instant::now() > deadline {
                return node;
            }
            // Clock: paces this poll; the deadline above bounds it.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// How long the history in `vitals` (as [`Client::vitals`] gives it) spans.
pub fn history_span(vitals: &Value) -> Duration {
    let rows = vitals["rows"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let at = |row: Option<&Value>| row.and_then(|r| r[0].as_u64()).unwrap_or(0);
    Duration::from_millis(at(rows.last()).saturating_sub(at(rows.first())))
}

/// The text content of a tool result.
pub fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// OS pids of live (non-zombie) BEAM processes whose command line contains `needle`.
pub fn beams_matching(needle: &str) -> Vec<u32> {
    let out = Command::new("ps")
        .args(["-eo", "pid=,stat=,args="])
        .output()
        .expect("ps");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("beam") && l.contains(needle))
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let pid = parts.next()?.parse().ok()?;
            let stat = parts.next()?;
            (!stat.starts_with('Z')).then_some(pid)
        })
        .collect()
}

/// Waits up to 2 s for every BEAM whose command line holds `tag` to be gone; fails the test,
/// naming what they outlived (`after`), when one is left.
pub async fn wait_no_beams_left(tag: &str, after: &str) {
    wait_until(
        Duration::from_secs(2),
        &format!("no BEAM left after {after}"),
        async || beams_matching(tag),
        Vec::is_empty,
    )
    .await;
}

pub fn kill(pid: u32, signal: i32) {
    unsafe { libc::kill(pid as i32, signal) };
}

/// True if `pid` exists and is not a zombie (PID 1 here does not reap orphans).
pub fn alive(pid: u32) -> bool {
    let out = Command::new("ps")
        .args(["-o", "stat=", "-p", &pid.to_string()])
        .output()
        .expect("ps");
    let stat = String::from_utf8_lossy(&out.stdout);
    !stat.trim().is_empty() && !stat.trim().starts_with('Z')
}

/// What `work` gives, and how long it took.
pub async fn timed<T>(work: impl std::future::Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let done = work.await;
    (done, started.elapsed())
}

/// Puts `section` (which starts with `header`) into scripts/bench_results.md in place of the
/// section with that header (up to the next `## `), or at the end; the other sections stay.
pub fn write_bench_section(header: &str, section: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench_results.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let (head, tail) = match old.find(header) {
        Some(at) => {
            let rest = &old[at + header.len()..];
            let end = rest
                .find("\n## ")
                .map_or(old.len(), |i| at + header.len() + i + 1);
            (&old[..at], &old[end..])
        }
        None => (old.as_str(), ""),
    };
    let mut text = format!("{}\n\n{}\n", head.trim_end(), section.trim_end());
    if !tail.trim().is_empty() {
        text += &format!("\n{}\n", tail.trim_end());
    }
    std::fs::write(path, text).unwrap();
}

/// SIGSTOPs `pid` and waits until every thread of it has stopped (the signal is asynchronous:
/// a BEAM thread can still answer a message sent right after `kill` returns).
pub fn freeze(pid: u32) {
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process exists");
        let all_stopped = tasks.filter_map(Result::ok).all(|task| {
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.trim().chars().next());
            matches!(state, Some('T') | Some('t') | None)
        });
        if all_stopped {
            return;
        }
        assert!(Instant::now() < deadline, "process {pid} did not stop");
        // Clock: paces this poll; the deadline above bounds it.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Largest `diagnose` answer of one node an agent should have to read for one step.
pub const DIAGNOSE_BYTES: usize = 1536;

/// Starts the ailments fixture as `name` with `ailment` (its `AILMENT`).
pub async fn start_ailing(c: &mut Client, name: &str, ailment: &str) {
    c.ok(
        "start",
        json!({"name": name, "path": ailments(), "env": {"AILMENT": ailment}}),
    )
    .await;
}

/// `diagnose` on node `name`: its text (at most [`DIAGNOSE_BYTES`]) and data.
pub async fn diagnose(c: &mut Client, name: &str) -> (String, Value) {
    diagnose_with(c, json!({"name": name}), DIAGNOSE_BYTES).await
}

/// `diagnose` with `args` (a cluster's name, a window): its text (at most `max_bytes`) and
/// data; it must answer.
pub async fn diagnose_with(c: &mut Client, args: Value, max_bytes: usize) -> (String, Value) {
    let result = c.call("diagnose", args.clone()).await;
    let answer = text(&result);
    assert_ne!(result["isError"], json!(true), "{answer}");
    eprintln!(
        "diagnose {} ({} bytes):\n{answer}",
        args["name"],
        answer.len()
    );
    assert!(answer.len() <= max_bytes, "{answer}");
    (answer, result["structuredContent"].clone())
}

/// `diagnose` until its first finding is of `kind` (a fault may need a second or two to
/// show), for at most 30 s; the last report.
pub async fn diagnose_until(c: &mut Client, name: &str, kind: &str) -> (String, Value) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (answer, report) = diagnose(c, name).await;
        if report["findings"][0]["kind"] == json!(kind) || Instant::now() > deadline {
            return (answer, report);
        }
    }
}

/// A finding's next call (`{"tool", "arguments"}`, as `diagnose`'s data carries it): the
/// tool and its arguments.
pub fn next_call(next: &Value) -> (String, Value) {
    let tool = next["tool"]
        .as_str()
        .unwrap_or_else(|| panic!("a next call is {{tool, arguments}}: {next}"));
    assert!(next["arguments"].is_object(), "{next}");
    (tool.to_string(), next["arguments"].clone())
}

/// The next call `tool` with `arguments`, as a finding's data carries it.
pub fn next_of(tool: &str, arguments: Value) -> Value {
    json!({"tool": tool, "arguments": arguments})
}

/// Whether `answer`'s text shows `next` (a finding's data) as one of its `next: tool {json}`
/// lines.
pub fn shows_next(answer: &str, next: &Value) -> bool {
    let wanted = next_call(next);
    answer.lines().any(|line| {
        let Some((tool, args)) = line
            .trim_start()
            .strip_prefix("next: ")
            .and_then(|n| n.split_once(' '))
        else {
            return false;
        };
        serde_json::from_str::<Value>(args).is_ok_and(|args| (tool.to_string(), args) == wanted)
    })
}

/// The first finding, checked for kind and module, its next call in the text.
pub fn first<'a>(report: &'a Value, answer: &str, kind: &str, module: &[&str]) -> &'a Value {
    let finding = &report["findings"][0];
    assert_eq!(finding["kind"], kind, "{answer}");
    let found = finding["module"].as_str().unwrap_or_default();
    assert!(module.contains(&found), "module {found}: {answer}");
    assert!(shows_next(answer, &finding["next"]), "{answer}");
    finding
}

/// User + system CPU time of a process so far.
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    // After the command: state is field 3, utime 14 and stime 15 (1-based, whole line).
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_micros(ticks * 1_000_000 / hz)
}

/// The OTP release of the `erl` the tests run (on PATH): where a feature answers differently
/// on two releases, the test says which and why.
pub fn otp_release() -> u32 {
    static RELEASE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *RELEASE.get_or_init(|| {
        let out = std::process::Command::new("erl")
            .args([
                "-noshell",
                "-eval",
                "io:format(\"~s\", [erlang:system_info(otp_release)]), halt().",
            ])
            .output()
            .expect("erl is installed (scripts/test.sh installs it)");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("an OTP release")
    })
}

/// Whether the `elixir` the tests run (on PATH) is at least `major.minor`: where the same
/// feature answers differently on two releases, the test says which and why.
#[allow(dead_code)]
pub fn elixir_at_least(major: u32, minor: u32) -> bool {
    static VERSION: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    let (have_major, have_minor) = *VERSION.get_or_init(|| {
        let out = std::process::Command::new("elixir")
            .args(["-e", "IO.write(System.version())"])
            .output()
            .expect("elixir is installed (scripts/test.sh installs it)");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut parts = text
            .trim()
            .split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    });
    (have_major, have_minor) >= (major, minor)
}
