//! MCP Apps (`io.modelcontextprotocol/ui`) against the real server over real sockets: a client
//! that does not declare the extension gets the same bytes as before; one that does sees the
//! views linked from exactly their tools, and each view reads back as one self-contained page.

mod common;

use common::{Server, CALL_TIMEOUT};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The views and the tool each is linked from.
const VIEWS: [(&str, &str); 3] = [
    ("supervision_tree", "ui://os-sup/tree.html"),
    ("process_info", "ui://os-sup/profile.html"),
    ("diagnose", "ui://os-sup/vitals.html"),
];
const MIME_TYPE: &str = "text/html;profile=mcp-app";

fn ui_capabilities() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": [MIME_TYPE]}}})
}

/// A session that keeps each answer's bytes as the server wrote them (the common client
/// parses them, and always declares no capabilities).
struct RawSession {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
    next_id: u64,
    /// The `initialize` answer's line.
    initialized: String,
}

impl RawSession {
    async fn open(addr: &str, capabilities: Value) -> Self {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (read, writer) = stream.into_split();
        let mut session = Self {
            reader: BufReader::new(read),
            writer,
            next_id: 0,
            initialized: String::new(),
        };
        let params = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": capabilities,
            "clientInfo": {"name": "mcp-apps-test", "version": "0"}
        });
        session.initialized = session.line("initialize", params).await;
        let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        session.send(&done).await;
        session
    }

    async fn send(&mut self, message: &Value) {
        let line = format!("{message}\n");
        self.writer.write_all(line.as_bytes()).await.expect("write");
    }

    /// The answer to `method`, as the line the server sent.
    async fn line(&mut self, method: &str, params: Value) -> String {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&request).await;
        tokio::time::timeout(CALL_TIMEOUT, async {
            loop {
                let mut line = String::new();
                let read = self.reader.read_line(&mut line).await.expect("read");
                assert!(read > 0, "the server closed the session");
                let message: Value = serde_json::from_str(&line).expect("JSON");
                if message["id"] == json!(id) {
                    return line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no answer to {method}"))
    }

    async fn result(&mut self, method: &str, params: Value) -> Value {
        let line = self.line(method, params).await;
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert!(answer.get("result").is_some(), "{method}: {answer}");
        answer["result"].clone()
    }
}

#[tokio::test]
async fn a_client_without_the_extension_sees_the_same_bytes() {
    let server = Server::start();
    let mut c = server.client().await;
    c.start_demo("demo").await;
    let mut none = RawSession::open(&server.addr, json!({})).await;
    let other = json!({"extensions": {"io.modelcontextprotocol/foo": {"mimeTypes": [MIME_TYPE]}}});
    let mut other = RawSession::open(&server.addr, other).await;
    // The extension without our type of view is no client of our views either.
    let no_html =
        json!({"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/plain"]}}});
    let mut no_html = RawSession::open(&server.addr, no_html).await;
    let mut ui = RawSession::open(&server.addr, ui_capabilities()).await;
    for session in [&other, &no_html, &ui] {
        assert_eq!(session.initialized, none.initialized, "initialize");
    }
    for (method, params) in [
        ("tools/list", json!({})),
        ("resources/list", json!({})),
        ("resources/read", json!({"uri": "ui://os-sup/tree.html"})),
    ] {
        let plain = none.line(method, params.clone()).await;
        assert_eq!(other.line(method, params.clone()).await, plain, "{method}");
        assert_eq!(
            no_html.line(method, params.clone()).await,
            plain,
            "{method}"
        );
        // The client of the views gets more: the answers differ.
        assert_ne!(ui.line(method, params).await, plain, "{method}");
    }
    let plain: Value = serde_json::from_str(&none.line("tools/list", json!({})).await).unwrap();
    let tools = plain["result"]["tools"].as_array().unwrap();
    assert!(tools.iter().all(|t| t.get("_meta").is_none()), "{plain}");
    let read = none
        .line("resources/read", json!({"uri": "ui://os-sup/tree.html"}))
        .await;
    assert!(read.contains("unknown resource"), "{read}");
}

