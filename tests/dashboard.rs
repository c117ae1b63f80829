//! The web dashboard in a real browser: headless Chromium driven over the DevTools protocol
//! (tests/common/chromium.rs) against the real server and the demo fixture, started through
//! MCP. And the dashboard's HTTP rules, checked with raw requests: foreign Host and Origin,
//! the token (bearer or the cookie `/?token=` sets), the header mutating requests need.

mod common;

use common::chromium::{chromium_installed, Browser};
use common::{demo_app, history_span, wait_until, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Generous bound for what the page shows on its own schedule (boot, first polls).
const SHOWS_UP: Duration = Duration::from_secs(30);

/// A server that also serves the dashboard, on a port of its choosing.
fn dashboard_server() -> Server {
    Server::start_with(&["--http", "127.0.0.1:0"])
}

fn http_addr(server: &Server) -> String {
    server.logged("http")
}

/// A browser showing `server`'s dashboard in a window of `width` × `height`.
fn open_page(server: &Server, width: u32, height: u32) -> Browser {
    Browser::drive(&format!("http://{}/", http_addr(server)), width, height)
}

/// Writes what `page` shows to `docs/<file>` (a PNG).
fn save_screenshot(page: &mut Browser, file: &str) {
    let png = page.screenshot();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, png).unwrap();
    eprintln!("wrote {}", path.display());
}

/// The text of the element `selector` (empty when absent), as a JS expression.
fn text_of(selector: &str) -> String {
    format!("(document.querySelector({selector:?})?.textContent ?? '')")
}

