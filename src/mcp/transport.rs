//! Stream transports: newline-delimited JSON-RPC over TCP or a Unix-domain socket, and over
//! stdio. A socket carries one session per connection with the same framing as stdio, so
//! `socat STDIO TCP:127.0.0.1:9100` or `socat STDIO UNIX-CONNECT:PATH` bridges any stdio client.

use super::McpServer;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleServer, ServiceExt};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Default cap on concurrent stream sessions; more are refused with an error line.
pub const MAX_SESSIONS: usize = 256;
/// A single JSON-RPC line larger than this is dropped (the session stays open).
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;
/// A socket connection that has not sent its first JSON-RPC line by then is closed.
pub const FIRST_LINE_TIMEOUT: Duration = Duration::from_secs(60);

type Reader = Box<dyn AsyncRead + Send + Unpin>;
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// Where stream sessions come from: `HOST:PORT` or `unix:PATH`.
pub enum Listener {
    Tcp(TcpListener),
    /// The socket file is removed when the listener is dropped.
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// Binds `spec`. A Unix socket is created readable and writable by its owner only.
    pub async fn bind(spec: &str) -> std::io::Result<Self> {
        match spec.strip_prefix("unix:") {
            Some(path) => {
                let path = PathBuf::from(path);
                if let Ok(meta) = std::fs::symlink_metadata(&path) {
                    use std::os::unix::fs::FileTypeExt;
                    if !meta.file_type().is_socket() {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::AlreadyExists,
                            format!(
                                "{} exists and is not a socket; refusing to replace it: choose \
                                 another path",
                                path.display()
                            ),
                        ));
                    }
                    // A live server answers a connect: refuse to steal its socket.
                    if tokio::net::UnixStream::connect(&path).await.is_ok() {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::AddrInUse,
                            format!("{} is in use by a running server", path.display()),
                        ));
                    }
                    std::fs::remove_file(&path)?;
                }
                // SAFETY: umask only affects this process's file creation mode; restored at once.
                let old = unsafe { libc::umask(0o177) };
                let bound = UnixListener::bind(&path);
                unsafe { libc::umask(old) };
                let listener = bound?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
                Ok(Self::Unix(listener, path))
            }
            None => Ok(Self::Tcp(TcpListener::bind(spec).await?)),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Self::Tcp(l) => l.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            Self::Unix(_, path) => format!("unix:{}", path.display()),
        }
    }

    async fn accept(&self) -> std::io::Result<(Reader, Writer, String)> {
        match self {
            Self::Tcp(listener) => {
                let (stream, peer) = listener.accept().await?;
                stream.set_nodelay(true).ok();
                let (read, write) = stream.into_split();
                Ok((Box::new(read), Box::new(write), peer.to_string()))
            }
            Self::Unix(listener, _) => {
                let (stream, _) = listener.accept().await?;
                let (read, write) = stream.into_split();
                Ok((Box::new(read), Box::new(write), "unix".into()))
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Self::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Accepts sessions until `shutdown` is cancelled; each is served by a clone of `server`. At
/// most `max_sessions` run at once.
pub async fn serve_listener(
    listener: Listener,
    server: McpServer,
    max_sessions: usize,
    shutdown: CancellationToken,
) {
    let sessions = Arc::new(Semaphore::new(max_sessions.max(1)));
    loop {
        let (read, mut write, peer) = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = sessions.clone().try_acquire_owned() else {
            // Say why instead of leaving the client hanging in the backlog.
            tracing::warn!(%peer, "session limit reached ({max_sessions}); refusing a connection");
            let message = format!("server busy: {max_sessions} sessions are open; retry later");
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let _ = write
                    .write_all(error_line(-32000, &message).as_bytes())
                    .await;
                let _ = write.shutdown().await;
                drop(read);
            });
            continue;
        };
        let server = server.clone();
        let session_end = shutdown.child_token();
        tokio::spawn(async move {
            let _permit = permit;
            let guard = FirstLine::Required(FIRST_LINE_TIMEOUT);
            serve_stream(server, read, write, session_end, &peer, guard).await;
        });
    }
}

/// Serves one session on stdin/stdout until the client closes stdin or `shutdown` fires.
pub async fn serve_stdio(server: McpServer, shutdown: CancellationToken) {
    serve_stream(
        server,
        Box::new(tokio::io::stdin()),
        Box::new(tokio::io::stdout()),
        shutdown,
        "stdio",
        // Only the process that started us can write to our stdin.
        FirstLine::Trusted,
    )
    .await;
}

/// What a connection must send before anything it says is served.
#[derive(Clone, Copy, Debug)]
enum FirstLine {
    /// A socket anyone on this machine (or a browser page) can reach: its first line must be
    /// a JSON-RPC message, sent within the timeout, or the connection is closed unread. A web
    /// page can POST to a TCP port without a CORS preflight; its HTTP header lines come first,
    /// so this is what keeps the JSON lines of its body from being served (Redis closes on
    /// `POST`/`Host:` for the same reason).
    Required(Duration),
    /// stdio: the peer is our parent.
    Trusted,
}

async fn serve_stream(
    server: McpServer,
    read: Reader,
    write: Writer,
    end: CancellationToken,
    peer: &str,
    first_line: FirstLine,
) {
    let open = server.sessions.clone();
    open.fetch_add(1, Ordering::Relaxed);
    let (read, write) = answer_unparseable_lines(read, write, first_line, peer.to_string());
    let transport =
        AsyncRwTransport::<RoleServer, _, _>::new(read, write).with_max_line_length(MAX_LINE_BYTES);
    tracing::debug!(%peer, "session opened");
    match server.serve_with_ct(transport, end).await {
        Ok(running) => {
            let _ = running.waiting().await;
        }
        Err(e) => tracing::debug!(%peer, error = %e, "session ended during initialization"),
    }
    open.fetch_sub(1, Ordering::Relaxed);
    tracing::debug!(%peer, "session closed");
}

/// Puts a JSON check in front of rmcp, which silently drops lines it cannot parse: JSON-RPC
/// wants a `-32700 Parse error` (id null) for a line that is not JSON, and we also answer a
/// line over `MAX_LINE_BYTES` (`-32600`) instead of buffering it. Valid lines pass through
/// unchanged; the answers are written between whole lines of rmcp's output. Until the first
/// JSON-RPC line has arrived, `first_line` decides: anything else closes the connection.
fn answer_unparseable_lines(
    mut read: Reader,
    mut write: Writer,
    first_line: FirstLine,
    peer: String,
) -> (Reader, Writer) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let (rmcp_in, mut to_rmcp) = tokio::io::duplex(64 * 1024);
    let (from_rmcp, rmcp_out) = tokio::io::duplex(64 * 1024);
    let (errors, mut pending_errors) = tokio::sync::mpsc::channel::<String>(64);

    tokio::spawn(async move {
        let mut chunk = vec![0u8; 64 * 1024];
        let mut line: Vec<u8> = Vec::new();
        let mut discarding = false;
        // Until a JSON-RPC line has been served, the connection is on probation.
        let mut probation = match first_line {
            FirstLine::Required(limit) => Some(tokio::time::Instant::now() + limit),
            FirstLine::Trusted => None,
        };
        'read: loop {
            let n = match probation {
                Some(deadline) => {
                    match tokio::time::timeout_at(deadline, read.read(&mut chunk)).await {
                        Ok(read) => read,
                        Err(_) => {
                            tracing::warn!(%peer, "closing a connection that sent no JSON-RPC line within {}s", FIRST_LINE_TIMEOUT.as_secs());
                            break;
                        }
                    }
                }
                None => read.read(&mut chunk).await,
            };
            let n = match n {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if probation.is_some() {
                // Judge by the first byte that is not whitespace, before a newline arrives:
                // TLS or binary garbage may never send one.
                let pending = line.iter().chain(&chunk[..n]);
                if let Some(first) = pending.copied().find(|b| !b.is_ascii_whitespace()) {
                    if first != b'{' && first != b'[' {
                        refuse(&peer, &chunk[..n]);
                        break;
                    }
                }
            }
            let mut rest = &chunk[..n];
            while !rest.is_empty() {
                let (part, complete) = match rest.iter().position(|b| *b == b'\n') {
                    Some(i) => (&rest[..=i], true),
                    None => (rest, false),
                };
                rest = &rest[part.len()..];
                if !discarding {
                    line.extend_from_slice(part);
                    if line.len() > MAX_LINE_BYTES {
                        line = Vec::new();
                        discarding = true;
                    }
                }
                if !complete {
                    continue;
                }
                if std::mem::take(&mut discarding) {
                    let message =
                        format!("Invalid Request: line longer than {MAX_LINE_BYTES} bytes");
                    if errors.send(error_line(-32600, &message)).await.is_err() {
                        break 'read;
                    }
                    continue;
                }
                let text = std::mem::take(&mut line);
                if text.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                if probation.is_some() {
                    if !is_json_rpc(&text) {
                        refuse(&peer, &text);
                        break 'read;
                    }
                    probation = None;
                }
                match serde_json::from_slice::<serde::de::IgnoredAny>(&text) {
                    Ok(_) => {
                        if to_rmcp.write_all(&text).await.is_err() {
                            break 'read;
                        }
                    }
                    Err(e) => {
                        let message = format!("Parse error: {e}");
                        if errors.send(error_line(-32700, &message)).await.is_err() {
                            break 'read;
                        }
                    }
                }
            }
        }
        // Dropping `to_rmcp` ends the session.
    });

    tokio::spawn(async move {
        let mut from_rmcp = tokio::io::BufReader::new(from_rmcp);
        let mut out: Vec<u8> = Vec::new();
        loop {
            // `read_until` appends to `out`, so a branch that loses the race loses nothing.
            // Errors go first: each was queued before rmcp saw the lines that followed it, so
            // the answers leave in the order the requests came.
            tokio::select! {
                biased;
                Some(answer) = pending_errors.recv() => {
                    if write.write_all(answer.as_bytes()).await.is_err() || write.flush().await.is_err() {
                        break;
                    }
                }
                read = from_rmcp.read_until(b'\n', &mut out) => {
                    match read {
                        Ok(0) | Err(_) => break,
                        Ok(_) if out.ends_with(b"\n") => {
                            with_null_id(&mut out);
                            if write.write_all(&out).await.is_err() || write.flush().await.is_err() {
                                break;
                            }
                            out.clear();
                        }
                        Ok(_) => {}
                    }
                }
            }
        }
    });
    (Box::new(rmcp_in), Box::new(rmcp_out))
}

