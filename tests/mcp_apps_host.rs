//! The MCP Apps views in a real host: headless Chromium (tests/common/chromium.rs) shows a host
//! page built on the MCP Apps SDK's `AppBridge` (npm @modelcontextprotocol/ext-apps, installed
//! by `scripts/setup.sh --clients`), which frames a view the real server served (sandboxed as
//! hosts frame views: scripts only, an origin of its own, the spec's default CSP; the test reads
//! what it drew through DevTools) and hands it a real tool result on a fixture node. In most tests what the view asks the host
//! (`tools/call`, `resources/read`) this test asks the server, as an MCP client of it, and
//! answers back to the page, so it can check each request and answer; in one the page is the
//! whole host, the SDK's `Client` talking to the server over Streamable HTTP.
//! `OS_SUP_WRITE_DOCS=1` writes each view's screenshot to `docs/`.

mod common;

use common::chromium::{chromium_installed, Browser};
use common::raw::{ui_capabilities, RawSession};
use common::{diagnose_until, history_span, start_ailing, wait_until, Client, Server};
use os_sup_mcp::node::diagnose::TREND_MIN_SPAN;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Generous bound for what the page does on its own (load the SDK, draw, ask).
const SHOWS_UP: Duration = Duration::from_secs(30);

/// The host page: the SDK loaded from `/node_modules` through an import map. `show(html, args,
/// result)` frames a view with the spec's default CSP; the view's `tools/call` and
/// `resources/read` wait in `window.asked` until the test answers them (`answer(i, result)`).
/// `host(tool, args)` is a whole host instead: the SDK's `Client` over Streamable HTTP (`/mcp`,
/// relayed to the server) finds the tool's view, reads it, calls the tool and frames the view,
/// and the `AppBridge` relays what the view asks to the server itself.
const HOST_PAGE: &str = include_str!("clients/apps_host.html");

/// Serves [`HOST_PAGE`] at `/` and the files under `modules` at `/node_modules/…`, and relays
/// `/mcp` to the server's Streamable HTTP endpoint at `mcp`.
async fn serve_host(listener: tokio::net::TcpListener, modules: std::path::PathBuf, mcp: String) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let (modules, mcp) = (modules.clone(), mcp.clone());
        tokio::spawn(async move {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 16384 {
                match tokio::io::AsyncReadExt::read(&mut stream, &mut byte).await {
                    Ok(1) => head.push(byte[0]),
                    _ => return,
                }
            }
            let head = String::from_utf8_lossy(&head);
            let target = head.split_whitespace().nth(1).unwrap_or("/");
            let path = target.split('?').next().unwrap_or("/");
            if path == "/mcp" {
                return relay(stream, &head, &mcp).await;
            }
            let file = path
                .strip_prefix("/node_modules/")
                .filter(|rest| !rest.split('/').any(|part| part == ".." || part.is_empty()))
                .map(|rest| modules.join(rest));
            let (status, kind, body) = match (path, file) {
                ("/", _) => ("200 OK", "text/html", HOST_PAGE.as_bytes().to_vec()),
                (_, Some(file)) => match std::fs::read(&file) {
                    Ok(body) => ("200 OK", "text/javascript", body),
                    Err(_) => ("404 Not Found", "text/plain", Vec::new()),
                },
                _ => ("404 Not Found", "text/plain", Vec::new()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {kind}; charset=utf-8\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.write_all(&body).await;
            let _ = stream.shutdown().await;
        });
    }
}

/// Relays one request to the server at `mcp` as a host's own server side would: without the
/// browser's Origin, with the server's Host, the connection closed after the answer (which
/// may be an event stream, relayed as it comes).
async fn relay(mut browser: tokio::net::TcpStream, head: &str, mcp: &str) {
    let mut lines = head.split("\r\n").filter(|line| !line.is_empty());
    let mut forwarded = format!(
        "{}\r\nHost: {mcp}\r\nConnection: close\r\n",
        lines.next().unwrap_or_default()
    );
    for line in lines {
        let name = line
            .split(':')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if !["host", "origin", "referer", "connection"].contains(&name.as_str()) {
            forwarded += line;
            forwarded += "\r\n";
        }
    }
    forwarded += "\r\n";
    let Ok(mut server) = tokio::net::TcpStream::connect(mcp).await else {
        return;
    };
    if server.write_all(forwarded.as_bytes()).await.is_ok() {
        let _ = tokio::io::copy_bidirectional(&mut browser, &mut server).await;
    }
}

