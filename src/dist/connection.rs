//! One multiplexed connection to a peer node.
//!
//! Callers send `{Id, OurPid, Request}` to a registered process and wait for `{Id, Reply}`.
//! A single reader task routes each reply to the caller waiting on that `Id`; a reply that
//! arrives after its caller gave up (timed out, was cancelled, or dropped its [`PendingCall`])
//! finds no waiter and is dropped, so it can never be handed to another call. A single writer
//! task batches frames and sends ticks when idle.
//!
//! Liveness, after Erlang's `net_ticktime` (T): the writer ticks when it has sent nothing for
//! T/4 and answers every tick of the peer; the reader closes the connection when nothing at all
//! arrived for T, which wakes every waiting caller with [`DistError::ConnectionLost`] instead of
//! letting each wait out its timeout. A peer is not obliged to tick as often as we expect (its
//! own `net_ticktime` may be longer), so after T/2 of silence the writer sends a probe that the
//! peer's runtime answers by itself, without any of its processes: a monitor of a name nobody
//! registers, answered at once with a `noproc` monitor exit. Only a frozen peer or a broken
//! network stays silent.

use super::connect::connect;
use super::{DistError, DEFAULT_NET_TICKTIME};
use eetf::{Atom, FixInteger, Pid, Reference, Term, Tuple};
use erl_dist::message::Message;
use erl_dist::term::PidOrAtom;
use std::collections::HashMap;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio_util::sync::CancellationToken;

/// Largest frame we accept from a peer; the helper bounds its replies far below this.
const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;
/// Frames waiting for the writer; callers wait (with their own timeout) when it is full.
const WRITE_QUEUE: usize = 1024;
/// Pushed messages (not replies) waiting to be taken; more are dropped.
const EVENT_QUEUE: usize = 4096;
/// Distribution header "pass through" tag: a message with no atom cache.
const PASS_THROUGH: u8 = 112;
/// Default time allowed for the EPMD lookup and the handshake.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Shortest `net_ticktime` we accept; below it scheduling noise would close healthy links.
const MIN_NET_TICKTIME: Duration = Duration::from_millis(100);
/// The name the liveness probe monitors. Nobody registers it, so the peer answers `noproc`.
const PROBE_NAME: &str = "os_sup_mcp_liveness_probe";

type Waiters = Mutex<HashMap<i32, oneshot::Sender<Term>>>;

/// How to open a connection and keep it alive.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Reach the node's host at this host name or IP instead of its name's host part.
    pub address: Option<String>,
    /// Time allowed for the EPMD lookup and the handshake.
    pub connect_timeout: Duration,
    /// Like Erlang's `net_ticktime`: we tick after a quarter of it without sending, and the
    /// connection is closed as lost after a whole one without receiving anything. The default
    /// is Erlang's, 60 s; at least 100 ms.
    pub net_ticktime: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            address: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            net_ticktime: DEFAULT_NET_TICKTIME,
        }
    }
}

/// A cheap-to-clone handle on a live connection; dropping the last clone closes it.
#[derive(Clone)]
pub struct Connection {
    shared: Arc<Shared>,
}

struct Shared {
    peer: String,
    self_pid: Pid,
    next_id: AtomicI32,
    waiters: Arc<Waiters>,
    frames: mpsc::Sender<Vec<u8>>,
    closed: Arc<Closed>,
    /// Messages to us that are not replies, until someone takes them.
    events: Mutex<Option<mpsc::Receiver<Term>>>,
}

impl Shared {
    fn lost(&self) -> DistError {
        DistError::ConnectionLost {
            node: self.peer.clone(),
            reason: self.closed.reason(),
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.closed.close("the connection was dropped");
    }
}

/// Whether the connection is closed, and the first reason it was.
#[derive(Default)]
struct Closed {
    token: CancellationToken,
    reason: OnceLock<String>,
}

impl Closed {
    fn close(&self, reason: impl Into<String>) {
        let _ = self.reason.set(reason.into());
        self.token.cancel();
    }