/// Every `http://` or `https://` in a view is the SVG namespace, never an address to load.
fn addresses(html: &str) -> Vec<&str> {
    let mut found = Vec::new();
    for scheme in ["http://", "https://"] {
        for (at, _) in html.match_indices(scheme) {
            let rest = &html[at..];
            let end = rest
                .find(|c: char| c == '"' || c == '\'' || c.is_whitespace())
                .unwrap_or(rest.len());
            found.push(&rest[..end]);
        }
    }
    found
}

async fn views_are_linked_and_self_contained(server: &Server) {
    let mut ui = RawSession::open(&server.addr, ui_capabilities()).await;
    let tools = ui.result("tools/list", json!({})).await;
    let linked: Vec<(String, Value)> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t.get("_meta").is_some())
        .map(|t| (t["name"].as_str().unwrap().to_string(), t["_meta"].clone()))
        .collect();
    assert_eq!(linked.len(), VIEWS.len(), "{linked:?}");
    for (tool, uri) in VIEWS {
        let (_, meta) = linked
            .iter()
            .find(|(name, _)| name == tool)
            .unwrap_or_else(|| panic!("{tool} has no view: {linked:?}"));
        assert_eq!(
            meta,
            &json!({"ui": {"resourceUri": uri}, "ui/resourceUri": uri}),
            "{tool}"
        );
    }
    let listed = ui.result("resources/list", json!({})).await;
    for (_, uri) in VIEWS {
        let entry = listed["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["uri"] == uri)
            .unwrap_or_else(|| panic!("{uri} not listed: {listed}"));
        assert_eq!(entry["mimeType"], MIME_TYPE, "{entry}");

        let read = ui.result("resources/read", json!({"uri": uri})).await;
        let contents = read["contents"].as_array().unwrap();
        assert_eq!(contents.len(), 1, "{read}");
        let view = &contents[0];
        assert_eq!(view["uri"], uri);
        assert_eq!(view["mimeType"], MIME_TYPE);
        assert_eq!(view["_meta"]["ui"]["prefersBorder"], true);
        let html = view["text"].as_str().unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"), "{uri}");
        assert!(html.trim_end().ends_with("</html>"), "{uri}");
        for address in addresses(html) {
            assert_eq!(
                address, "http://www.w3.org/2000/svg",
                "{uri} names an address"
            );
        }
        for loads in [
            "src=",
            "href=",
            "fetch(",
            "XMLHttpRequest",
            "WebSocket",
            "import(",
        ] {
            assert!(!html.contains(loads), "{uri} loads something: {loads}");
        }
        // The shared drawing code and the handshake are in.
        for needed in [
            "function treeNode(",
            "function drawFlame(",
            "\"ui/initialize\"",
        ] {
            assert!(html.contains(needed), "{uri} lacks {needed}");
        }
        eprintln!("{uri}: {} bytes", html.len());
    }
}

#[tokio::test]
async fn a_client_of_the_extension_gets_three_views() {
    let server = Server::start();
    views_are_linked_and_self_contained(&server).await;
}

/// The views call only tools that change nothing: a read-only server offers them all.
#[tokio::test]
async fn the_views_work_on_a_read_only_server() {
    let server = Server::start_with(&["--read-only"]);
    views_are_linked_and_self_contained(&server).await;
}

// ---------------------------------------------------------------------------------------------
// A real host in Chromium: the MCP Apps SDK's `AppBridge` (npm @modelcontextprotocol/ext-apps,
// installed by `scripts/setup.sh --clients`) frames a view the server served and hands it a
// real tool result; the view's calls through the host are made by this test, an MCP client of
// the server, and answered back to the page.

