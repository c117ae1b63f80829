//! Streamable HTTP: MCP at `/mcp` (rmcp's service under axum), `GET /health` and the
//! dashboard's pages. MCP takes an optional bearer token and has a session cap; `/health`
//! reveals counts only (no names, no logs, no secrets); the pages are those given in
//! [`HttpOptions::pages`]. Every request, `/health` included, must name one of this server's
//! hosts in `Host` and, if it has an `Origin`, come from a page of one of them (DNS rebinding,
//! cross-site). Pages take the token as a bearer header too, or as the cookie that visiting
//! `/?token=…` once sets (HttpOnly, SameSite=Strict, then a redirect so the token does not stay
//! in the address bar).

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
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Request bodies larger than this are refused.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// What the HTTP listener accepts, beyond the MCP server itself.
#[derive(Clone, Debug, Default)]
pub struct HttpOptions {
    /// With a token, `/mcp` requires `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Extra names the server may be addressed by (`--allowed-host`), e.g. a DNS name that
    /// points at this machine or a reverse proxy's name.
    pub allowed_hosts: Vec<String>,
    /// Most MCP sessions open at once; a new session beyond it gets 503.
    pub max_sessions: usize,
    /// More routes served under the same Host/Origin and token rules (the dashboard).
    pub pages: Option<Router>,
}

#[derive(Clone)]
struct Shared {
    server: McpServer,
    token: Option<Arc<str>>,
    /// Host names (lowercase, no port) requests may be addressed to.
    hosts: Arc<[String]>,
    max_sessions: usize,
    sessions: Arc<LocalSessionManager>,
    started: Instant,
    /// The cookie that carries the token for pages; named by port, as cookies are not.
    cookie: Arc<str>,
}

/// Serves HTTP on `listener` until `shutdown`.
pub async fn serve_http(
    listener: TcpListener,
    server: McpServer,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let local = listener.local_addr()?;
    let hosts = allowed_hosts(local.ip(), &options.allowed_hosts);
    let origins = allowed_origins(&hosts);
    tracing::debug!(?hosts, "HTTP accepts these Host names");
    let sessions = Arc::new(LocalSessionManager::default());
    // rmcp checks the same lists again; ours runs first and also covers `/health`.
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown.child_token())
        .with_allowed_hosts(hosts.clone())
        .with_allowed_origins(origins.clone())
        .with_max_request_body_bytes(MAX_BODY_BYTES);
    let factory = server.clone();
    let mcp = StreamableHttpService::new(move || Ok(factory.clone()), sessions.clone(), config);
    let shared = Shared {
        server,
        token: options.token.map(Into::into),
        hosts: hosts.into(),
        max_sessions: options.max_sessions.max(1),
        sessions,
        started: Instant::now(),
        cookie: format!("os_sup_token_{}", local.port()).into(),
    };
    let protected =
        Router::new()
            .nest_service("/mcp", mcp)
            .layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                require_token_and_room,
            ));
    let mut app = Router::new()
        .route("/health", get(health))
        .with_state(shared.clone())
        .merge(protected);
    if let Some(pages) = options.pages {
        app = app.merge(pages.layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            require_token_for_pages,
        )));
    }
    let app = app.layer(axum::middleware::from_fn_with_state(
        shared,
        check_host_and_origin,
    ));
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

/// The names this server answers to: loopback names, the bound address, and with a wildcard
/// bind (`0.0.0.0`, `::`) every address of this machine and its host name; then `extra`.
/// Anything else is refused, so a DNS name rebound to 127.0.0.1 by a web page gets nowhere.
fn allowed_hosts(bound: IpAddr, extra: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if bound.is_unspecified() {
        hosts.extend(machine_addresses().iter().map(IpAddr::to_string));
        hosts.extend(host_name());
    } else {
        hosts.push(bound.to_string());
    }
    hosts.extend(extra.iter().map(|h| h.trim().to_ascii_lowercase()));
    hosts.sort();
    hosts.dedup();
    hosts
}

/// Pages served from an allowed host (any port, http or https) may call; no other origin.
fn allowed_origins(hosts: &[String]) -> Vec<String> {
    let mut origins = Vec::new();
    for host in hosts {
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        origins.push(format!("http://{host}:*"));
        origins.push(format!("https://{host}:*"));
    }
    origins
}

/// The addresses of this machine's network interfaces.
fn machine_addresses() -> Vec<IpAddr> {
    let mut addresses = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list we only read, then free once.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return addresses;
        }
        let mut entry = list;
        while let Some(ifa) = entry.as_ref() {
            if let Some(addr) = ifa.ifa_addr.as_ref() {
                match addr.sa_family as i32 {
                    libc::AF_INET => {
                        let v4 = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                        let ip = std::net::Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr));
                        addresses.push(IpAddr::V4(ip));
                    }
                    libc::AF_INET6 => {
                        let v6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                        addresses.push(IpAddr::V6(v6.sin6_addr.s6_addr.into()));
                    }
                    _ => {}
                }
            }
            entry = ifa.ifa_next;
        }
        libc::freeifaddrs(list);
    }
    addresses
}

/// This machine's host name, lowercase.
fn host_name() -> Option<String> {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer outlives the call and its length is passed.
    let rc = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if rc != 0 {
        return None;
    }
    let end = buffer.iter().position(|b| *b == 0).unwrap_or(buffer.len());
    let name = std::str::from_utf8(&buffer[..end])
        .ok()?
        .to_ascii_lowercase();
    (!name.is_empty()).then_some(name)
}