/// The SDK's packages, or `None` (the test is skipped with a note; on CI it fails).
fn sdk_modules() -> Option<std::path::PathBuf> {
    let modules =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".clients/npm/node_modules");
    if modules
        .join("@modelcontextprotocol/ext-apps/dist/src/app-bridge.js")
        .exists()
    {
        return Some(modules);
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    assert!(
        !ci,
        "the MCP Apps SDK is missing on CI: scripts/setup.sh --clients installs it"
    );
    eprintln!("SKIPPED: the MCP Apps SDK is not installed; run scripts/setup.sh --clients");
    None
}

/// What a supervisor or worker of a `supervision_tree` result is drawn as: its name, id or pid.
fn tree_labels(node: &Value, labels: &mut Vec<String>) {
    let label = ["name", "id", "pid"]
        .iter()
        .find_map(|key| node[key].as_str().filter(|s| !s.is_empty()))
        .unwrap_or("?");
    labels.push(label.to_string());
    for child in node["children"].as_array().into_iter().flatten() {
        tree_labels(child, labels);
    }
}

/// `expression` as run in the view's world (`doc` is its document).
fn in_view(expression: &str) -> String {
    format!("(() => {{ const doc = document; return {expression}; }})()")
}

/// The host page in Chromium, the server (also on Streamable HTTP), and this test's session
/// with the server as a client of MCP Apps.
struct Host {
    page: Browser,
    server: Server,
    ui: RawSession,
    /// The view's requests the host has answered so far.
    answered: usize,
    /// This test's DevTools session on the view's frame, once framed: the frame is sandboxed
    /// as a host frames a view (scripts only, an origin of its own), out of the host page's
    /// reach.
    view: Option<String>,
}

impl Host {
    /// The host in a window of `width` × `height`, and a client of the server; `None` when
    /// Chromium or the SDK is missing (the test is skipped).
    async fn open(width: u32, height: u32) -> Option<(Self, Client)> {
        if !chromium_installed() {
            return None;
        }
        let modules = sdk_modules()?;
        let server = Server::start_with(&["--http", "127.0.0.1:0"]);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let page_addr = listener.local_addr().unwrap();
        tokio::spawn(serve_host(listener, modules, server.logged("http")));
        let ui = RawSession::open(&server.addr, ui_capabilities()).await;
        let page = Browser::drive(&format!("http://{page_addr}/"), width, height);
        let client = server.client().await;
        let mut host = Self {
            page,
            server,
            ui,
            answered: 0,
            view: None,
        };
        host.wait("the host page loading the SDK", "window.hostReady === true");
        Some((host, client))
    }

    fn wait(&mut self, what: &str, expression: &str) {
        if self.page.wait_for(expression, SHOWS_UP).is_none() {
            panic!(
                "the page never showed {what} ({expression}); chromium said:\n{}",
                self.page.log()
            );
        }
    }