/// The host page: the SDK loaded from `/node_modules` through an import map. `show(html, args,
/// result)` frames a view with the spec's default CSP; the view's `tools/call` and
/// `resources/read` wait in `window.asked` until the test answers them (`answer(i, result)`).
const HOST_PAGE: &str = r#"<!DOCTYPE html><html><head><meta charset="utf-8"><title>test host</title>
<script type="importmap">{"imports":{
 "@modelcontextprotocol/ext-apps/app-bridge":"/node_modules/@modelcontextprotocol/ext-apps/dist/src/app-bridge.js",
 "@modelcontextprotocol/client":"/node_modules/@modelcontextprotocol/client/dist/index.mjs",
 "@modelcontextprotocol/client/_shims":"/node_modules/@modelcontextprotocol/client/dist/shimsBrowser.mjs",
 "@modelcontextprotocol/core":"/node_modules/@modelcontextprotocol/core/dist/index.mjs",
 "@modelcontextprotocol/core/internal":"/node_modules/@modelcontextprotocol/core/dist/internal.mjs",
 "zod":"/node_modules/zod/index.js","zod/v4":"/node_modules/zod/v4/index.js","zod/compile":"/node_modules/zod/compile.js",
 "pkce-challenge":"/node_modules/pkce-challenge/dist/index.browser.js",
 "eventsource":"/node_modules/eventsource/dist/index.js",
 "eventsource-parser":"/node_modules/eventsource-parser/dist/index.js",
 "eventsource-parser/stream":"/node_modules/eventsource-parser/dist/stream.js",
 "jose":"/node_modules/jose/dist/webapi/index.js"}}</script>