fn wait(page: &mut Browser, what: &str, expression: &str) -> Duration {
    page.wait_for(expression, SHOWS_UP).unwrap_or_else(|| {
        panic!(
            "the page never showed {what} ({expression}); its body:\n{}\nchromium said:\n{}",
            page.eval("document.body.innerText"),
            page.log()
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_follows_a_node_live_and_stops_it() {
    if !chromium_installed() {
        return;
    }
    let server = dashboard_server();
    let mut c = server.client().await;
    c.start_demo("demo").await;
    let mut page = open_page(&server, 1400, 1000);

    let state = text_of("[data-node=demo] .state");
    wait(
        &mut page,
        "the node running",
        &format!("{state} === 'running'"),
    );

    // The tree: the fixture's supervisors with their strategies.
    let summaries = "[...document.querySelectorAll('#tree summary')].map(s => s.textContent)";
    wait(
        &mut page,
        "the supervision tree",
        &format!("{summaries}.some(t => t.includes('DemoApp.WorkerSup one_for_one'))"),
    );
    let tree = page.eval(summaries);
    let has = |needle: &str| {
        tree.as_array()
            .unwrap()
            .iter()
            .any(|t| t.as_str().unwrap().contains(needle))
    };
    for supervisor in [
        "DemoApp.Supervisor one_for_one",
        "DemoApp.Registry one_for_all",
        "DemoApp.Workers rest_for_one",
        "DemoApp.WorkerSup one_for_one",
        "DemoApp.BulkSup one_for_one",
    ] {
        assert!(has(supervisor), "the tree shows {supervisor}: {tree}");
    }
    wait(
        &mut page,
        "the top processes",
        "document.querySelectorAll('#procs tbody tr').length > 5",
    );

    // A Logger.error evaluated through MCP shows up in the log pane without a reload.
    page.eval("window.sameDocument = true");
    let marker = format!("dashboard-marker-{}", std::process::id());
    c.eval(
        "demo",
        &format!("require Logger; Logger.error(\"{marker}\"); :ok"),
    )
    .await;
    let evaluated = Instant::now();
    let in_log = format!(
        "[...document.querySelectorAll('#log .line.error')].some(l => l.textContent.includes('{marker}'))"
    );
    wait(&mut page, "the Logger.error line", &in_log);
    let latency = evaluated.elapsed();
    eprintln!("the Logger.error line was in the log pane {latency:?} after eval returned");
    assert!(
        latency <= Duration::from_secs(1),
        "the log pane showed the new line only after {latency:?}"
    );
    assert_eq!(page.eval("window.sameDocument"), json!(true), "no reload");

    // The eval appears in the activity feed, with its code.
    wait(
        &mut page,
        "the eval in the activity feed",
        &format!(
            "[...document.querySelectorAll('#activity [data-tool=eval] .code')].some(c => c.textContent.includes('{marker}'))"
        ),
    );

    // The level filter and the search narrow the pane.
    page.eval("document.getElementById('search').value = 'no-such-line-anywhere'; document.getElementById('search').dispatchEvent(new Event('input'))");
    assert_eq!(page.eval(&in_log), json!(false), "search hides it");
    page.eval(&format!("document.getElementById('search').value = '{marker}'; document.getElementById('search').dispatchEvent(new Event('input')); document.getElementById('level').value = 'error'; document.getElementById('level').dispatchEvent(new Event('change'))"));
    assert_eq!(page.eval(&in_log), json!(true), "search and level keep it");

    // A process whose mailbox grows is marked in the tree.
    c.eval(
        "demo",
        "pid = Process.whereis(DemoApp.Cache); :sys.suspend(pid); \
         spawn(fn -> for _ <- 1..150, do: (send(pid, :tick); Process.sleep(20)) end); :ok",
    )
    .await;
    wait(
        &mut page,
        "the growing mailbox mark",
        "[...document.querySelectorAll('#tree .leaf')].some(l => l.textContent.includes('DemoApp.Cache') && l.querySelector('.grow'))",
    );
    c.eval("demo", ":sys.resume(Process.whereis(DemoApp.Cache)); :ok")
        .await;

    // Stop from the page: a confirmation dialog, then the node stops.
    page.eval("document.querySelector('[data-node=demo] button[data-action=stop]').click()");
    assert_eq!(
        page.eval("document.getElementById('confirm').open"),
        json!(true)
    );
    page.eval("document.getElementById('confirm-ok').click()");
    c.wait_state("demo", "stopped", Duration::from_secs(60))
        .await;
    wait(
        &mut page,
        "the node stopped",
        &format!("{state} === 'stopped'"),
    );
    // A stopped node shows its last exit, and its log stays.
    wait(
        &mut page,
        "the last exit",
        &format!("{}.includes('last exit')", text_of("#node-note")),
    );
    assert_eq!(page.eval(&in_log), json!(true), "the log is kept");
    assert_eq!(
        page.eval("document.querySelectorAll('[data-node=demo] button[data-action=start]').length"),
        json!(1),
        "a stopped node offers start"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_pages_offer_no_controls() {
    if !chromium_installed() {
        return;
    }
    let project = demo_app();
    let server = Server::start_with(&[
        "--http",
        "127.0.0.1:0",
        "--read-only",
        "--project",
        project.to_str().unwrap(),
    ]);
    let mut c = server.client().await;
    c.wait_state("demo_app", "running", Duration::from_secs(60))
        .await;
    let http = http_addr(&server);
    let mut page = Browser::drive(&format!("http://{http}/"), 900, 700);
    let state = text_of("[data-node=demo_app] .state");
    wait(
        &mut page,
        "the node running",
        &format!("{state} === 'running'"),
    );
    wait(
        &mut page,
        "the read-only badge",
        "!document.getElementById('mode').hidden",
    );
    assert_eq!(
        page.eval("document.querySelectorAll('button[data-action]').length"),
        json!(0),
        "no start/stop/restart under --read-only"
    );
    // Nor can a request do it.
    let (status, _, _) = request(
        &http,
        "POST",
        "/api/nodes/demo_app/stop",
        &[("X-OS-Sup", "1"), ("Origin", &format!("http://{http}"))],
    )
    .await;
    assert!(
        (400..500).contains(&status),
        "stop under --read-only: {status}"
    );
    assert_eq!(c.node_status("demo_app").await["state"], "running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_reconnects_after_a_server_restart() {
    if !chromium_installed() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let http = format!("127.0.0.1:{port}");
    let server = Server::start_with(&["--http", &http]);
    let mut page = Browser::drive(&format!("http://{http}/"), 800, 600);
    let link = text_of("#link");
    wait(&mut page, "the link up", &format!("{link} === 'live'"));
    drop(server);
    wait(
        &mut page,
        "the link down",
        &format!("{link}.startsWith('disconnected')"),
    );
    let server = Server::start_with(&["--http", &http]);
    let mut c = server.client().await;
    c.start_erl("second").await;
    wait(
        &mut page,
        "the new server's node",
        &format!("{} === 'running'", text_of("[data-node=second] .state")),
    );
    assert_eq!(page.eval(&link), json!("live"));
}

/// One raw HTTP/1.1 request (the test chooses every header, `Host` included): status,
/// headers (lowercase names) and body.
async fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, Vec<(String, String)>, String) {
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head += &format!("Host: {addr}\r\n");
    }
    for (name, value) in headers {
        head += &format!("{name}: {value}\r\n");
    }
    head += "\r\n";
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer))
        .await
        .expect("an answer within 30 s")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body.to_string())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[tokio::test]
async fn the_dashboard_keeps_the_http_rules() {
    const TOKEN: &str = "dashboard-t0ken";
    let server = Server::start_with_env(&["--http", "127.0.0.1:0"], &[("OS_SUP_MCP_TOKEN", TOKEN)]);
    let http = http_addr(&server);
    let port = http.rsplit(':').next().unwrap();
    let bearer = format!("Bearer {TOKEN}");
    let evil_host = format!("evil.example:{port}");
    for path in ["/", "/api/nodes", "/api/activity", "/app.js"] {
        let (status, _, _) = request(&http, "GET", path, &[]).await;
        assert_eq!(status, 401, "{path} without the token");
        let (status, _, _) = request(&http, "GET", path, &[("Host", &evil_host)]).await;
        assert_eq!(status, 403, "{path} for a foreign Host");
        let evil_origin = [
            ("Authorization", bearer.as_str()),
            ("Origin", "http://evil.example"),
        ];
        let (status, _, _) = request(&http, "GET", path, &evil_origin).await;
        assert_eq!(status, 403, "{path} from a foreign Origin");
        let (status, _, _) = request(&http, "GET", path, &[("Authorization", &bearer)]).await;
        assert_eq!(status, 200, "{path} with the bearer token");
    }

    // `/?token=` sets an HttpOnly, SameSite=Strict cookie and drops the token from the URL.
    let (status, _, _) = request(&http, "GET", "/?token=wrong", &[]).await;
    assert_eq!(status, 401);
    let (status, headers, _) = request(&http, "GET", &format!("/?token={TOKEN}"), &[]).await;
    assert_eq!(status, 303, "{headers:?}");
    assert_eq!(header(&headers, "location"), Some("/"));
    let set = header(&headers, "set-cookie")
        .expect("a cookie")
        .to_string();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_string();
    let (status, headers, body) = request(&http, "GET", "/", &[("Cookie", &cookie)]).await;
    assert_eq!(status, 200);
    assert!(body.contains("<script src=\"/app.js\""), "{body}");
    let csp = header(&headers, "content-security-policy").unwrap_or("");
    assert!(csp.contains("default-src 'self'"), "{csp}");
    let (status, _, body) = request(&http, "GET", "/api/nodes", &[("Cookie", &cookie)]).await;
    assert_eq!(status, 200, "{body}");
    let nodes: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(nodes["server"]["read_only"], false, "{nodes}");
    let wrong = format!("os_sup_token_{port}=nope");
    let (status, _, _) = request(&http, "GET", "/api/nodes", &[("Cookie", &wrong)]).await;
    assert_eq!(status, 401, "a wrong cookie");
    // The cookie is for the pages only, never for MCP.
    let (status, _, _) = request(&http, "POST", "/mcp", &[("Cookie", &cookie)]).await;
    assert_eq!(status, 401, "/mcp takes no cookie");

    // Mutating requests need the page's header, and a page of ours.
    let stop = "/api/nodes/nosuch/stop";
    let (status, _, body) = request(&http, "POST", stop, &[("Cookie", &cookie)]).await;
    assert_eq!(status, 403, "no X-OS-Sup: {body}");
    assert!(body.contains("X-OS-Sup"), "{body}");
    let cross = [
        ("Cookie", cookie.as_str()),
        ("X-OS-Sup", "1"),
        ("Origin", "http://evil.example"),
    ];
    let (status, _, _) = request(&http, "POST", stop, &cross).await;
    assert_eq!(status, 403, "a cross-site POST");
    let ours = format!("http://{http}");
    let fine = [
        ("Cookie", cookie.as_str()),
        ("X-OS-Sup", "1"),
        ("Origin", ours.as_str()),
    ];
    let (status, _, body) = request(&http, "POST", stop, &fine).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("no node named `nosuch`"), "{body}");
}

/// Writes `docs/dashboard.png`: the page with the demo fixture running after a few tool calls.
/// Run by hand: `cargo test --test dashboard -- --ignored screenshot`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes docs/dashboard.png"]
async fn screenshot() {
    let server = dashboard_server();
    let mut c = server.client().await;
    c.start_demo("demo").await;
    let mut page = open_page(&server, 1500, 1050);
    c.eval(
        "demo",
        "require Logger; Logger.info(\"cache warmed: 3 entries\"); \
         Logger.warning(\"worker 2 is slow: 812 ms\"); :ok",
    )
    .await;
    c.ok("supervision_tree", json!({"name": "demo"})).await;
    c.ok(
        "processes",
        json!({"name": "demo", "sort_by": "reductions", "window_ms": 500, "limit": 5}),
    )
    .await;
    c.eval(
        "demo",
        "DemoApp.Counter |> GenServer.whereis() |> Process.info(:message_queue_len)",
    )
    .await;
    c.eval(
        "demo",
        "require Logger; Logger.error(\"payment gateway timeout after 5000 ms\"); :ok",
    )
    .await;
    wait(
        &mut page,
        "the tree, the processes, the log and the feed",
        "document.querySelectorAll('#tree summary').length > 3 \
         && document.querySelectorAll('#procs tbody tr').length > 5 \
         && document.querySelectorAll('#log .line.error').length > 0 \
         && document.querySelectorAll('#activity li[data-call]').length >= 5",
    );
    save_screenshot(&mut page, "dashboard.png");
}

/// The node's vital signs, plotted by the page itself from the history the server keeps: a
/// node whose binary memory grows shows a rising series, and every plot has its series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_plots_the_vital_signs_the_server_keeps() {
    if !chromium_installed() {
        return;
    }
    let server = dashboard_server();
    let mut c = server.client().await;
    c.start_ailment("docs", "binary").await;
    let mut page = open_page(&server, 1400, 1000);
    let binary = "document.querySelector('#vitals polyline[data-series=memory_binary]')";
    wait(
        &mut page,
        "the binary memory series with 5 points",
        &format!("{binary} && {binary}.getAttribute('points').split(' ').length >= 5"),
    );
    let plots = page.eval("document.querySelectorAll('#vitals figure svg').length");
    assert_eq!(plots, json!(4), "memory, limits, run queue, errors");
    // Rising: the last point is higher on the page (a smaller y) than the first.
    let ys = page.eval(&format!(
        "{binary}.getAttribute('points').split(' ').map(p => Number(p.split(',')[1]))"
    ));
    let ys: Vec<f64> = serde_json::from_value(ys).unwrap();
    assert!(ys.last().unwrap() < ys.first().unwrap(), "{ys:?}");
    let legend = page.eval("document.querySelector('#vitals .legend').innerText");
    assert!(
        legend.as_str().unwrap().contains("memory_binary"),
        "{legend}"
    );
}

/// Writes `docs/dashboard-vitals.png`: the vital signs of a node whose binary memory grows.
/// Run by hand: `cargo test --test dashboard -- --ignored vitals_screenshot`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes docs/dashboard-vitals.png"]
async fn vitals_screenshot() {
    let server = dashboard_server();
    let mut c = server.client().await;
    c.start_ailment("docs", "binary").await;
    // The picture shows 40 s of the node's history.
    wait_until(
        Duration::from_secs(90),
        "40 s of history",
        async || history_span(&c.vitals("docs").await),
        |span| *span >= Duration::from_secs(40),
    )
    .await;
    let mut page = open_page(&server, 1400, 700);
    wait(
        &mut page,
        "four plots",
        "document.querySelectorAll('#vitals polyline').length >= 8",
    );
    save_screenshot(&mut page, "dashboard-vitals.png");
}

/// A cluster this server started, drawn by the page: its members on a circle, a line where two
/// see each other, a dashed one where a partition cuts them; a click picks the member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_draws_a_cluster_and_its_split() {
    if !chromium_installed() {
        return;
    }
    let server = dashboard_server();
    let mut c = server.client().await;
    c.ok(
        "start",
        json!({"name": "c", "path": common::cluster_app(), "nodes": 3}),
    )
    .await;
    let mut page = open_page(&server, 1400, 1000);
    wait(
        &mut page,
        "three members, all linked",
        "document.querySelectorAll('#clusters [data-cluster=c] line.link').length === 3",
    );
    c.ok("partition", json!({"name": "c", "side": ["c-1"]}))
        .await;
    wait(
        &mut page,
        "the split: c-1 cut from both, c-2 and c-3 linked",
        "document.querySelectorAll('#clusters figure.split line.cut').length === 2 \
         && document.querySelector('#clusters line.link')?.dataset.pair === 'c-2 c-3'",
    );
    let caption = page.eval("document.querySelector('#clusters figcaption').textContent");
    assert_eq!(caption, json!("c split: [c-1] | [c-2, c-3]"));
    page.eval(
        "document.querySelector('#clusters g[data-member=c-2]')\
         .dispatchEvent(new MouseEvent('click', {bubbles: true}))",
    );
    wait(
        &mut page,
        "c-2 picked",
        &format!("{} === 'Node c-2'", text_of("#node-title")),
    );
}

