//! MCP Apps (`io.modelcontextprotocol/ui`) against the real server over real sockets: a client
//! that does not declare the extension gets the same bytes as before; one that does sees the
//! views linked from exactly their tools, and each view reads back as one self-contained page.

mod common;

use common::raw::{ui_capabilities, with_client, RawSession};
use common::Server;
use serde_json::{json, Value};

/// The views and the tool each is linked from.
const VIEWS: [(&str, &str); 3] = [
    ("supervision_tree", "ui://os-sup/tree.html"),
    ("process_info", "ui://os-sup/profile.html"),
    ("diagnose", "ui://os-sup/vitals.html"),
];
const MIME_TYPE: &str = "text/html;profile=mcp-app";

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

/// On the 2026-07-28 revision a client says what it supports in each request: the same
/// session gets the views' links when a request declares the extension, and today's bytes
/// when it does not.
#[tokio::test]
async fn each_request_of_the_2026_07_28_revision_is_answered_for_its_own_capabilities() {
    let server = Server::start();
    let mut session = RawSession::connect(&server.addr).await;
    let plain = with_client(json!({}), json!({}));
    let other = with_client(
        json!({}),
        json!({"extensions": {"io.modelcontextprotocol/foo": {}}}),
    );
    let ui = with_client(json!({}), ui_capabilities());
    // An answer's bytes from its result on (the ids differ).
    let result = |line: String| line[line.find("\"result\"").expect(&line)..].to_string();
    for method in ["tools/list", "resources/list"] {
        let today = result(session.line(method, plain.clone()).await);
        assert!(!today.contains("ui://"), "{today}");
        assert_eq!(
            result(session.line(method, other.clone()).await),
            today,
            "{method}"
        );
        let with_views = result(session.line(method, ui.clone()).await);
        assert!(with_views.contains("ui://os-sup/tree.html"), "{with_views}");
    }
    let tools: Value = serde_json::from_str(&session.line("tools/list", ui).await).unwrap();
    // The cache hints of the revision stay (`list_tools` is written as rmcp's macro writes it).
    assert_eq!(tools["result"]["ttlMs"], 0, "{tools}");
    assert_eq!(tools["result"]["cacheScope"], "public", "{tools}");
    let linked = tools["result"]["tools"].as_array().unwrap().iter();
    assert_eq!(
        linked.filter(|t| t.get("_meta").is_some()).count(),
        VIEWS.len()
    );
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