<style>body{margin:0;background:#16161a;font:13px system-ui;color:#ccc} iframe{display:block;border:1px solid #444;border-radius:8px;width:880px;margin:10px}</style>
</head><body>
<script type="module">
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
const CSP = "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; media-src 'self' data:; connect-src 'none';";
window.asked = [];
window.sizes = [];
const waiting = [];
window.answer = (i, result) => waiting[i](result);
const ask = (method, params) => new Promise((resolve) => { waiting.push(resolve); window.asked.push({ method, params }); });
window.show = async (html, args, result) => {
  const frame = document.createElement("iframe");
  // Same origin as this page only so the test can read what the view drew.
  frame.setAttribute("sandbox", "allow-scripts allow-same-origin");
  document.body.append(frame);
  const bridge = new AppBridge(null, { name: "os-sup-test-host", version: "0" },
    { serverTools: {}, serverResources: {} },
    { hostContext: { theme: "dark", displayMode: "inline", containerDimensions: { maxHeight: 2000, width: 880 } } });
  bridge.oncalltool = (params) => ask("tools/call", params);
  bridge.onreadresource = (params) => ask("resources/read", params);
  bridge.addEventListener("sizechange", ({ height }) => {
    window.sizes.push(height);
    if (height != null) frame.style.height = height + "px";
  });
  bridge.oninitialized = async () => {
    await bridge.sendToolInput({ arguments: args });
    await bridge.sendToolResult(result);
    window.shown = true;
  };
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  window.bridge = bridge;
  window.view = frame;
  frame.srcdoc = html.replace("<head>", `<head><meta http-equiv="Content-Security-Policy" content="${CSP}">`);
};
window.hostReady = true;
</script></body></html>
"#;

/// Serves [`HOST_PAGE`] at `/` and the files under `modules` at `/node_modules/…`.
async fn serve_host(listener: tokio::net::TcpListener, modules: std::path::PathBuf) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let modules = modules.clone();
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

/// Evaluates `expression` in the view (`doc` is its document).
fn in_view(expression: &str) -> String {
    format!("(() => {{ const doc = window.view?.contentDocument; if (!doc) return null; return {expression}; }})()")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_host_draws_the_tree_view_and_refreshes_it_through_itself() {
    if !common::chromium::chromium_installed() {
        return;
    }
    let Some(modules) = sdk_modules() else {
        return;
    };
    let server = Server::start();
    let mut c = server.client().await;
    c.start_demo("demo").await;
    let mut ui = RawSession::open(&server.addr, ui_capabilities()).await;
    let args = json!({"name": "demo"});
    let result = ui
        .result(
            "tools/call",
            json!({"name": "supervision_tree", "arguments": args}),
        )
        .await;
    let read = ui
        .result("resources/read", json!({"uri": "ui://os-sup/tree.html"}))
        .await;
    let html = read["contents"][0]["text"].as_str().unwrap().to_string();
    let mut labels = Vec::new();
    for root in result["structuredContent"]["roots"].as_array().unwrap() {
        tree_labels(root, &mut labels);
    }
    assert!(labels.len() >= 8, "the demo's tree: {result}");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let page_addr = listener.local_addr().unwrap();
    tokio::spawn(serve_host(listener, modules));
    let mut page = common::chromium::Browser::drive(&format!("http://{page_addr}/"), 920, 400);
    let limit = std::time::Duration::from_secs(30);
    let fail = |page: &mut common::chromium::Browser, what: &str| -> ! {
        panic!("{what}; chromium said:\n{}", page.log())
    };
    if page.wait_for("window.hostReady === true", limit).is_none() {
        fail(&mut page, "the host page never loaded the SDK");
    }
    page.eval(&format!("show({}, {args}, {result})", Value::String(html)));
    if page.wait_for("window.shown === true", limit).is_none() {
        fail(&mut page, "the view never took the tool's result");
    }

    // Every supervisor and worker of the result is drawn, and nothing else.
    let drawn_expression = in_view(
        "[...doc.querySelectorAll('#tree summary, #tree div.leaf:not(.pid)')].map(e => e.textContent)",
    );
    if page
        .wait_for(&format!("{drawn_expression}?.length > 0"), limit)
        .is_none()
    {
        fail(&mut page, "the view drew no tree");
    }
    let drawn: Vec<String> = serde_json::from_value(page.eval(&drawn_expression)).unwrap();
    assert_eq!(
        drawn.len(),
        labels.len(),
        "drawn {drawn:?}, in the result {labels:?}"
    );
    for label in &labels {
        assert!(
            drawn.iter().any(|d| d.contains(label.as_str())),
            "{label} not drawn: {drawn:?}"
        );
    }
    // The host's theme, then a change of it; the view's size reached the host.
    let theme = in_view("doc.documentElement.dataset.theme");
    assert_eq!(page.eval(&theme), json!("dark"));
    page.eval("bridge.setHostContext({ ...bridge.getHostContext?.() , theme: 'light' })");
    if page
        .wait_for(&format!("{theme} === 'light'"), limit)
        .is_none()
    {
        fail(&mut page, "the view did not follow the host's theme");
    }
    let drawn_height = in_view("doc.documentElement.getBoundingClientRect().height");
    let told = format!("window.sizes.at(-1) === Math.ceil({drawn_height})");
    if page.wait_for(&told, limit).is_none() {
        let sizes = page.eval("window.sizes");
        let height = page.eval(&drawn_height);
        fail(
            &mut page,
            &format!("the host was told the sizes {sizes}, the view is {height} high"),
        );
    }

    // Refresh: the view asks the host, the host asks the server (this test), the view redraws.
    page.eval(&in_view("(doc.getElementById('refresh').click(), true)"));
    if page.wait_for("window.asked.length === 1", limit).is_none() {
        fail(&mut page, "the view's refresh never reached the host");
    }
    let asked = page.eval("window.asked[0]");
    assert_eq!(asked["method"], "tools/call", "{asked}");
    assert_eq!(asked["params"]["name"], "supervision_tree", "{asked}");
    assert_eq!(asked["params"]["arguments"], args, "{asked}");
    let again = ui.result("tools/call", asked["params"].clone()).await;
    page.eval(&format!("answer(0, {again}), true"));
    let meta = in_view("doc.getElementById('meta').textContent");
    if page
        .wait_for(&format!("{meta}.endsWith(' processes')"), limit)
        .is_none()
    {
        fail(&mut page, "the view did not redraw after the refresh");
    }
    let redrawn: Vec<String> = serde_json::from_value(page.eval(&drawn_expression)).unwrap();
    assert!(redrawn.len() >= labels.len() - 2, "{redrawn:?}");

    if std::env::var("OS_SUP_WRITE_DOCS").is_ok() {
        page.eval("bridge.setHostContext({ theme: 'dark' }), true");
        page.wait_for(&format!("{theme} === 'dark'"), limit);
        let png = page.screenshot();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/mcp-apps-tree.png");
        std::fs::write(&path, png).unwrap();
        eprintln!("wrote {}", path.display());
    }
}
