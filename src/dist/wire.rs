//! The socket side of one connection: a writer task that batches frames, ticks when idle and
//! probes a silent peer, and a reader task that hands each reply to the caller waiting on its
//! `Id`, queues every other message as an event, and closes the connection when the peer falls
//! silent.
//!
//! Liveness, after Erlang's `net_ticktime` (T): the writer ticks when it has sent nothing for
//! T/4 and answers every tick of the peer; the reader closes the connection when nothing at all
//! arrived for T, which wakes every waiting caller with [`DistError::ConnectionLost`] instead of
//! letting each wait out its timeout. A peer is not obliged to tick as often as we expect (its
//! own `net_ticktime` may be longer), so after T/2 of silence the writer sends a probe that the
//! peer's runtime answers by itself, without any of its processes: a monitor of a name nobody
//! registers, answered at once with a `noproc` monitor exit. Only a frozen peer or a broken
//! network stays silent.

use super::DistError;
use eetf::{Atom, FixInteger, Pid, Reference, Term, Tuple};
use erl_dist::message::Message;
use erl_dist::term::PidOrAtom;
use std::collections::HashMap;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio_util::sync::CancellationToken;

/// Largest frame we accept from a peer; the helper bounds its replies far below this.
const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;
/// Frames waiting for the writer; callers wait (with their own timeout) when it is full.
const WRITE_QUEUE: usize = 1024;
/// Bytes the reader asks the socket for at once: a frame's length and the frame itself
/// (and any frames behind it) come in one read rather than two.
const READ_BUFFER: usize = 64 * 1024;
/// Pushed messages (not replies) waiting to be taken; more are dropped.
const EVENT_QUEUE: usize = 4096;
/// Distribution header "pass through" tag: a message with no atom cache.
const PASS_THROUGH: u8 = 112;
/// The name the liveness probe monitors. Nobody registers it, so the peer answers `noproc`.
const PROBE_NAME: &str = "os_sup_mcp_liveness_probe";

/// The callers waiting for a reply, by the `Id` of their request.
pub(super) type Waiters = Mutex<HashMap<i32, oneshot::Sender<Term>>>;

/// What a connection's handles share with its two tasks.
pub(super) struct Wire {
    /// Encoded frames for the writer.
    pub frames: mpsc::Sender<Vec<u8>>,
    pub waiters: Arc<Waiters>,
    pub closed: Arc<Closed>,
    /// Messages to us that are not replies.
    pub events: mpsc::Receiver<Term>,
}

impl Wire {
    /// Starts the writer and the reader on a handshaken `stream`, where we are `self_pid`; the
    /// connection is closed when `peer` (its name, for the log) has sent nothing for
    /// `net_ticktime`.
    pub fn start(
        stream: TcpStream,
        self_pid: &Pid,
        net_ticktime: Duration,
        peer: String,
    ) -> Result<Self, DistError> {
        let probe = encode(Message::monitor_p(
            self_pid.clone(),
            PidOrAtom::Atom(Atom::from(PROBE_NAME)),
            Reference {
                node: self_pid.node.clone(),
                id: vec![1, 0, 0],
                creation: self_pid.creation,
            },
        ))?;
        let (read, write) = stream.into_split();
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
            peer,
        ));
        Ok(Self {
            frames,
            waiters,
            closed,
            events,
        })
    }
}

/// Whether the connection is closed, and the first reason it was.
#[derive(Default)]
pub(super) struct Closed {
    pub token: CancellationToken,
    reason: OnceLock<String>,
}

impl Closed {
    pub fn close(&self, reason: impl Into<String>) {
        let _ = self.reason.set(reason.into());
        self.token.cancel();
    }

    pub fn reason(&self) -> String {
        self.reason
            .get()
            .cloned()
            .unwrap_or_else(|| "the connection was closed".into())
    }
}

/// `message` as one frame: its length, the pass-through tag, the message.
pub(super) fn encode(message: Message) -> Result<Vec<u8>, DistError> {
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
    read: OwnedReadHalf,
    waiters: Arc<Waiters>,
    events: mpsc::Sender<Term>,
    signals: Arc<Signals>,
    net_ticktime: Duration,
    closed: Arc<Closed>,
    peer: String,
) {
    let inbound = Inbound::default();
    let mut read = BufReader::with_capacity(READ_BUFFER, read);
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
    read: &mut BufReader<OwnedReadHalf>,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pid() -> Pid {
        Pid::new("os_sup_mcp@localhost", 1, 0, 7)
    }

    fn int(value: i32) -> Term {
        Term::from(FixInteger::from(value))
    }

    fn atom(name: &str) -> Term {
        Term::from(Atom::from(name))
    }

    #[test]
    fn a_frame_is_its_length_the_pass_through_tag_and_the_message() {
        let message = Message::send(pid(), atom("hello"));
        let frame = encode(message.clone()).unwrap();
        let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - 4);
        assert_eq!(frame[4], PASS_THROUGH);
        let read = Message::read_from(&mut &frame[5..]).unwrap();
        assert_eq!(format!("{read:?}"), format!("{message:?}"));
    }

    #[test]
    fn a_pair_with_an_integer_first_is_a_reply_and_anything_else_an_event() {
        let reply = Term::from(Tuple::from(vec![int(42), atom("ok")]));
        match classify(Message::send(pid(), reply)) {
            Some(Incoming::Reply(42, term)) => assert_eq!(term, atom("ok")),
            _ => panic!("a reply"),
        }
        let sent_with_sender = Term::from(Tuple::from(vec![int(1), atom("ok")]));
        assert!(matches!(
            classify(Message::send_sender(pid(), pid(), sent_with_sender)),
            Some(Incoming::Reply(1, _))
        ));
        // Not a pair with an id first: an event the node pushed.
        for other in [
            Term::from(Tuple::from(vec![atom("log"), atom("line")])),
            Term::from(Tuple::from(vec![int(1), atom("a"), atom("b")])),
            atom("hello"),
        ] {
            match classify(Message::send(pid(), other.clone())) {
                Some(Incoming::Other(term)) => assert_eq!(term, other),
                _ => panic!("an event: {other}"),
            }
        }
        // Not a message to us at all (a monitor, a link): neither.
        assert!(classify(Message::link(pid(), pid())).is_none());
    }
}