/// The host part of a `Host` header (`name`, `name:port`, `[v6]:port`), lowercase.
fn host_of(header: &str) -> String {
    let header = header.trim();
    let host = match header.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => header.rsplit_once(':').map_or(header, |(host, _)| host),
    };
    host.to_ascii_lowercase()
}

/// Every request (`/mcp`, `/health`, anything later) must be addressed to one of our names
/// and, when a browser sends an `Origin`, come from a page of ours.
async fn check_host_and_origin(
    State(shared): State<Shared>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(host_of)
        .or_else(|| request.uri().host().map(str::to_ascii_lowercase));
    if !host.is_some_and(|h| shared.hosts.contains(&h)) {
        tracing::warn!(host = ?request.headers().get(header::HOST), "refused an HTTP request for a foreign Host");
        return (
            StatusCode::FORBIDDEN,
            "Forbidden: Host header is not allowed. Address this server by an allowed name \
             (localhost, 127.0.0.1, this machine's addresses when bound to 0.0.0.0) or start it \
             with --allowed-host NAME.\n",
        )
            .into_response();
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let allowed = origin.to_str().ok().is_some_and(|origin| {
            let origin = origin.to_ascii_lowercase();
            let host = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                .map(host_of);
            host.is_some_and(|h| shared.hosts.contains(&h))
        });
        if !allowed {
            tracing::warn!(?origin, "refused an HTTP request from a foreign Origin");
            return (
                StatusCode::FORBIDDEN,
                "Forbidden: Origin header is not allowed: only pages served by an allowed host \
                 may call this server.\n",
            )
                .into_response();
        }
    }
    next.run(request).await
}

async fn require_token_and_room(
    State(shared): State<Shared>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &shared.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token)
            .unwrap_or("");
        if !constant_time_eq(given.as_bytes(), token.as_bytes()) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "missing or wrong bearer token: send `Authorization: Bearer <token>` with the \
                 server's --token / OS_SUP_MCP_TOKEN\n",
            )
                .into_response();
        }
    }
    let new_session = !request.headers().contains_key("mcp-session-id");
    if new_session && shared.sessions.sessions.read().await.len() >= shared.max_sessions {
        tracing::warn!(
            "HTTP session limit reached ({}); refusing a new session",
            shared.max_sessions
        );
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "server busy: {} HTTP sessions are open (--max-sessions); close one (DELETE /mcp \
                 with its Mcp-Session-Id) or retry later\n",
                shared.max_sessions
            ),
        )
            .into_response();
    }
    next.run(request).await
}

/// Pages need the token (when there is one) as a bearer header or as our cookie; `?token=` sets
/// the cookie and redirects to the same path without it.
async fn require_token_for_pages(
    State(shared): State<Shared>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = &shared.token else {
        return next.run(request).await;
    };
    let matches = |given: &str| constant_time_eq(given.as_bytes(), token.as_bytes());
    if let Some(given) = query_param(request.uri().query().unwrap_or(""), "token") {
        if !matches(&given) {
            return (StatusCode::UNAUTHORIZED, "wrong token in ?token=\n").into_response();
        }
        let cookie = format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict",
            shared.cookie,
            percent_encode(token)
        );
        let path = request.uri().path().to_string();
        return (
            StatusCode::SEE_OTHER,
            [(header::LOCATION, path), (header::SET_COOKIE, cookie)],
        )
            .into_response();
    }
    let headers = request.headers();
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == &*shared.cookie)
        .map(|(_, value)| percent_decode(value));
    if bearer.is_some_and(matches) || cookie.is_some_and(|c| matches(&c)) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        "this server needs its token: open /?token=<token> once (it sets a cookie), or send \
         `Authorization: Bearer <token>`\n",
    )
        .into_response()
}

/// The value of `key` in a query string, percent-decoded.
fn query_param(query: &str, key: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| percent_decode(&v.replace('+', " ")))
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The token of an `Authorization: Bearer <token>` value; the scheme is case-insensitive
/// (RFC 9110 §11.1).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
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

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("BEARER  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearerabc"), None);
    }

    #[test]
    fn tokens_survive_the_cookie_and_the_query_string() {
        let token = "a b;c=d%é";
        assert_eq!(percent_decode(&percent_encode(token)), token);
        assert_eq!(
            query_param("x=1&token=a%20b+c", "token").as_deref(),
            Some("a b c")
        );
        assert_eq!(query_param("tokenx=1", "token"), None);
    }

    #[test]
    fn host_headers_are_reduced_to_their_name() {
        assert_eq!(host_of("LocalHost:9101"), "localhost");
        assert_eq!(host_of("[::1]:9101"), "::1");
        assert_eq!(host_of("10.0.0.5"), "10.0.0.5");
    }

    #[test]
    fn a_wildcard_bind_accepts_this_machine_and_nothing_else() {
        let hosts = allowed_hosts("0.0.0.0".parse().unwrap(), &["Proxy.Example".into()]);
        assert!(hosts.contains(&"127.0.0.1".to_string()));
        assert!(hosts.contains(&"proxy.example".to_string()));
        if let Some(name) = host_name() {
            assert!(hosts.contains(&name));
        }
        assert!(!hosts.contains(&"evil.example".to_string()));
        let loopback = allowed_hosts("127.0.0.1".parse().unwrap(), &[]);
        assert_eq!(loopback, ["127.0.0.1", "::1", "localhost"]);
    }
}
