//! Stream transports: newline-delimited JSON-RPC over TCP or a Unix-domain socket (one session
//! per connection, the same framing as stdio, so `socat STDIO TCP:127.0.0.1:9100` or
//! `socat STDIO UNIX-CONNECT:PATH` bridges any stdio client), and over stdio.

use super::McpServer;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleServer, ServiceExt};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Concurrent stream sessions; more wait in the accept backlog.
pub const MAX_SESSIONS: usize = 256;
/// A single JSON-RPC line larger than this is dropped (the session stays open).
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

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
                if path.exists() {
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

/// Accepts sessions until `shutdown` is cancelled; each is served by a clone of `server`.
pub async fn serve_listener(listener: Listener, server: McpServer, shutdown: CancellationToken) {
    let sessions = Arc::new(Semaphore::new(MAX_SESSIONS));
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => return,
            permit = sessions.clone().acquire_owned() => permit.expect("semaphore never closed"),
        };
        let (read, write, peer) = tokio::select! {
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
        let server = server.clone();
        let session_end = shutdown.child_token();
        tokio::spawn(async move {
            let _permit = permit;
            serve_stream(server, read, write, session_end, &peer).await;
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
    )
    .await;
}

async fn serve_stream(
    server: McpServer,
    read: Reader,
    write: Writer,
    end: CancellationToken,
    peer: &str,
) {
    let open = server.sessions.clone();
    open.fetch_add(1, Ordering::Relaxed);
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