    fn reason(&self) -> String {
        self.reason
            .get()
            .cloned()
            .unwrap_or_else(|| "the connection was closed".into())
    }
}

impl Connection {
    /// Connects to `node` (`name@host`) with `cookie`, within `timeout`.
    pub async fn open(node: &str, cookie: &str, timeout: Duration) -> Result<Self, DistError> {
        Self::open_at(node, None, cookie, timeout).await
    }

    /// Like [`open`](Self::open), reaching the node's host at `address` (a host name or IP)
    /// instead of the host part of its name.
    pub async fn open_at(
        node: &str,
        address: Option<&str>,
        cookie: &str,
        timeout: Duration,
    ) -> Result<Self, DistError> {
        let options = ConnectOptions {
            address: address.map(str::to_string),
            connect_timeout: timeout,
            ..ConnectOptions::default()
        };
        Self::open_with(node, cookie, &options).await
    }

    /// Connects to `node` (`name@host`) with `cookie` as `options` say.
    pub async fn open_with(
        node: &str,
        cookie: &str,
        options: &ConnectOptions,
    ) -> Result<Self, DistError> {
        let timeout = options.connect_timeout;
        let handshaken =
            tokio::time::timeout(timeout, connect(node, options.address.as_deref(), cookie))
                .await
                .map_err(|_| DistError::ConnectTimeout {
                    node: node.to_string(),
                    timeout,
                })??;
        let net_ticktime = options.net_ticktime.max(MIN_NET_TICKTIME);
        let local_name = handshaken.local.name.to_string();
        let creation = handshaken.local.creation.get();
        let self_pid = Pid::new(local_name.clone(), 1, 0, creation);
        let probe = encode(Message::monitor_p(
            self_pid.clone(),
            PidOrAtom::Atom(Atom::from(PROBE_NAME)),
            Reference {
                node: Atom::from(local_name),
                id: vec![1, 0, 0],
                creation,
            },
        ))?;
        let (read, write) = handshaken.stream.into_split();
        let (frames, queue) = mpsc::channel(WRITE_QUEUE);
        let waiters: Arc<Waiters> = Arc::default();
        let closed: Arc<Closed> = Arc::default();
        let signals = Arc::new(Signals::default());
        tokio::spawn(write_loop(
            write,
            queue,
            signals.clone(),
            probe,
            net_ticktime / 4,
            closed.clone(),
        ));
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        tokio::spawn(read_loop(
            read,
            waiters.clone(),
            events_tx,
            signals,
            net_ticktime,
            closed.clone(),
            handshaken.peer.name.to_string(),
        ));
        Ok(Self {
            shared: Arc::new(Shared {
                peer: node.to_string(),
                self_pid,
                next_id: AtomicI32::new(0),
                waiters,
                frames,
                closed,
                events: Mutex::new(Some(events)),
            }),
        })
    }

    /// The peer's node name.
    pub fn peer(&self) -> &str {
        &self.shared.peer
    }

    /// The messages the peer sends us that are not replies (e.g. log events), for one taker.
    /// The receiver ends when the connection does.
    pub fn take_events(&self) -> Option<mpsc::Receiver<Term>> {
        self.shared.events.lock().expect("events lock").take()
    }

    /// Our pid on this connection, for requests that ask the node to send to us.
    pub fn self_pid(&self) -> Pid {
        self.shared.self_pid.clone()
    }

    /// True once the reader or writer saw the socket fail, close or fall silent.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.token.is_cancelled()
    }

    /// Sends `{Id, OurPid, request}` to the process registered as `to` and waits for
    /// `{Id, Reply}`, returning `Reply`.
    pub async fn call(
        &self,
        to: &str,
        request: Term,
        timeout: Duration,
    ) -> Result<Term, DistError> {
        self.call_with(to, timeout, |id, self_pid| {
            Term::from(Tuple::from(vec![id, self_pid, request]))
        })
        .await
    }

