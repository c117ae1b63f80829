//! The Erlang helper (`erlang/os_sup_helper.erl`) as seen from Rust: its embedded `.beam`, the
//! boot flags that inject it into a child, and typed requests to the registered `os_sup_helper`
//! process over one (re-established when lost) distribution connection.
//!
//! This layer turns terms into Rust types; it knows nothing of child processes or tools.

mod eval;
mod events;
mod introspect;
mod status;

pub use eval::{EvalError, EvalOutput, EvalRequest, Lang};
pub use events::{LogEvent, LogEvents};
pub use introspect::{Args, Introspection};
pub use status::NodeInfo;

use crate::dist::{Connection, DistError};
use crate::term;
use eetf::Term;
use std::path::Path;
use std::time::Duration;
use tokio::sync::{Mutex, Semaphore};

/// The helper's registered name and module name.
pub const REGISTERED_NAME: &str = "os_sup_helper";
/// Every compiled helper module `(name, beam)` from `priv/`, built by `scripts/build_helper.sh`;
/// a test keeps them in step with `erlang/`.
pub const MODULES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/helper_modules.rs"));
/// Protocol version the helper must report (`os_sup_helper:version/0`).
pub const VERSION: i64 = 2;

/// Time allowed to open a connection (EPMD lookup + handshake).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What can go wrong asking the helper something.
#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    #[error(transparent)]
    Dist(#[from] DistError),
    #[error("unexpected reply from the helper: {0}")]
    BadReply(String),
    #[error("the helper refused the request: {0}")]
    Refused(String),
    /// The request ran and failed for a reason the caller can act on (`not_found`, `timeout`…).
    #[error("{message}")]
    Failed { kind: String, message: String },
    #[error("loading the helper failed: {0}")]
    Load(String),
    /// Refused at once, before anything was sent: the node already has as much in flight as
    /// it may.
    #[error("busy: {0}")]
    Busy(String),
}

/// Bounds on what one node is asked at once, so no client can pile work (each eval may hold a
/// 256 MB heap) onto a node faster than it answers.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `eval`s running at once.
    pub max_evals: usize,
    /// Requests of any kind waiting for an answer.
    pub max_in_flight: usize,
}

/// Default for [`Limits::max_evals`] (`--max-evals`).
pub const DEFAULT_MAX_EVALS: usize = 8;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_evals: DEFAULT_MAX_EVALS,
            max_in_flight: 64,
        }
    }
}

/// The helper's `.beam`, written once to a private temporary directory that children load from.
pub struct HelperCode {
    dir: tempfile::TempDir,
}

impl HelperCode {
    /// Writes the modules to a new private directory under `$TMPDIR` (or `/tmp` when
    /// `$TMPDIR` holds whitespace, which would split the boot flags).
    pub fn install() -> std::io::Result<Self> {
        use std::os::unix::fs::PermissionsExt;
        let mut parent = std::env::temp_dir();
        if parent.to_string_lossy().contains(char::is_whitespace) {
            tracing::warn!(tmpdir = %parent.display(), "TMPDIR contains whitespace, which ERL_AFLAGS cannot carry; using /tmp for the helper's code");
            parent = "/tmp".into();
        }
        let dir = tempfile::Builder::new()
            .prefix("os_sup_mcp.")
            .tempdir_in(parent)?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        for (module, beam) in MODULES {
            std::fs::write(dir.path().join(format!("{module}.beam")), beam)?;
        }
        Ok(Self { dir })
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Emulator flags that load and start the helper at boot. `ERL_AFLAGS` is split on
    /// whitespace with no quoting, so the flags contain no spaces (the temp dir has none).
    pub fn boot_flags(&self) -> String {
        format!(
            "-pa {} -eval catch(code:load_file({m})),catch({m}:start())",
            self.dir.path().display(),
            m = REGISTERED_NAME
        )
    }
}

/// Requests to the helper on one node. Reconnects on the next call after a lost connection.
pub struct Client {
    node: String,
    /// Where to reach the node's host, when its name's host part does not resolve.
    address: Option<String>,
    cookie: String,
    connection: Mutex<Option<Connection>>,
    limits: Limits,
    evals: Semaphore,
    in_flight: Semaphore,
}

impl Client {
    pub fn new(node: impl Into<String>, cookie: impl Into<String>) -> Self {
        Self::with_limits(node, cookie, Limits::default())
    }