/// A JSON-RPC 2.0 message, or a batch of them: what a real MCP client sends first.
fn is_json_rpc(line: &[u8]) -> bool {
    let is_message =
        |v: &serde_json::Value| v.get("jsonrpc").and_then(|v| v.as_str()) == Some("2.0");
    match serde_json::from_slice::<serde_json::Value>(line) {
        Ok(serde_json::Value::Array(batch)) => !batch.is_empty() && batch.iter().all(is_message),
        Ok(message) => is_message(&message),
        Err(_) => false,
    }
}

/// Logs a connection closed for not speaking JSON-RPC, with a short, printable excerpt.
fn refuse(peer: &str, start: &[u8]) {
    let excerpt: String = String::from_utf8_lossy(&start[..start.len().min(40)])
        .chars()
        .map(|c| if c.is_control() { '.' } else { c })
        .collect();
    tracing::warn!(
        %peer,
        "closed a connection whose first line is not JSON-RPC ({excerpt:?}): only MCP clients \
         may use this port (a web page's cross-protocol request looks like this)"
    );
}

/// rmcp leaves out `id` on errors about requests whose id it could not read; JSON-RPC 2.0 wants
/// `"id": null` there. Only small lines are looked at: such errors are short.
fn with_null_id(line: &mut Vec<u8>) {
    let needle = |n: &[u8]| line.windows(n.len()).any(|w| w == n);
    if line.len() > 4096 || !needle(b"\"error\"") || needle(b"\"id\"") {
        return;
    }
    if let Ok(serde_json::Value::Object(mut message)) = serde_json::from_slice(line) {
        message.insert("id".into(), serde_json::Value::Null);
        *line = format!("{}\n", serde_json::Value::Object(message)).into_bytes();
    }
}

fn error_line(code: i32, message: &str) -> String {
    let error = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    format!("{error}\n")
}
