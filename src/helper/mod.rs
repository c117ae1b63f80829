//! The Erlang helper (`erlang/os_sup_helper.erl`) as seen from Rust: requests to the
//! registered `os_sup_helper` process (its embedded `.beam` and the boot flags that inject it
//! into a child are [`beams`]'s). They go over one (re-established when lost) distribution
//! connection: typed ones for the node's life (ping, status, eval, logs, stop) and one generic
//! [`ToolCall`] for every tool.
//!
//! This layer turns terms into Rust types; it knows nothing of child processes or tools.

mod beams;
mod eval;
mod events;
mod node_info;
mod tool;

pub use beams::{BeamSet, HelperBeams, HelperCode, BEAMS};
pub use eval::{EvalError, EvalOutput, EvalRequest, Lang};
pub use events::{LogEvent, LogEvents};
pub use node_info::{AppRestart, AppRestarts, NodeInfo};
pub use tool::{ToolCall, ToolReply, TypedReply};

use crate::dist::{ConnectOptions, Connection, DistError, Link};
use crate::single_flight::{Flight, Unfinished};
use crate::term;
use eetf::Term;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The helper's registered name and module name.
pub const REGISTERED_NAME: &str = "os_sup_helper";
/// Protocol version the helper must report (`os_sup_helper:version/0`).
pub const VERSION: i64 = 3;