    /// Calls `tool` with `args`, and frames `tool`'s view (its `_meta.ui.resourceUri`) with
    /// them and the result; returns the result.
    async fn show(&mut self, tool: &str, args: Value) -> Value {
        let tools = self.ui.result("tools/list", json!({})).await;
        let listed = tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == tool);
        let uri = listed.and_then(|t| t["_meta"]["ui"]["resourceUri"].as_str());
        let uri = uri
            .unwrap_or_else(|| panic!("{tool} has no view: {tools}"))
            .to_string();
        let call = json!({"name": tool, "arguments": args});
        let result = self.ui.result("tools/call", call).await;
        let read = self.ui.result("resources/read", json!({"uri": uri})).await;
        let html = read["contents"][0]["text"].clone();
        self.page
            .eval(&format!("show({html}, {args}, {result}), true"));
        self.framed();
        result
    }

    /// Waits until the view has taken the tool's input and result, and enters its frame.
    fn framed(&mut self) {
        self.wait(
            "the view taking the tool's input and result",
            "window.shown === true",
        );
        self.view = Some(self.page.frame_session());
    }

    /// Waits until `expression` (on the view's document, `doc`) is truthy.
    fn wait_view(&mut self, what: &str, expression: &str) {
        let expression = in_view(expression);
        if self
            .page
            .wait_for_in(self.view.as_deref(), &expression, SHOWS_UP)
            .is_none()
        {
            panic!(
                "the view never showed {what} ({expression}); chromium said:\n{}",
                self.page.log()
            );
        }
    }

    /// Waits for the view's next request through the host, makes it to the server and answers
    /// the view; returns the request and the answer.
    async fn answer_next(&mut self) -> (Value, Value) {
        let next = self.answered;
        self.wait(
            "the view's request",
            &format!("window.asked.length > {next}"),
        );
        let asked = self.page.eval(&format!("window.asked[{next}]"));
        let method = asked["method"].as_str().unwrap().to_string();
        let result = self.ui.result(&method, asked["params"].clone()).await;
        self.page.eval(&format!("answer({next}, {result}), true"));
        self.answered += 1;
        (asked, result)
    }

    /// `expression`'s value in the view (`doc` is its document).
    fn eval_in_view(&mut self, expression: &str) -> Value {
        self.page
            .eval_in(self.view.as_deref(), &in_view(expression))
    }

    /// Waits until the host was told the view's height as drawn.
    fn wait_told_size(&mut self) {
        let started = std::time::Instant::now();
        loop {
            let drawn =
                self.eval_in_view("Math.ceil(doc.documentElement.getBoundingClientRect().height)");
            let told = self.page.eval("window.sizes.at(-1)");
            if told == drawn {
                return;
            }
            assert!(
                started.elapsed() < SHOWS_UP,
                "the view is {drawn} high, the host was told {told}"
            );
            // Clock: paces this poll; SHOWS_UP bounds it.
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// With `OS_SUP_WRITE_DOCS=1`, writes what the page shows to `docs/<file>`.
    fn screenshot(&mut self, file: &str) {
        if std::env::var("OS_SUP_WRITE_DOCS").is_err() {
            return;
        }
        let png = self.page.screenshot();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs")
            .join(file);
        std::fs::write(&path, png).unwrap();
        eprintln!("wrote {}", path.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tree_view_draws_every_child_and_refreshes_through_the_host() {
    let Some((mut host, mut c)) = Host::open(920, 400).await else {
        return;
    };
    c.start_demo("demo").await;
    let args = json!({"name": "demo"});
    // A restart, for the view to mark.
    c.eval(
        "demo",
        "Process.exit(Process.whereis(DemoApp.Counter), :boom)",
    )
    .await;
    let counter_restarted = |tree: &Value| tree.to_string().contains("\"restarted\":{");
    wait_until(
        SHOWS_UP,
        "the restart in the tree",
        async || c.ok("supervision_tree", args.clone()).await,
        counter_restarted,
    )
    .await;
    let result = host.show("supervision_tree", args.clone()).await;
    let mut labels = Vec::new();
    for root in result["structuredContent"]["roots"].as_array().unwrap() {
        tree_labels(root, &mut labels);
    }
    assert!(labels.len() >= 8, "the demo's tree: {result}");

    // The view runs as a host runs it: its frame out of the host page's reach.
    let reachable = host.page.eval("window.view.contentDocument !== null");
    assert_eq!(
        reachable,
        json!(false),
        "the frame has an origin of its own"
    );
    // Every supervisor and worker of the result is drawn, and nothing else.
    let drawn = "[...doc.querySelectorAll('#tree summary, #tree div.leaf:not(.pid)')].map(e => e.textContent)";
    host.wait_view("the tree", &format!("{drawn}?.length > 0"));
    let drawn_now: Vec<String> = serde_json::from_value(host.eval_in_view(drawn)).unwrap();
    assert_eq!(
        drawn_now.len(),
        labels.len(),
        "drawn {drawn_now:?}, in the result {labels:?}"
    );
    for label in &labels {
        assert!(
            drawn_now.iter().any(|d| d.contains(label.as_str())),
            "{label} not drawn: {drawn_now:?}"
        );
    }
    // The restarted child, and only it, is marked.
    let marked =
        "[...doc.querySelectorAll('#tree .restarted')].map(e => e.parentElement.textContent)";
    let marked: Vec<String> = serde_json::from_value(host.eval_in_view(marked)).unwrap();
    assert_eq!(marked.len(), 1, "{marked:?}");
    assert!(
        marked[0].starts_with("○ DemoApp.Counter") && marked[0].contains("↻ restarted 1×"),
        "{marked:?}"
    );
    // The host's theme, then a change of it; the view's size reached the host.
    let theme = "doc.documentElement.dataset.theme";
    assert_eq!(host.eval_in_view(theme), json!("dark"));
    host.page
        .eval("bridge.setHostContext({ theme: 'light' }), true");
    host.wait_view(
        "the view following the host's theme",
        &format!("{theme} === 'light'"),
    );
    host.wait_told_size();

    // Refresh: the view asks the host, the host the server, and the view draws the answer.
    host.eval_in_view("(doc.getElementById('refresh').click(), true)");
    let (asked, _) = host.answer_next().await;
    assert_eq!(asked["method"], "tools/call", "{asked}");
    assert_eq!(
        asked["params"],
        json!({"name": "supervision_tree", "arguments": args})
    );
    let meta = "doc.getElementById('meta').textContent";
    host.wait_view(
        "the tree drawn again",
        &format!("{meta}.endsWith(' processes')"),
    );
    let redrawn: Vec<String> = serde_json::from_value(host.eval_in_view(drawn)).unwrap();
    assert_eq!(redrawn.len(), labels.len(), "{redrawn:?}");

    host.page
        .eval("bridge.setHostContext({ theme: 'dark' }), true");
    host.wait_view("the dark theme again", &format!("{theme} === 'dark'"));
    host.screenshot("mcp-apps-tree.png");

    // A call the host cancels: the view says so.
    host.page
        .eval("bridge.sendToolCancelled({ reason: 'stopped by the user' }), true");
    host.wait_view(
        "the cancelled call told",
        &format!("{meta} === 'the call was cancelled (stopped by the user): nothing to draw'"),
    );
}

/// `process_info` with a profile of the ailments fixture's busy indexer: the flame graph with
/// the indexer's own `rebuild/1`; "profile again" samples it anew through the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_profile_view_draws_the_flame_graph_and_profiles_again() {
    let Some((mut host, mut c)) = Host::open(920, 520).await else {
        return;
    };
    c.start_ailment("cpu", "cpu").await;
    let args = json!({"name": "cpu", "pid": "Ailments.Indexer", "profile_ms": 1000});
    let result = host.show("process_info", args.clone()).await;
    assert!(
        result["structuredContent"]["profile"]["folded"].is_array(),
        "{result}"
    );
    let rebuild = "[...doc.querySelectorAll('#flame g.frame')].filter(g => g.dataset.frame === 'Elixir.Ailments.Indexer:rebuild/1').length";
    host.wait_view("rebuild/1 in the flame graph", &format!("{rebuild} > 0"));
    let hot = host.eval_in_view("doc.getElementById('profile-hot').textContent");
    assert!(
        hot.as_str().unwrap().contains("Ailments.Indexer.rebuild/1"),
        "{hot}"
    );

    host.eval_in_view("(doc.getElementById('refresh').click(), true)");
    let (asked, _) = host.answer_next().await;
    assert_eq!(
        asked["params"],
        json!({"name": "process_info", "arguments": args})
    );
    let meta = "doc.getElementById('meta').textContent";
    host.wait_view(
        "the new profile",
        &format!("{meta}.includes('running or runnable')"),
    );
    host.wait_view(
        "rebuild/1 in the new flame graph",
        &format!("{rebuild} > 0"),
    );
    host.wait_told_size();
    host.screenshot("mcp-apps-profile.png");
}

/// `diagnose` of the demo: its text, and the vital signs read through the host, each series
/// drawn with one point per sample that has it; refresh reads them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vitals_view_plots_every_sample_through_the_host() {
    let Some((mut host, mut c)) = Host::open(920, 760).await else {
        return;
    };
    c.start_demo("demo").await;
    c.vitals_of_at_least("demo", 3).await;
    let result = host.show("diagnose", json!({"name": "demo"})).await;
    let text = host.eval_in_view("doc.getElementById('text').textContent");
    assert_eq!(
        text.as_str(),
        result["content"][0]["text"].as_str(),
        "the report's text"
    );

    let (asked, answer) = host.answer_next().await;
    assert_eq!(asked["method"], "resources/read", "{asked}");
    assert_eq!(asked["params"]["uri"], "beam://demo/vitals", "{asked}");
    // The run queue: one point per sample of the history handed to the view.
    let count = "doc.querySelector('polyline[data-series=run_queue]')?.getAttribute('points').split(' ').length";
    host.wait_view("the run queue plotted", &format!("{count} > 2"));
    let vitals: Value =
        serde_json::from_str(answer["contents"][0]["text"].as_str().unwrap()).unwrap();
    let keys = vitals["keys"].as_array().unwrap();
    let column = keys.iter().position(|k| k == "run_queue").unwrap();
    let rows = vitals["rows"].as_array().unwrap();
    let samples = rows.iter().filter(|r| !r[column].is_null()).count();
    assert_eq!(host.eval_in_view(count), json!(samples), "{vitals}");
    let plots = host.eval_in_view("doc.querySelectorAll('#vitals figure.plot').length");
    assert_eq!(plots, json!(4));

    host.eval_in_view("(doc.getElementById('refresh').click(), true)");
    let (again, _) = host.answer_next().await;
    assert_eq!(again, asked, "refresh reads the history again");
    let meta = "doc.getElementById('meta').textContent";
    host.wait_view(
        "the history drawn again",
        &format!("{meta}.startsWith('vital signs: ')"),
    );
    host.wait_told_size();
}

/// `diagnose` of a node whose atoms keep rising (the ailments fixture's `atoms`): the series
/// its growth finding names is drawn marked, with the time to the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vitals_view_marks_the_series_a_finding_says_rises() {
    let Some((mut host, mut c)) = Host::open(920, 760).await else {
        return;
    };
    start_ailing(&mut c, "atoms", "atoms").await;
    wait_until(
        Duration::from_secs(60),
        "history enough for a rate",
        async || history_span(&c.vitals("atoms").await),
        |span| *span >= TREND_MIN_SPAN,
    )
    .await;
    diagnose_until(&mut c, "atoms", "growth").await;
    let result = host.show("diagnose", json!({"name": "atoms"})).await;
    let findings = result["structuredContent"]["findings"].as_array().unwrap();
    assert!(findings.iter().any(|f| f["meter"] == "atoms"), "{result}");
    host.answer_next().await;
    let marked = "[...doc.querySelectorAll('#vitals polyline.rising')].map(l => l.dataset.series)";
    host.wait_view(
        "the atoms marked rising",
        &format!("{marked}?.includes('atoms')"),
    );
    let note = host.eval_in_view("doc.querySelector('#vitals li[data-series=atoms]').textContent");
    assert!(
        note.as_str().unwrap().contains("▲ rising, limit in "),
        "{note}"
    );
    // It goes on, dashed, from its last sample to its limit (100 %, the plot's top, as the
    // plot is scaled to it) at the plot's right edge, labelled with the time left.
    let ahead = host.eval_in_view(
        "(() => { const l = doc.querySelector('#vitals line.ahead[data-series=atoms]'); \
         const last = doc.querySelector('#vitals polyline[data-series=atoms]').getAttribute('points').split(' ').at(-1); \
         const label = doc.querySelector('#vitals text.plot-ahead[data-series=atoms]'); \
         return l && [l.getAttribute('x1') + ',' + l.getAttribute('y1'), l.getAttribute('x2'), l.getAttribute('y2'), last, label.textContent]; })()",
    );
    assert_eq!(ahead[0], ahead[3], "from the last sample: {ahead}");
    assert_eq!(ahead[1], "318", "to the right edge: {ahead}");
    assert_eq!(ahead[2], "4.0", "to 100 %: {ahead}");
    let limit = findings.iter().find(|f| f["meter"] == "atoms").unwrap()["seconds_to_limit"]
        .as_f64()
        .unwrap();
    let hours = (limit / 3600.0).round();
    let label = ahead[4].as_str().unwrap();
    assert!(
        label.starts_with("atoms: limit in ")
            && (limit < 7200.0 || label.ends_with(&format!("in {hours} h"))),
        "{label}, {limit} s"
    );
    host.wait_told_size();
    host.screenshot("mcp-apps-vitals.png");
}

/// A whole host over Streamable HTTP: the SDK's `Client` declares the extension, finds
/// `supervision_tree`'s view in the tool list, reads it, calls the tool and frames the view;
/// the view's refresh goes through the `AppBridge` to the server with no help from this test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_on_streamable_http_draws_and_refreshes_the_tree_view() {
    let Some((mut host, mut c)) = Host::open(920, 400).await else {
        return;
    };
    c.start_demo("demo").await;
    let framed = host.page.eval("host('supervision_tree', { name: 'demo' })");
    assert_eq!(
        framed,
        json!({"uri": "ui://os-sup/tree.html", "mimeType": "text/html;profile=mcp-app"})
    );
    host.framed();
    let workers = "doc.querySelectorAll('#tree div.leaf[data-pid]').length";
    host.wait_view("the tree", &format!("{workers} >= 4"));
    // Refresh: a second `supervision_tree` call reaches the server through the bridge.
    let activity = format!("http://{}/api/activity?since=0", host.server.logged("http"));
    let calls = || async {
        let feed: Value = reqwest::get(&activity).await.unwrap().json().await.unwrap();
        let calls = feed["calls"].as_array().unwrap().iter();
        calls
            .filter(|call| call["tool"] == "supervision_tree")
            .count()
    };
    let before = calls().await;
    host.eval_in_view("(doc.getElementById('meta').textContent = '', doc.getElementById('refresh').click(), true)");
    let meta = "doc.getElementById('meta').textContent";
    host.wait_view(
        "the tree drawn again",
        &format!("{meta}.endsWith(' processes')"),
    );
    assert_eq!(calls().await, before + 1, "the refresh reached the server");
    assert_eq!(
        host.page.eval("window.asked.length"),
        json!(0),
        "nothing went around the bridge"
    );
}

