//! Transports: newline-delimited JSON-RPC over TCP (one session per connection, the same framing
//! as stdio, so `socat STDIO TCP:127.0.0.1:9100` bridges any stdio client) and over stdio.

use super::McpServer;
use crate::node::Registry;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleServer, ServiceExt};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Concurrent TCP sessions; more wait in the accept backlog.
const MAX_SESSIONS: usize = 256;
/// A single JSON-RPC line larger than this is dropped (the session stays open).
const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// Accepts sessions until `shutdown` is cancelled.
pub async fn serve_tcp(
    listener: TcpListener,
    registry: Arc<Registry>,
    shutdown: CancellationToken,
) {
    let sessions = Arc::new(Semaphore::new(MAX_SESSIONS));
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => return,
            permit = sessions.clone().acquire_owned() => permit.expect("semaphore never closed"),
        };
        let (stream, peer) = tokio::select! {
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
        stream.set_nodelay(true).ok();
        let server = McpServer::new(registry.clone());
        let session_end = shutdown.child_token();
        tokio::spawn(async move {
            let _permit = permit;
            let (read, write) = stream.into_split();
            let transport = AsyncRwTransport::<RoleServer, _, _>::new(read, write)
                .with_max_line_length(MAX_LINE_BYTES);
            tracing::debug!(%peer, "session opened");
            match server.serve_with_ct(transport, session_end).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => tracing::debug!(%peer, error = %e, "session ended during initialization"),
            }
            tracing::debug!(%peer, "session closed");
        });
    }
}

/// Serves one session on stdin/stdout until the client closes stdin or `shutdown` fires.
pub async fn serve_stdio(
    registry: Arc<Registry>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let transport =
        AsyncRwTransport::<RoleServer, _, _>::new(tokio::io::stdin(), tokio::io::stdout())
            .with_max_line_length(MAX_LINE_BYTES);
    let running = McpServer::new(registry)
        .serve_with_ct(transport, shutdown)
        .await?;
    running.waiting().await?;
    Ok(())
}