/// How long [`Client::subscribe_logs`] waits for the helper to answer a ping first.
const SUBSCRIBE_PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Time allowed to open a connection (EPMD lookup + handshake).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A call with no reply after this long (half its timeout when that is shorter) asks the node
/// whether the helper is still registered: a message to a name nobody holds is dropped
/// silently, so a call to a dead helper would otherwise wait out its whole timeout. A healthy
/// helper answers in well under a millisecond, so healthy calls never pay for the question.
const PROBE_DELAY: Duration = Duration::from_millis(500);
/// Bound on each step of loading and starting the helper on a node.
const LOAD_STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// What can go wrong asking the helper something.
#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    #[error(transparent)]
    Dist(#[from] DistError),
    #[error("unexpected reply from the helper: {0}")]
    BadReply(String),
    #[error("the helper refused the request: {0}")]
    Refused(String),
    /// Refused before anything was sent: the request itself is out of bounds.
    #[error("{0}")]
    Invalid(String),
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

impl HelperError {
    /// The node did not reply in time (as opposed to a refusal or a lost connection).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Dist(DistError::Timeout { .. }))
    }
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

/// Requests to the helper on one node.
///
/// Recovers on the next call: a lost connection (closed, or silent for a whole
/// `net_ticktime`) is opened again, one connect at a time shared by every caller; a helper that
/// stopped answering while its node lives on is started again (its code loaded first if the
/// node lost it) and the call retried once.
pub struct Client {
    link: Link,
    /// The helper's restart in flight, shared by every call that found the helper gone.
    recovery: Mutex<Option<Flight<Result<(), String>>>>,
    limits: Limits,
    evals: Semaphore,
    in_flight: Semaphore,
}

impl Client {
    pub fn new(node: impl Into<String>, cookie: impl Into<String>) -> Self {
        Self::with_limits(node, cookie, Limits::default())
    }

    pub fn with_limits(node: impl Into<String>, cookie: impl Into<String>, limits: Limits) -> Self {
        let options = ConnectOptions {
            connect_timeout: CONNECT_TIMEOUT,
            ..ConnectOptions::default()
        };
        Self {
            link: Link::new(node, cookie, options),
            recovery: Mutex::new(None),
            limits,
            evals: Semaphore::new(limits.max_evals.max(1)),
            in_flight: Semaphore::new(limits.max_in_flight.max(1)),
        }
    }

    /// A client for a node reached at `address` rather than its name's host part.
    pub fn with_address(self, address: Option<String>) -> Self {
        let options = ConnectOptions {
            address,
            ..self.link.options().clone()
        };
        self.with_options(options)
    }

    /// A client whose connections tick and give up on a silent node as Erlang's
    /// `net_ticktime` does (default 60 s): a frozen or unreachable node is noticed within
    /// 1.25 × `net_ticktime`, failing the calls waiting on it.
    pub fn with_net_ticktime(self, net_ticktime: Duration) -> Self {
        let options = ConnectOptions {
            net_ticktime,
            ..self.link.options().clone()
        };
        self.with_options(options)
    }

    fn with_options(mut self, options: ConnectOptions) -> Self {
        self.link = self.link.with_options(options);
        self
    }

    pub fn node(&self) -> &str {
        self.link.node()
    }

    /// Forgets the current connection (the node was restarted or stopped). A call that
    /// started before does not restart the helper on the old connection.
    pub async fn disconnect(&self) {
        self.link.disconnect();
    }

    /// The connection, waiting for a connect in flight (or starting one) for up to 5 s.
    async fn connection(&self) -> Result<Connection, DistError> {
        self.link.connection(CONNECT_TIMEOUT).await
    }

    /// Sends `request` to the helper and waits up to `timeout` (connecting included) for the
    /// reply. A reply that is slow to come makes us ask the node whether the helper is still
    /// registered; if it is not (the node is up, the helper was killed), the helper is started
    /// again and the request sent once more, with its own `timeout`. A late reply to the
    /// abandoned attempt finds no waiter and is dropped.
    async fn call(&self, request: Term, timeout: Duration) -> Result<Term, HelperError> {
        let _slot = self.in_flight.try_acquire().map_err(|_| {
            HelperError::Busy(format!(
                "{} requests to this node are already waiting for an answer; retry when some \
                 have finished",
                self.limits.max_in_flight
            ))
        })?;
        let deadline = Instant::now() + timeout;
        let left = || deadline.saturating_duration_since(Instant::now());
        // Errors name the caller's timeout, not what was left of it at some step.
        let whole = |e: DistError| match e {
            DistError::Timeout { node, .. } => DistError::Timeout { node, timeout },
            other => other,
        };
        let generation = self.link.generation();
        let conn = self.link.connection(timeout).await?;
        let mut pending = conn
            .send_call(REGISTERED_NAME, request.clone(), left())
            .await
            .map_err(whole)?;
        match pending
            .reply_within(left().min(PROBE_DELAY.min(timeout / 2)))
            .await
        {
            Err(DistError::Timeout { .. }) if !left().is_zero() => {}
            done => return Ok(done.map_err(whole)?),
        }
        // Slow: is anyone there to answer? Keep listening for the reply meanwhile.
        let presence = tokio::select! {
            biased;
            reply = pending.reply_within(left()) => return Ok(reply.map_err(whole)?),
            presence = helper_presence(&conn, left()) => presence,
        };
        if presence != Presence::Gone || self.link.generation() != generation {
            // Busy, or the node is booting or stopping, or we cannot tell: wait for the reply.
            return Ok(pending.reply_within(left()).await.map_err(whole)?);
        }
        // The request went to a name nobody holds and was dropped: forget it, bring the
        // helper back, and send the request again.
        drop(pending);
        tracing::warn!(node = %self.node(), "the helper stopped answering while its node runs; starting it again");
        self.restart_helper(&conn, generation, timeout).await?;
        Ok(conn.call(REGISTERED_NAME, request, timeout).await?)
    }

    /// Restarts the helper on `conn` ([`inject`]), once for all the calls that found it gone
    /// meanwhile; each waits at most `limit`. Nothing is done once the client was
    /// disconnected after `generation` (e.g. detached: the node must be left as it is).
    async fn restart_helper(
        &self,
        conn: &Connection,
        generation: u64,
        limit: Duration,
    ) -> Result<(), HelperError> {
        let restart = {
            let mut slot = self.recovery.lock().expect("recovery lock");
            match slot.as_ref() {
                Some(running) if running.running() => running.clone(),
                _ => {
                    let (conn, link) = (conn.clone(), self.link.clone());
                    let restart = Flight::spawn(async move {
                        let wanted = || link.generation() == generation;
                        inject(&conn, wanted).await.map_err(|e| e.to_string())
                    });
                    *slot = Some(restart.clone());
                    restart
                }
            }
        };
        match restart.wait(limit).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(HelperError::Load(reason)),
            Err(Unfinished::Abandoned) => {
                Err(HelperError::Load("the restart was abandoned".into()))
            }
            Err(Unfinished::TimedOut) => Err(HelperError::Dist(DistError::Timeout {
                node: self.node().to_string(),
                timeout: limit,
            })),
        }
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
        let timeout = request.timeout() + Duration::from_secs(3);
        let reply = self.call(request.to_term(), timeout).await?;
        eval::decode_reply(reply)
    }

    /// Runs one tool inside the node, bounded there by the call's [`ToolCall::timeout`] (and
    /// here by 2 s more, for a node that stopped answering).
    pub async fn run_tool(&self, call: &ToolCall) -> Result<ToolReply, HelperError> {
        let wire = call.to_term()?;
        let reply = self
            .call(wire, call.timeout() + Duration::from_secs(2))
            .await?;
        tool::decode_reply(reply)
    }

    /// [`run_tool`](Self::run_tool) for a tool whose data has a type of its own (`diagnose`):
    /// the data is read once into `T`.
    pub async fn run_tool_typed<T: serde::de::DeserializeOwned>(
        &self,
        call: &ToolCall,
    ) -> Result<TypedReply<T>, HelperError> {
        let wire = call.to_term()?;
        let reply = self
            .call(wire, call.timeout() + Duration::from_secs(2))
            .await?;
        tool::decode_typed(call.tool(), reply)
    }

    /// Asks the node's helper to forward its OTP logger events to us: first those it kept
    /// since it started (the node's boot included), then each new one. `Ok` only once the
    /// helper verified its logger handler is installed. The events come on the current
    /// connection and end with it: subscribe again after a reconnect (the helper keeps what is
    /// logged meanwhile).
    pub async fn subscribe_logs(&self) -> Result<LogEvents, HelperError> {
        // The node accepts connections a moment before the helper registers its name, and a
        // request sent to a name not registered yet is dropped without a trace: a short ping
        // makes an early attempt fail fast instead of waiting out the subscription's timeout.
        self.ping(SUBSCRIBE_PROBE_TIMEOUT).await?;
        let conn = self.connection().await?;
        let request = term::tuple(vec![
            term::atom("subscribe_logs"),
            Term::from(conn.self_pid()),
        ]);
        let reply = conn
            .call(REGISTERED_NAME, request, Duration::from_secs(5))
            .await?;
        if term::as_atom(&reply) != Some("ok") {
            return Err(match term::tagged(reply.clone()) {
                Some((tag, reason)) if tag == "error" => HelperError::Refused(format!(
                    "the node's logger handler could not be installed: {}",
                    term::brief(&reason)
                )),
                _ => HelperError::BadReply(term::brief(&reply)),
            });
        }
        // Taken only now, so a failed subscription leaves them for the next attempt; events
        // that came meanwhile wait in the connection's bounded queue.
        let raw = conn.take_events().ok_or_else(|| {
            HelperError::Refused("this connection's events are already taken".into())
        })?;
        Ok(LogEvents { raw })
    }

    /// Makes sure the current helper runs on a node we did not start: unless a registered
    /// helper answers with our version, loads every helper module over distribution
    /// (`code:load_binary` via `rex`, nothing written on that node) when the node lacks our
    /// version of them, and starts it.
    pub async fn attach(&self) -> Result<(), HelperError> {
        let quick = Duration::from_millis(500);
        let conn = self.connection().await?;
        if registered(&conn, quick).await == Some(true) {
            let running = conn
                .call(REGISTERED_NAME, term::atom("version"), quick)
                .await;
            if running.as_ref().ok().and_then(term::as_i64) == Some(VERSION) {
                return Ok(());
            }
        }
        inject(&conn, || true).await?;
        match conn
            .call(
                REGISTERED_NAME,
                term::atom("version"),
                Duration::from_secs(2),
            )
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

/// Whether the helper can answer, as far as the node (its `rex`) tells.
#[derive(Debug, PartialEq, Eq)]
enum Presence {
    Registered,
    /// Not registered on a node that is up: it was killed, or stopped.
    Gone,
    /// No answer, or the node is booting or stopping (a helper started now would not last,
    /// or the boot is about to start one).
    Unknown,
}

async fn helper_presence(conn: &Connection, limit: Duration) -> Presence {
    match registered(conn, limit).await {
        Some(true) => return Presence::Registered,
        Some(false) => {}
        None => return Presence::Unknown,
    }
    let status = conn.rpc("init", "get_status", vec![], limit).await;
    match status.ok().and_then(term::tagged) {
        Some((tag, provided))
            if tag == "started" && term::as_atom(&provided) == Some("started") =>
        {
            Presence::Gone
        }
        _ => Presence::Unknown,
    }
}

/// `erlang:whereis(os_sup_helper)` over `rex`: `None` when the node does not say.
async fn registered(conn: &Connection, limit: Duration) -> Option<bool> {
    let reply = conn
        .rpc(
            "erlang",
            "whereis",
            vec![term::atom(REGISTERED_NAME)],
            limit,
        )
        .await
        .ok()?;
    match reply {
        Term::Pid(_) => Some(true),
        other if term::as_atom(&other) == Some("undefined") => Some(false),
        _ => None,
    }
}

/// Brings the helper up on a node over `rex`: loads every helper module (`code:load_binary`,
/// nothing written to the node's disk) unless `os_sup_helper:version()` already answers our
/// version there (loading twice in a row would purge code that running helper processes
/// use), then starts its server (`start/0` is idempotent). Stops before each step once
/// `wanted` turns false.
async fn inject(conn: &Connection, wanted: impl Fn() -> bool) -> Result<(), HelperError> {
    let gone = || HelperError::Load("the node was disconnected meanwhile".into());
    let loaded = conn
        .rpc(REGISTERED_NAME, "version", vec![], LOAD_STEP_TIMEOUT)
        .await?;
    if term::as_i64(&loaded) != Some(VERSION) {
        let release = conn
            .rpc(
                "erlang",
                "system_info",
                vec![term::atom("otp_release")],
                LOAD_STEP_TIMEOUT,
            )
            .await?;
        let otp = term::as_text(&release)
            .and_then(|r| r.parse::<u32>().ok())
            .ok_or_else(|| {
                HelperError::Load(format!(
                    "the node's OTP release reads {}",
                    term::brief(&release)
                ))
            })?;
        let set = BEAMS.set_for(otp);
        for (module, beam) in set.modules {
            if !wanted() {
                return Err(gone());
            }
            let args = vec![
                term::atom(module),
                Term::from(eetf::ByteList::from(
                    format!("os_sup_mcp:{module}").as_str(),
                )),
                Term::from(eetf::Binary::from(beam.to_vec())),
            ];
            let reply = conn
                .rpc("code", "load_binary", args, LOAD_STEP_TIMEOUT)
                .await?;
            match term::tagged(reply) {
                Some((tag, _)) if tag == "module" => {}
                Some((_, reason)) => {
                    return Err(HelperError::Load(format!(
                        "OTP {otp} refused {module} (compiled by OTP {}): {}; this os_sup_mcp \
                         does not support this release (see its README for the tested range)",
                        set.otp,
                        term::brief(&reason)
                    )))
                }
                None => return Err(HelperError::Load(format!("{module}: unexpected reply"))),
            }
        }
    }
    if !wanted() {
        return Err(gone());
    }
    conn.rpc(REGISTERED_NAME, "start", vec![], LOAD_STEP_TIMEOUT)
        .await?;
    Ok(())
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