    /// Sends `{Id, OurPid, request}` to the process registered as `to` (waiting at most
    /// `timeout` for room in the write queue) and returns at once: the reply is awaited on the
    /// [`PendingCall`], as often as the caller likes.
    pub async fn send_call(
        &self,
        to: &str,
        request: Term,
        timeout: Duration,
    ) -> Result<PendingCall, DistError> {
        self.send_with(to, timeout, |id, self_pid| {
            Term::from(Tuple::from(vec![id, self_pid, request]))
        })
        .await
    }

    /// `rpc:call(Node, module, function, args)` through the node's `rex` server. Its reply
    /// `{Id, Result}` routes like any other.
    pub async fn rpc(
        &self,
        module: &str,
        function: &str,
        args: Vec<Term>,
        timeout: Duration,
    ) -> Result<Term, DistError> {
        self.call_with("rex", timeout, |id, self_pid| {
            let atom = |name: &str| Term::from(Atom::from(name));
            let request = Tuple::from(vec![
                atom("call"),
                atom(module),
                atom(function),
                Term::from(eetf::List::from(args)),
                // The group leader of the call; nothing we run prints.
                self_pid.clone(),
            ]);
            let from = Tuple::from(vec![self_pid, id]);
            Term::from(Tuple::from(vec![
                atom("$gen_call"),
                Term::from(from),
                Term::from(request),
            ]))
        })
        .await
    }

    /// Sends `message(Id, OurPid)` to `to` and waits for `{Id, Reply}`, all within `timeout`.
    async fn call_with(
        &self,
        to: &str,
        timeout: Duration,
        message: impl FnOnce(Term, Term) -> Term,
    ) -> Result<Term, DistError> {
        let started = Instant::now();
        let mut pending = self.send_with(to, timeout, message).await?;
        match pending
            .reply_within(timeout.saturating_sub(started.elapsed()))
            .await
        {
            Err(DistError::Timeout { node, .. }) => Err(DistError::Timeout { node, timeout }),
            other => other,
        }
    }

    /// Registers a waiter for a new id and queues `message(Id, OurPid)` for `to`.
    async fn send_with(
        &self,
        to: &str,
        timeout: Duration,
        message: impl FnOnce(Term, Term) -> Term,
    ) -> Result<PendingCall, DistError> {
        let shared = &self.shared;
        // Ids stay positive small integers; wrapping after 2^31 calls is harmless because a
        // waiter never lives longer than its caller's timeout.
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        let (reply_tx, reply_rx) = oneshot::channel();
        shared
            .waiters
            .lock()
            .expect("waiters lock")
            .insert(id, reply_tx);
        // From here on, dropping `pending` (on any error below too) forgets the waiter.
        let pending = PendingCall {
            shared: shared.clone(),
            id,
            reply: Some(reply_rx),
        };
        let message = message(
            Term::from(FixInteger::from(id)),
            Term::from(shared.self_pid.clone()),
        );
        let frame = encode(Message::reg_send(
            shared.self_pid.clone(),
            Atom::from(to),
            message,
        ))?;
        if shared.closed.token.is_cancelled() {
            return Err(shared.lost());
        }
        tokio::select! {
            sent = shared.frames.send(frame) => sent.map_err(|_| shared.lost())?,
            _ = shared.closed.token.cancelled() => return Err(shared.lost()),
            _ = tokio::time::sleep(timeout) => {
                return Err(DistError::Timeout { node: shared.peer.clone(), timeout })
            }
        }
        Ok(pending)
    }
}

/// A request that was sent and is not answered yet. Waiting is cancel-safe: a reply that
/// arrives while nobody waits is kept for the next wait. Dropping it forgets the request, and
/// a reply that arrives later is dropped.
pub struct PendingCall {
    shared: Arc<Shared>,
    id: i32,
    /// `None` once the reply (or the news that none will come) was taken.
    reply: Option<oneshot::Receiver<Term>>,
}

