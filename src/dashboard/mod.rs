//! The live web dashboard for the people watching. It is one self-contained page (HTML, CSS and
//! plain JavaScript embedded in the binary, nothing fetched from anywhere else) and a small JSON
//! API under `/api/` that it polls. Served on the `--http` listener, whose Host/Origin and token
//! checks ([`crate::mcp::serve_http`]) cover every route here.
//!
//! It reads nodes only through [`crate::node::Registry`] (the same calls as the tools) and the
//! tool calls through [`crate::mcp::Activity`]; never the helper, the distribution client or raw
//! terms (`tests/layers.rs`). It must never slow the MCP path: API requests are capped
//! ([`MAX_API_REQUESTS`] at once, the next gets 503 and the page retries), each helper call it
//! makes is bounded in time, and no lock is held across an await.
//!
//! Mutating endpoints (`POST /api/nodes/{name}/start|stop|restart`) exist only when the server
//! is not `--read-only`, and need the header `X-OS-Sup: 1`: a cross-site form cannot send it,
//! and a cross-site `fetch` that sets it needs a CORS preflight this server never grants. So
//! does the one read that keeps a node busy for a while on request, the profile of a process
//! (`GET /api/nodes/{name}/profile`, also under `--read-only`: it runs no code and changes
//! nothing).

mod api;

use crate::mcp::Activity;
use crate::node::Registry;
use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Dashboard API requests served at once; the page makes at most five at a time.
pub const MAX_API_REQUESTS: usize = 8;

/// The page may load only what this server serves, and nothing may frame it.
const CSP: &str = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

const PAGE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("app.js");
/// The drawing code (what app.js draws with); the MCP Apps views (src/mcp/apps.rs) inline it
/// and the style too.
const DRAW: &str = include_str!("draw.js");
const STYLE: &str = include_str!("style.css");

/// What the dashboard's handlers share.
#[derive(Clone)]
struct Dashboard {
    registry: Arc<Registry>,
    activity: Arc<Activity>,
    read_only: bool,
    /// Tells the page that the server it talks to is a new one (reset its cursors).
    instance: u64,
    permits: Arc<Semaphore>,
}

/// The dashboard's routes: `/`, its scripts and style, and `/api/…`. Mutating routes are
/// left out when `read_only`.
pub fn router(registry: Arc<Registry>, activity: Arc<Activity>, read_only: bool) -> Router {
    let dashboard = Dashboard {
        registry,
        activity,
        read_only,
        instance: rand::random::<u32>() as u64,
        permits: Arc::new(Semaphore::new(MAX_API_REQUESTS)),
    };
    let mut api = Router::new()
        .route("/api/nodes", get(api::nodes))
        .route("/api/nodes/{name}/tree", get(api::tree))
        .route("/api/nodes/{name}/processes", get(api::processes))
        .route("/api/nodes/{name}/profile", get(api::profile))
        .route("/api/nodes/{name}/logs", get(api::logs))
        .route("/api/nodes/{name}/vitals", get(api::vitals))
        .route("/api/clusters", get(api::clusters))
        .route("/api/activity", get(api::activity));
    if !read_only {
        api = api.route("/api/nodes/{name}/{action}", post(api::act));
    }
    let api = api
        .layer(axum::middleware::from_fn_with_state(
            dashboard.clone(),
            api::one_of_few,
        ))
        .with_state(dashboard);
    Router::new()
        .route(
            "/",
            get(|| async { page("text/html; charset=utf-8", PAGE) }),
        )
        .route(
            "/draw.js",
            get(|| async { page("text/javascript; charset=utf-8", DRAW) }),
        )
        .route(
            "/app.js",
            get(|| async { page("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/style.css",
            get(|| async { page("text/css; charset=utf-8", STYLE) }),
        )
        .merge(api)
        .layer(axum::middleware::from_fn(strict_headers))
}

fn page(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Every dashboard response: the strict CSP, no sniffing, no caching, no referrer.
async fn strict_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}