/// `diagnose` of a cluster: who sees whom, drawn from `status` of the cluster asked through
/// the host; a click on a member plots that member's vital signs, also read through the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_diagnose_view_of_a_cluster_draws_who_sees_whom() {
    let Some((mut host, mut c)) = Host::open(920, 760).await else {
        return;
    };
    let start = json!({"name": "c", "path": common::cluster_app(), "nodes": 3});
    c.ok("start", start).await;
    let result = host.show("diagnose", json!({"name": "c"})).await;
    assert_eq!(result["structuredContent"]["cluster"], "c", "{result}");
    let (asked, _) = host.answer_next().await;
    assert_eq!(
        asked["params"],
        json!({"name": "status", "arguments": {"name": "c"}})
    );
    let links = "doc.querySelectorAll('#clusters [data-cluster=c] line.link').length";
    host.wait_view("three members, all linked", &format!("{links} === 3"));
    c.vitals_of_at_least("c-2", 3).await;

    host.eval_in_view(
        "(doc.querySelector('#clusters g[data-member=c-2]').dispatchEvent(new Event('click')), true)",
    );
    let (asked, _) = host.answer_next().await;
    assert_eq!(
        asked["params"],
        json!({"uri": "beam://c-2/vitals"}),
        "{asked}"
    );
    let meta = "doc.getElementById('meta').textContent";
    host.wait_view(
        "c-2's vital signs",
        &format!("{meta}?.startsWith('vital signs of c-2: ')"),
    );
    let plots = host.eval_in_view("doc.querySelectorAll('#vitals figure.plot').length");
    assert_eq!(plots, json!(4));
    host.wait_told_size();
    host.screenshot("mcp-apps-cluster.png");
}
