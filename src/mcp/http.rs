//! Streamable HTTP: MCP at `/mcp` (rmcp's service under axum) with Origin and Host validation
//! and optional bearer-token auth, plus an unauthenticated `GET /health` that reveals counts
//! only (no names, no logs, no secrets).

use super::McpServer;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Request bodies larger than this are refused.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

#[derive(Clone)]
struct Shared {
    server: McpServer,
    token: Option<Arc<str>>,
    sessions: Arc<LocalSessionManager>,
    started: Instant,
}

/// Serves HTTP on `listener` until `shutdown`. With `token`, `/mcp` requires
/// `Authorization: Bearer <token>`.
pub async fn serve_http(
    listener: TcpListener,
    server: McpServer,
    token: Option<String>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let local = listener.local_addr()?;
    let sessions = Arc::new(LocalSessionManager::default());
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown.child_token())
        .with_allowed_hosts(allowed_hosts(local))
        // The MCP spec requires Origin validation: only pages served from this host may call.
        .with_allowed_origins(allowed_origins(local))
        .with_max_request_body_bytes(MAX_BODY_BYTES);
    let factory = server.clone();
    let mcp = StreamableHttpService::new(move || Ok(factory.clone()), sessions.clone(), config);
    let shared = Shared {
        server,
        token: token.map(Into::into),
        sessions,
        started: Instant::now(),
    };
    let protected =
        Router::new()
            .nest_service("/mcp", mcp)
            .layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                require_token,
            ));
    let app = Router::new()
        .route("/health", get(health))
        .with_state(shared)
        .merge(protected);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

fn allowed_hosts(local: SocketAddr) -> Vec<String> {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
        .map(String::from)
        .into();
    hosts.push(local.ip().to_string());
    hosts
}

fn allowed_origins(local: SocketAddr) -> Vec<String> {
    let mut origins: Vec<String> = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        .map(String::from)
        .into();
    if !local.ip().is_loopback() {
        origins.push(format!("http://{}:*", local.ip()));
    }
    origins
}

async fn require_token(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    if let Some(token) = &shared.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !constant_time_eq(given.as_bytes(), token.as_bytes()) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "missing or wrong bearer token\n",
            )
                .into_response();
        }
    }
    next.run(request).await
}

/// Compares without an early exit, so the time taken says nothing about where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn health(State(shared): State<Shared>) -> Json<serde_json::Value> {
    let mut nodes: BTreeMap<String, usize> = BTreeMap::new();
    for node in shared.server.registry().list_nodes() {
        *nodes.entry(node.state.to_string()).or_default() += 1;
    }
    let http_sessions = shared.sessions.sessions.read().await.len();
    Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_ms": shared.started.elapsed().as_millis() as u64,
        "sessions": {"http": http_sessions, "stream": shared.server.open_sessions()},
        "nodes": nodes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_fully() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