impl PendingCall {
    /// Waits up to `timeout` for the reply. [`DistError::Timeout`] leaves the call pending:
    /// waiting again may still get the reply. [`DistError::ConnectionLost`] is final.
    pub async fn reply_within(&mut self, timeout: Duration) -> Result<Term, DistError> {
        let Some(reply) = self.reply.as_mut() else {
            return Err(self.shared.lost());
        };
        let closed = &self.shared.closed.token;
        let waited = tokio::time::timeout(timeout, async {
            tokio::select! {
                // A reply that made it wins over a close that follows it.
                biased;
                reply = reply => Some(reply.ok()),
                _ = closed.cancelled() => None,
            }
        })
        .await;
        match waited {
            Ok(Some(reply)) => {
                self.reply = None;
                reply.ok_or_else(|| self.shared.lost())
            }
            Ok(None) => Err(self.shared.lost()),
            Err(_) => Err(DistError::Timeout {
                node: self.shared.peer.clone(),
                timeout,
            }),
        }
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        self.shared
            .waiters
            .lock()
            .expect("waiters lock")
            .remove(&self.id);
    }
}

fn encode(message: Message) -> Result<Vec<u8>, DistError> {
    let mut frame = vec![0, 0, 0, 0, PASS_THROUGH];
    message
        .write_into(&mut frame)
        .map_err(|e| DistError::Encode(e.to_string()))?;
    let len = u32::try_from(frame.len() - 4).map_err(|_| DistError::Encode("too large".into()))?;
    frame[..4].copy_from_slice(&len.to_be_bytes());
    Ok(frame)
}

/// What the reader asks of the writer.
#[derive(Default)]
struct Signals {
    /// The peer ticked: tick back.
    peer_ticked: Notify,
    /// The peer has been silent for a while: send the liveness probe.
    probe: Notify,
}

/// What the writer sends next.
enum Out {
    Frames(Vec<u8>),
    Tick,
    Probe,
}

async fn write_loop(
    write: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Vec<u8>>,
    signals: Arc<Signals>,
    probe: Vec<u8>,
    tick_interval: Duration,
    closed: Arc<Closed>,
) {
    let mut out = BufWriter::new(write);
    loop {
        let next = tokio::select! {
            _ = closed.token.cancelled() => return,
            _ = signals.peer_ticked.notified() => Out::Tick,
            _ = signals.probe.notified() => Out::Probe,
            next = tokio::time::timeout(tick_interval, queue.recv()) => match next {
                Ok(Some(frame)) => Out::Frames(frame),
                // Every handle is gone: the connection is being dropped.
                Ok(None) => return,
                Err(_) => Out::Tick,
            },
        };
        // A frozen peer stops reading and our writes block: never past a close.
        let written = tokio::select! {
            _ = closed.token.cancelled() => return,
            written = write_out(&mut out, next, &mut queue, &probe) => written,
        };
        if let Err(e) = written {
            closed.close(format!("writing to the node failed: {e}"));
            return;
        }
    }
}

async fn write_out(
    out: &mut BufWriter<OwnedWriteHalf>,
    next: Out,
    queue: &mut mpsc::Receiver<Vec<u8>>,
    probe: &[u8],
) -> std::io::Result<()> {
    match next {
        Out::Frames(frame) => {
            out.write_all(&frame).await?;
            // Batch whatever else is already queued into the same flush.
            while let Ok(frame) = queue.try_recv() {
                out.write_all(&frame).await?;
            }
        }
        Out::Tick => out.write_all(&[0, 0, 0, 0]).await?,
        Out::Probe => out.write_all(probe).await?,
    }
    out.flush().await
}

async fn read_loop(
    mut read: OwnedReadHalf,
    waiters: Arc<Waiters>,
    events: mpsc::Sender<Term>,
    signals: Arc<Signals>,
    net_ticktime: Duration,
    closed: Arc<Closed>,
    peer: String,
) {
    let inbound = Inbound::default();
    let reason = tokio::select! {
        _ = closed.token.cancelled() => None,
        reason = read_frames(&mut read, &waiters, &events, &signals, &inbound) => Some(reason),
        reason = watch_silence(&inbound, net_ticktime, &signals) => Some(reason),
    };
    if let Some(reason) = reason {
        tracing::debug!(%peer, %reason, "distribution connection closed");
        closed.close(reason);
    }
    // Waking every caller now beats letting each run into its timeout.
    waiters.lock().expect("waiters lock").clear();
}

