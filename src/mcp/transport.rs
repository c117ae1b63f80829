//! Stream transports: newline-delimited JSON-RPC over TCP or a Unix-domain socket, and over
//! stdio. A socket carries one session per connection with the same framing as stdio, so
//! `socat STDIO TCP:127.0.0.1:9100` or `socat STDIO UNIX-CONNECT:PATH` bridges any stdio client.

use super::McpServer;
use rmcp::model::{ClientJsonRpcMessage, ErrorData, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use rmcp::transport::Transport;
use rmcp::{RoleServer, ServiceExt};
use serde_json::error::Category;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;
use tokio_util::bytes::BytesMut;
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
    let transport = LineTransport::new(read, write, first_line, peer.to_string());
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

/// rmcp's transport for one stream session: each line is parsed once and handed to rmcp as a
/// message, and rmcp's messages are written straight to the socket. rmcp's own line transport
/// silently drops lines it cannot parse: JSON-RPC wants a `-32700 Parse error` (id null) for a
/// line that is not JSON, and we also answer a line over `MAX_LINE_BYTES` (`-32600`) instead of
/// buffering it. Those answers are written between whole lines of rmcp's output, before the
/// lines that follow them are read. Until the first JSON-RPC line has arrived, `first_line`
/// decides: anything else closes the connection.
struct LineTransport {
    read: tokio::io::BufReader<Reader>,
    /// The line read so far; `receive` may be cancelled between any two reads.
    line: Vec<u8>,
    /// Skipping the rest of a line over `MAX_LINE_BYTES`.
    discarding: bool,
    /// Until a JSON-RPC line has been served, the connection is on probation: closed unless
    /// one came by then.
    probation: Option<tokio::time::Instant>,
    peer: String,
    out: Arc<tokio::sync::Mutex<LineWriter>>,
    /// Our answer to a bad line, until it is handed to `out`.
    answer: Option<Vec<u8>>,
    /// Our answer is not written out yet.
    unflushed: bool,
}

/// What rmcp gets for one line.
enum Parsed {
    Message(Box<ClientJsonRpcMessage>),
    /// Not a message: this line answers it.
    Answer(Vec<u8>),
    /// Nothing: a notification rmcp ignores, or a line it drops.
    Skip,
}

impl LineTransport {
    fn new(read: Reader, write: Writer, first_line: FirstLine, peer: String) -> Self {
        Self {
            read: tokio::io::BufReader::with_capacity(64 * 1024, read),
            line: Vec::new(),
            discarding: false,
            probation: match first_line {
                FirstLine::Required(limit) => Some(tokio::time::Instant::now() + limit),
                FirstLine::Trusted => None,
            },
            peer,
            out: Arc::new(tokio::sync::Mutex::new(LineWriter {
                write: Some(write),
                unsent: Vec::new(),
            })),
            answer: None,
            unflushed: false,
        }
    }

    /// The next line, parsed; `None` when the connection ends or is refused.
    async fn next_line(&mut self) -> Option<Parsed> {
        use tokio::io::AsyncBufReadExt;
        loop {
            let available = match self.probation {
                Some(deadline) => {
                    match tokio::time::timeout_at(deadline, self.read.fill_buf()).await {
                        Ok(read) => read,
                        Err(_) => {
                            tracing::warn!(peer = %self.peer, "closing a connection that sent no JSON-RPC line within {}s", FIRST_LINE_TIMEOUT.as_secs());
                            return None;
                        }
                    }
                }
                None => self.read.fill_buf().await,
            };
            let available = match available {
                Ok([]) | Err(_) => return None,
                Ok(available) => available,
            };
            if self.probation.is_some() {
                // Judge by the first byte that is not whitespace, before a newline arrives:
                // TLS or binary garbage may never send one.
                let pending = self.line.iter().chain(available);
                if let Some(first) = pending.copied().find(|b| !b.is_ascii_whitespace()) {
                    if first != b'{' && first != b'[' {
                        refuse(&self.peer, available);
                        return None;
                    }
                }
            }
            let (taken, complete) = match available.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            if !self.discarding {
                self.line.extend_from_slice(&available[..taken]);
                if self.line.len() > MAX_LINE_BYTES {
                    self.line = Vec::new();
                    self.discarding = true;
                }
            }
            self.read.consume(taken);
            if !complete {
                continue;
            }
            if std::mem::take(&mut self.discarding) {
                let message = format!("Invalid Request: line longer than {MAX_LINE_BYTES} bytes");
                return Some(Parsed::Answer(error_line(-32600, &message).into_bytes()));
            }
            let text = std::mem::take(&mut self.line);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if self.probation.is_some() {
                if !is_json_rpc(&text) {
                    refuse(&self.peer, &text);
                    return None;
                }
                self.probation = None;
            }
            return Some(parse(&text));
        }
    }
}

/// One line, parsed once. Only a line that is not a message is looked at again: not JSON at
/// all gets `-32700`; JSON that is not a message gets what rmcp's own line transport gives it.
fn parse(text: &[u8]) -> Parsed {
    use tokio_util::codec::Decoder;
    if let Ok(message) = serde_json::from_slice(text) {
        return Parsed::Message(Box::new(message));
    }
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(text) {
        let message = format!("Parse error: {e}");
        return Parsed::Answer(error_line(-32700, &message).into_bytes());
    }
    let mut codec = JsonRpcMessageCodec::<ClientJsonRpcMessage>::default();
    match codec.decode_eof(&mut BytesMut::from(text)) {
        Ok(Some(message)) => Parsed::Message(Box::new(message)),
        // A notification it ignores for compatibility.
        Ok(None) => Parsed::Skip,
        // What it drops as unparsable (invalid UTF-8 in a string, say).
        Err(JsonRpcMessageCodecError::Serde(e))
            if matches!(e.classify(), Category::Syntax | Category::Eof) =>
        {
            Parsed::Skip
        }
        Err(_) => {
            let invalid = ServerJsonRpcMessage::error(
                ErrorData::invalid_request("Invalid request", None),
                None,
            );
            encode(&invalid).map_or(Parsed::Skip, Parsed::Answer)
        }
    }
}

impl Transport<RoleServer> for LineTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        message: ServerJsonRpcMessage,
    ) -> impl std::future::Future<Output = std::io::Result<()>> + Send + 'static {
        let out = self.out.clone();
        let line = encode(&message);
        async move { out.lock().await.write_line(&line?).await }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if self.unflushed {
                let mut out = self.out.lock().await;
                if let Some(answer) = self.answer.take() {
                    out.unsent.extend_from_slice(&answer);
                }
                out.flush().await.ok()?;
                self.unflushed = false;
            }
            match self.next_line().await? {
                Parsed::Message(message) => return Some(*message),
                Parsed::Answer(answer) => {
                    self.answer = Some(answer);
                    self.unflushed = true;
                }
                Parsed::Skip => {}
            }
        }
    }

    async fn close(&mut self) -> std::io::Result<()> {
        self.out.lock().await.write = None;
        Ok(())
    }
}

/// `message` as one line, with `"id": null` on an error about a request whose id was not read.
fn encode(message: &ServerJsonRpcMessage) -> std::io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    if matches!(message, JsonRpcMessage::Error(_)) {
        with_null_id(&mut line);
    }
    Ok(line)
}

/// The session's output, shared by rmcp's sends and our answers: whole lines, in turn.
struct LineWriter {
    /// `None` once rmcp closed the transport.
    write: Option<Writer>,
    /// Bytes a cancelled write left unwritten, first in line: at most a line or two.
    unsent: Vec<u8>,
}

impl LineWriter {
    async fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.unsent.extend_from_slice(line);
        self.flush().await
    }

    /// Writes out what is unsent. Cancel-safe: what is not written stays in `unsent`.
    async fn flush(&mut self) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        let Some(write) = self.write.as_mut() else {
            return Err(std::io::ErrorKind::NotConnected.into());
        };
        while !self.unsent.is_empty() {
            let n = write.write(&self.unsent).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            self.unsent.drain(..n);
        }
        write.flush().await
    }
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