/// Opens the page on a node of the ailments fixture whose `Ailments.Indexer` burns a third
/// of a core (`AILMENT=cpu`), profiles the indexer from its row of the top processes, and
/// waits for the flame graph.
async fn flame_graph_of_the_indexer(server: &Server, width: u32, height: u32) -> Browser {
    let mut c = server.client().await;
    c.start_ailment("cpu", "cpu").await;
    let mut page = open_page(server, width, height);
    wait(
        &mut page,
        "the node running",
        &format!("{} === 'running'", text_of("[data-node=cpu] .state")),
    );
    page.eval(
        "document.getElementById('sort-by').value = 'reductions'; \
         document.getElementById('sort-by').dispatchEvent(new Event('change'))",
    );
    wait(
        &mut page,
        "the indexer's profile button, clicked",
        "(() => { const row = [...document.querySelectorAll('#procs tbody tr')]\
           .find(r => r.textContent.includes('Ailments.Indexer')); \
           const button = row?.querySelector('button[data-profile]'); \
           button?.click(); return !!button; })()",
    );
    wait(
        &mut page,
        "the flame graph",
        "[...document.querySelectorAll('#flame g.frame text')].some(t => t.textContent.includes('rebuild'))",
    );
    page
}

/// A process's profile from the page: the hot functions and a flame graph of its folded
/// stacks, the application's `rebuild/1` labelled, coloured as the application's and as wide
/// as the share of samples it was on the stack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_draws_a_flame_graph_of_a_process() {
    if !chromium_installed() {
        return;
    }
    let server = dashboard_server();
    let mut page = flame_graph_of_the_indexer(&server, 1400, 1000).await;
    let rebuild = "[...document.querySelectorAll('#flame g.frame')]\
                   .filter(g => g.dataset.frame === 'Elixir.Ailments.Indexer:rebuild/1')";
    let frames = page.eval(&format!(
        "{rebuild}.map(g => ({{label: g.querySelector('text')?.textContent, app: g.classList.contains('app'), \
          title: g.querySelector('title').textContent, width: Number(g.querySelector('rect').getAttribute('width'))}}))"
    ));
    let frames = frames.as_array().expect("rebuild frames");
    assert!(!frames.is_empty(), "a rebuild/1 frame");
    let first = &frames[0];
    assert!(
        first["label"]
            .as_str()
            .is_some_and(|l| l.starts_with("Ailments.Indexer.rebuild")),
        "{first}"
    );
    assert_eq!(first["app"], json!(true), "the application's: {first}");
    let title = first["title"].as_str().unwrap();
    assert!(
        title.starts_with("Elixir.Ailments.Indexer:rebuild/1\n") && title.ends_with(" %"),
        "the full frame and its share on hover: {title}"
    );
    // The indexer spends its busy time in rebuild/1: its frames span most of the graph.
    let all =
        page.eval("Number(document.querySelector('#flame g.all rect').getAttribute('width'))");
    let wide: f64 = frames.iter().filter_map(|f| f["width"].as_f64()).sum();
    assert!(
        wide > all.as_f64().unwrap() / 2.0,
        "rebuild/1 spans {wide} of {all} px"
    );
    let hot = page.eval(&text_of("#profile-hot li"));
    assert!(
        hot.as_str()
            .unwrap()
            .starts_with("Ailments.Indexer.rebuild/1 ("),
        "{hot}"
    );
    let meta = page.eval(&text_of("#profile-meta"));
    assert!(
        meta.as_str()
            .unwrap()
            .starts_with("Ailments.Indexer: running or runnable in"),
        "{meta}"
    );

    // The page's request carries `X-OS-Sup: 1`; one without it (another site's `<img>`) is
    // refused before anything is sampled.
    let (status, _, body) = request(
        &http_addr(&server),
        "GET",
        "/api/nodes/cpu/profile?pid=Ailments.Indexer",
        &[],
    )
    .await;
    assert_eq!(status, 403, "{body}");
}

/// Writes `docs/flamegraph.png`: the profile of the ailments fixture's busy indexer.
/// Run by hand: `cargo test --test dashboard -- --ignored flamegraph_screenshot`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes docs/flamegraph.png"]
async fn flamegraph_screenshot() {
    let server = dashboard_server();
    let mut page = flame_graph_of_the_indexer(&server, 1100, 1150).await;
    page.eval(
        "document.getElementById('vitals-box').open = false; \
         document.getElementById('tree-box').open = false; \
         document.getElementById('logs-box').open = false; \
         document.getElementById('procs-box').scrollIntoView({block: 'start'})",
    );
    save_screenshot(&mut page, "flamegraph.png");
}