/// When the last bytes arrived from the peer.
struct Inbound {
    since: Instant,
    last_ms: AtomicU64,
}

impl Default for Inbound {
    fn default() -> Self {
        Self {
            since: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }
}

impl Inbound {
    fn touch(&self) {
        let now = self.since.elapsed().as_millis() as u64;
        self.last_ms.store(now, Ordering::Relaxed);
    }

    fn silent_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.since.elapsed().saturating_sub(last)
    }
}

/// Returns (the reason) once the peer has sent nothing for `net_ticktime`; probes it after
/// half of that. Checked every quarter, so a dead link is noticed within 1.25 × `net_ticktime`.
async fn watch_silence(inbound: &Inbound, net_ticktime: Duration, signals: &Signals) -> String {
    loop {
        tokio::time::sleep(net_ticktime / 4).await;
        let silent = inbound.silent_for();
        if silent >= net_ticktime {
            return format!(
                "nothing received for {} ms (net_ticktime {} ms): the node is frozen, \
                 overloaded or unreachable",
                silent.as_millis(),
                net_ticktime.as_millis()
            );
        }
        if silent >= net_ticktime / 2 {
            signals.probe.notify_one();
        }
    }
}

/// Reads frames until the socket fails; returns why.
async fn read_frames(
    read: &mut OwnedReadHalf,
    waiters: &Waiters,
    events: &mpsc::Sender<Term>,
    signals: &Signals,
    inbound: &Inbound,
) -> String {
    let failed = |e: std::io::Error| match e.kind() {
        ErrorKind::UnexpectedEof => "the node closed the connection".to_string(),
        _ => format!("reading from the node failed: {e}"),
    };
    loop {
        let len = match read.read_u32().await {
            Ok(len) => len as usize,
            Err(e) => return failed(e),
        };
        inbound.touch();
        if len == 0 {
            signals.peer_ticked.notify_one();
            continue;
        }
        if len > MAX_FRAME_BYTES {
            return format!(
                "the node sent a frame of {len} bytes, over the {MAX_FRAME_BYTES} byte cap"
            );
        }
        let mut buf = vec![0; len];
        if let Err(e) = read.read_exact(&mut buf).await {
            return failed(e);
        }
        inbound.touch();
        if buf[0] != PASS_THROUGH {
            return format!("the node sent an unexpected frame tag {}", buf[0]);
        }
        let message = match Message::read_from(&mut &buf[1..]) {
            Ok(message) => message,
            Err(e) => {
                // One undecodable signal (e.g. an op erl_dist lacks) must not kill the link.
                tracing::debug!(error = %e, "ignoring undecodable distribution message");
                continue;
            }
        };
        match classify(message) {
            Some(Incoming::Reply(id, reply)) => {
                if let Some(waiter) = waiters.lock().expect("waiters lock").remove(&id) {
                    let _ = waiter.send(reply);
                }
            }
            // A full queue means nobody keeps up: drop rather than grow.
            Some(Incoming::Other(event)) => {
                let _ = events.try_send(event);
            }
            None => {}
        }
    }
}

/// A message sent to our pid: a reply `{Id, Reply}` to a call, or anything else (events the
/// node pushes to us).
enum Incoming {
    Reply(i32, Term),
    Other(Term),
}

fn classify(message: Message) -> Option<Incoming> {
    let term = match message {
        Message::Send(m) => m.message,
        Message::SendSender(m) => m.message,
        Message::SendTt(m) => m.message,
        Message::SendSenderTt(m) => m.message,
        _ => return None,
    };
    match term {
        Term::Tuple(Tuple { elements }) if elements.len() == 2 => {
            if let [Term::FixInteger(FixInteger { value }), _] = elements.as_slice() {
                let id = *value;
                let reply = elements.into_iter().nth(1)?;
                return Some(Incoming::Reply(id, reply));
            }
            Some(Incoming::Other(Term::Tuple(Tuple { elements })))
        }
        other => Some(Incoming::Other(other)),
    }
}
