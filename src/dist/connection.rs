//! One multiplexed connection to a peer node.
//!
//! Callers send `{Id, OurPid, Request}` to a registered process and wait for `{Id, Reply}`.
//! A single reader task routes each reply to the caller waiting on that `Id`; a reply that
//! arrives after its caller gave up (timed out, was cancelled, or dropped its [`PendingCall`])
//! finds no waiter and is dropped, so it can never be handed to another call. A single writer
//! task batches frames and sends ticks when idle; both tasks, and how they keep the connection
//! alive, are [`super::wire`]'s.

use super::connect::connect;
use super::wire::{encode, Closed, Waiters, Wire};
use super::{DistError, DEFAULT_NET_TICKTIME};
use eetf::{Atom, FixInteger, Pid, Term, Tuple};
use erl_dist::message::Message;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Default time allowed for the EPMD lookup and the handshake.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Shortest `net_ticktime` we accept; below it scheduling noise would close healthy links.
const MIN_NET_TICKTIME: Duration = Duration::from_millis(100);

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
        let local = &handshaken.local;
        let self_pid = Pid::new(local.name.to_string(), 1, 0, local.creation.get());
        let wire = Wire::start(
            handshaken.stream,
            &self_pid,
            net_ticktime,
            handshaken.peer.name.to_string(),
        )?;
        Ok(Self {
            shared: Arc::new(Shared {
                peer: node.to_string(),
                self_pid,
                next_id: AtomicI32::new(0),
                waiters: wire.waiters,
                frames: wire.frames,
                closed: wire.closed,
                events: Mutex::new(Some(wire.events)),
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