    pub fn with_limits(node: impl Into<String>, cookie: impl Into<String>, limits: Limits) -> Self {
        Self {
            node: node.into(),
            address: None,
            cookie: cookie.into(),
            connection: Mutex::new(None),
            limits,
            evals: Semaphore::new(limits.max_evals.max(1)),
            in_flight: Semaphore::new(limits.max_in_flight.max(1)),
        }
    }

    /// A client for a node reached at `address` rather than its name's host part.
    pub fn with_address(mut self, address: Option<String>) -> Self {
        self.address = address;
        self
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// Forgets the current connection (the node was restarted or stopped).
    pub async fn disconnect(&self) {
        self.connection.lock().await.take();
    }

    async fn connection(&self) -> Result<Connection, DistError> {
        let mut slot = self.connection.lock().await;
        if let Some(conn) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(conn.clone());
        }
        let conn = Connection::open_at(
            &self.node,
            self.address.as_deref(),
            &self.cookie,
            CONNECT_TIMEOUT,
        )
        .await?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    async fn call(&self, request: Term, timeout: Duration) -> Result<Term, HelperError> {
        let _slot = self.in_flight.try_acquire().map_err(|_| {
            HelperError::Busy(format!(
                "{} requests to this node are already waiting for an answer; retry when some \
                 have finished",
                self.limits.max_in_flight
            ))
        })?;
        let conn = self.connection().await?;
        Ok(conn.call(REGISTERED_NAME, request, timeout).await?)
    }

    /// Round trip to the helper: `pong` proves the node and the helper answer.
    pub async fn ping(&self, timeout: Duration) -> Result<(), HelperError> {
        match self.call(term::atom("ping"), timeout).await? {
            reply if term::as_atom(&reply) == Some("pong") => Ok(()),
            other => Err(HelperError::BadReply(term::brief(&other))),
        }
    }

    pub async fn status(&self, timeout: Duration) -> Result<NodeInfo, HelperError> {
        let reply = self.call(term::atom("status"), timeout).await?;
        NodeInfo::from_reply(reply)
    }

    /// Evaluates code on the node. `Ok(Err(_))` is code that failed (syntax, raise, timeout):
    /// the node itself is fine.
    pub async fn eval(
        &self,
        request: &EvalRequest,
    ) -> Result<Result<EvalOutput, EvalError>, HelperError> {
        let _eval = self.evals.try_acquire().map_err(|_| {
            HelperError::Busy(format!(
                "{} evals are already running on this node (the server's --max-evals); wait \
                 for one to finish, or give long-running code a shorter timeout_ms",
                self.limits.max_evals
            ))
        })?;
        // The helper enforces the eval timeout; ours only covers a node that stopped answering.
        let timeout = request.timeout + Duration::from_secs(3);
        let reply = self.call(request.to_term(), timeout).await?;
        eval::decode_reply(reply)
    }

    /// Runs one introspection tool inside the node, bounded by `timeout` there.
    pub async fn introspect(
        &self,
        tool: &str,
        args: &Args,
        timeout: Duration,
    ) -> Result<Introspection, HelperError> {
        let reply = self
            .call(
                introspect::request(tool, args, timeout),
                timeout + Duration::from_secs(2),
            )
            .await?;
        introspect::decode_reply(reply)
    }

    /// Asks the node's helper to forward its OTP logger events to us. The events come on the
    /// current connection and end with it: subscribe again after a reconnect.
    pub async fn subscribe_logs(&self) -> Result<LogEvents, HelperError> {
        let conn = self.connection().await?;
        let request = term::tuple(vec![
            term::atom("subscribe_logs"),
            Term::from(conn.self_pid()),
        ]);
        match conn
            .call(REGISTERED_NAME, request, Duration::from_secs(5))
            .await?
        {
            reply if term::as_atom(&reply) == Some("ok") => {}
            other => return Err(HelperError::BadReply(term::brief(&other))),
        }
        // Taken only now, so a failed subscription leaves them for the next attempt; events
        // that came meanwhile wait in the connection's bounded queue.
        let raw = conn.take_events().ok_or_else(|| {
            HelperError::Refused("this connection's events are already taken".into())
        })?;
        Ok(LogEvents { raw })
    }

    /// Makes sure the current helper runs on a node we did not start: if it does not answer
    /// with our version, loads every helper module over distribution (`code:load_binary` via
    /// `rex`, nothing written on that node) and starts it.
    pub async fn attach(&self) -> Result<(), HelperError> {
        let quick = Duration::from_millis(500);
        let running = self.call(term::atom("version"), quick).await;
        if running.as_ref().ok().and_then(term::as_i64) == Some(VERSION) {
            return Ok(());
        }
        let conn = self.connection().await?;
        for (module, beam) in MODULES {
            let args = vec![
                term::atom(module),
                Term::from(eetf::ByteList::from(
                    format!("os_sup_mcp:{module}").as_str(),
                )),
                Term::from(eetf::Binary::from(beam.to_vec())),
            ];
            let reply = conn
                .rpc("code", "load_binary", args, Duration::from_secs(10))
                .await?;
            match term::tagged(reply) {
                Some((tag, _)) if tag == "module" => {}
                Some((_, reason)) => {
                    return Err(HelperError::Load(format!(
                        "{module}: {}",
                        term::brief(&reason)
                    )))
                }
                None => return Err(HelperError::Load(format!("{module}: unexpected reply"))),
            }
        }
        conn.rpc(REGISTERED_NAME, "start", vec![], Duration::from_secs(5))
            .await?;
        match self
            .call(term::atom("version"), Duration::from_secs(2))
            .await?
        {
            v if term::as_i64(&v) == Some(VERSION) => Ok(()),
            other => Err(HelperError::Load(format!(
                "helper answers version {} after loading; expected {VERSION}",
                term::brief(&other)
            ))),
        }
    }

    /// Stops the helper's server on a node we attached to; the node itself is untouched.
    pub async fn detach(&self) -> Result<(), HelperError> {
        let result = self
            .call(term::atom("detach"), Duration::from_secs(2))
            .await;
        self.disconnect().await;
        match result? {
            reply if term::as_atom(&reply) == Some("ok") => Ok(()),
            other => Err(HelperError::BadReply(term::brief(&other))),
        }
    }

    /// Asks the node to stop gracefully (`init:stop/0`), halting hard after `grace`.
    pub async fn stop(&self, grace: Duration, timeout: Duration) -> Result<(), HelperError> {
        let request = term::tuple(vec![
            term::atom("stop"),
            term::int(grace.as_millis() as i64),
        ]);
        match self.call(request, timeout).await? {
            reply if term::as_atom(&reply) == Some("ok") => Ok(()),
            other => Err(HelperError::BadReply(term::brief(&other))),
        }
    }
}

/// Splits a `{ok, V} | {error, R}` reply.
fn ok_or_error(reply: Term) -> Result<Result<Term, Term>, HelperError> {
    match term::tagged(reply) {
        Some((tag, value)) if tag == "ok" => Ok(Ok(value)),
        Some((tag, value)) if tag == "error" => Ok(Err(value)),
        Some((tag, value)) => Err(HelperError::BadReply(format!(
            "{{{tag}, {}}}",
            term::brief(&value)
        ))),
        None => Err(HelperError::BadReply(
            "not an {ok, _} | {error, _} tuple".into(),
        )),
    }
}
