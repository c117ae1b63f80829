//! One multiplexed connection to a peer node.
//!
//! Callers send `{Id, OurPid, Request}` to a registered process and wait for `{Id, Reply}`.
//! A single reader task routes each reply to the caller waiting on that `Id`; a reply that
//! arrives after its caller gave up finds no waiter and is dropped, so it can never be handed to
//! another call. A single writer task batches frames and sends ticks when idle.

use super::connect::connect;
use super::DistError;
use eetf::{Atom, FixInteger, Pid, Term, Tuple};
use erl_dist::message::Message;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio_util::sync::CancellationToken;

/// Largest frame we accept from a peer; the helper bounds its replies far below this.
const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;
/// Frames waiting for the writer; callers wait (with their own timeout) when it is full.
const WRITE_QUEUE: usize = 1024;
/// Send a tick when we have written nothing for this long. We also answer every tick the peer
/// sends, so a peer with a short `net_ticktime` hears from us as often as it expects.
const TICK_INTERVAL: Duration = Duration::from_secs(15);
/// Pushed messages (not replies) waiting to be taken; more are dropped.
const EVENT_QUEUE: usize = 4096;
/// Distribution header "pass through" tag: a message with no atom cache.
const PASS_THROUGH: u8 = 112;

type Waiters = Mutex<HashMap<i32, oneshot::Sender<Term>>>;

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
    closed: CancellationToken,
    /// Messages to us that are not replies, until someone takes them.
    events: Mutex<Option<mpsc::Receiver<Term>>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.closed.cancel();
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
        let handshaken = tokio::time::timeout(timeout, connect(node, address, cookie))
            .await
            .map_err(|_| DistError::Timeout {
                node: node.to_string(),
                timeout,
            })??;
        let self_pid = Pid::new(
            handshaken.local.name.to_string(),
            1,
            0,
            handshaken.local.creation.get(),
        );
        let (read, write) = handshaken.stream.into_split();
        let (frames, queue) = mpsc::channel(WRITE_QUEUE);
        let waiters: Arc<Waiters> = Arc::default();
        let closed = CancellationToken::new();
        let peer_ticked = Arc::new(Notify::new());
        tokio::spawn(write_loop(
            write,
            queue,
            peer_ticked.clone(),
            closed.clone(),
        ));
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        tokio::spawn(read_loop(
            read,
            waiters.clone(),
            events_tx,
            peer_ticked,
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

    /// True once the reader or writer saw the socket fail or close.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.is_cancelled()
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

    /// Sends `message(Id, OurPid)` to `to` and waits for `{Id, Reply}`.
    async fn call_with(
        &self,
        to: &str,
        timeout: Duration,
        message: impl FnOnce(Term, Term) -> Term,
    ) -> Result<Term, DistError> {
        let shared = &self.shared;
        // Ids stay positive small integers; wrapping after 2^31 calls is harmless because a
        // waiter never lives longer than its timeout.
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        let (reply_tx, reply_rx) = oneshot::channel();
        shared
            .waiters
            .lock()
            .expect("waiters lock")
            .insert(id, reply_tx);
        let _forget = ForgetOnDrop {
            waiters: &shared.waiters,
            id,
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
        let lost = || DistError::ConnectionLost {
            node: shared.peer.clone(),
        };
        let timed_out = || DistError::Timeout {
            node: shared.peer.clone(),
            timeout,
        };
        tokio::time::timeout(timeout, async {
            if shared.closed.is_cancelled() {
                return Err(lost());
            }
            shared.frames.send(frame).await.map_err(|_| lost())?;
            tokio::select! {
                reply = reply_rx => reply.map_err(|_| lost()),
                _ = shared.closed.cancelled() => Err(lost()),
            }
        })
        .await
        .map_err(|_| timed_out())?
    }
}

/// Removes a caller's waiter however the call ends (reply, timeout, cancellation).
struct ForgetOnDrop<'a> {
    waiters: &'a Waiters,
    id: i32,
}

impl Drop for ForgetOnDrop<'_> {
    fn drop(&mut self) {
        self.waiters.lock().expect("waiters lock").remove(&self.id);
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

async fn write_loop(
    write: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Vec<u8>>,
    peer_ticked: Arc<Notify>,
    closed: CancellationToken,
) {
    let mut out = BufWriter::new(write);
    loop {
        let next = tokio::select! {
            _ = closed.cancelled() => break,
            _ = peer_ticked.notified() => Err(()),
            next = tokio::time::timeout(TICK_INTERVAL, queue.recv()) => next.map_err(|_| ()),
        };
        let result = match next {
            Ok(Some(frame)) => {
                let mut result = out.write_all(&frame).await;
                // Batch whatever else is already queued into the same flush.
                while let (Ok(()), Ok(frame)) = (&result, queue.try_recv()) {
                    result = out.write_all(&frame).await;
                }
                result
            }
            Ok(None) => break,
            Err(()) => out.write_all(&[0, 0, 0, 0]).await,
        };
        if result.is_err() || out.flush().await.is_err() {
            break;
        }
    }
    closed.cancel();
}

async fn read_loop(
    mut read: OwnedReadHalf,
    waiters: Arc<Waiters>,
    events: mpsc::Sender<Term>,
    peer_ticked: Arc<Notify>,
    closed: CancellationToken,
    peer: String,
) {
    let outcome = tokio::select! {
        _ = closed.cancelled() => Ok(()),
        outcome = read_frames(&mut read, &waiters, &events, &peer_ticked) => outcome,
    };
    if let Err(reason) = outcome {
        tracing::debug!(%peer, %reason, "distribution connection closed");
    }
    closed.cancel();
    // Waking every caller now beats letting each run into its timeout.
    waiters.lock().expect("waiters lock").clear();
}

async fn read_frames(
    read: &mut OwnedReadHalf,
    waiters: &Waiters,
    events: &mpsc::Sender<Term>,
    peer_ticked: &Notify,
) -> Result<(), String> {
    loop {
        let len = read.read_u32().await.map_err(|e| e.to_string())? as usize;
        if len == 0 {
            peer_ticked.notify_one();
            continue;
        }
        if len > MAX_FRAME_BYTES {
            return Err(format!(
                "frame of {len} bytes exceeds the {MAX_FRAME_BYTES} byte cap"
            ));
        }
        let mut buf = vec![0; len];
        read.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
        if buf[0] != PASS_THROUGH {
            return Err(format!("unexpected frame tag {}", buf[0]));
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
