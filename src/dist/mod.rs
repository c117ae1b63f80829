//! Erlang distribution client: EPMD lookup, the hidden-node handshake, and one multiplexed
//! connection per peer node.
//!
//! This layer knows nodes, processes and terms; it never knows what a request means (that is
//! `helper`'s job) nor which tool asked for it.
//!
//! Facts this module is built on (measured when it was written): erl_dist's handshake runs over
//! futures-io (we use `tokio_util::compat`), but after the handshake we frame messages ourselves
//! with `Message::write_into`/`read_from` on a plain tokio `TcpStream`, which gives us one reader
//! task per connection (erl_dist's `Receiver::recv` is not cancel-safe), buffered writes with
//! TCP_NODELAY, and keepalive ticks (erl_dist never sends them).
//!
//! Liveness follows Erlang's `net_ticktime` ([`ConnectOptions::net_ticktime`]): we tick every
//! quarter of it when we have sent nothing, and a connection that has received nothing for a
//! whole `net_ticktime` (a frozen peer, a partition) is closed, failing its waiting calls at once.

mod connect;
mod connection;
mod link;
mod wire;

pub use connection::{ConnectOptions, Connection, PendingCall};
pub use link::Link;

use std::time::Duration;

/// Erlang's default `net_ticktime`: a link silent this long is down.
pub const DEFAULT_NET_TICKTIME: Duration = Duration::from_secs(60);

/// What can go wrong talking to a node over distribution.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    #[error("cannot reach EPMD on {host}: {source}; is an Erlang node running on that host?")]
    EpmdUnavailable {
        host: String,
        source: std::io::Error,
    },
    #[error("node `{node}` is not registered in EPMD (not started yet, or already stopped)")]
    NotRegistered { node: String },
    #[error("authentication with `{node}` failed: the cookie is wrong")]
    AuthFailed { node: String },
    #[error("handshake with `{node}` failed: {reason}")]
    Handshake { node: String, reason: String },
    #[error("invalid node name `{0}`: expected name@host")]
    BadNodeName(String),
    #[error("connection to `{node}` lost: {reason}")]
    ConnectionLost { node: String, reason: String },
    #[error(
        "no reply from `{node}` within {} ms: the node is not answering (busy in work that \
         does not yield, or overloaded); `status` says when it answers again",
        timeout.as_millis()
    )]
    Timeout { node: String, timeout: Duration },
    #[error(
        "cannot connect to `{node}` within {} ms (EPMD lookup and handshake); is the node \
         frozen or overloaded?",
        timeout.as_millis()
    )]
    ConnectTimeout { node: String, timeout: Duration },
    #[error("cannot encode request: {0}")]
    Encode(String),
}

/// One failed connect is reported to every caller waiting for it.
impl Clone for DistError {
    fn clone(&self) -> Self {
        match self {
            Self::EpmdUnavailable { host, source } => Self::EpmdUnavailable {
                host: host.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Self::NotRegistered { node } => Self::NotRegistered { node: node.clone() },
            Self::AuthFailed { node } => Self::AuthFailed { node: node.clone() },
            Self::Handshake { node, reason } => Self::Handshake {
                node: node.clone(),
                reason: reason.clone(),
            },
            Self::BadNodeName(name) => Self::BadNodeName(name.clone()),
            Self::ConnectionLost { node, reason } => Self::ConnectionLost {
                node: node.clone(),
                reason: reason.clone(),
            },
            Self::Timeout { node, timeout } => Self::Timeout {
                node: node.clone(),
                timeout: *timeout,
            },
            Self::ConnectTimeout { node, timeout } => Self::ConnectTimeout {
                node: node.clone(),
                timeout: *timeout,
            },
            Self::Encode(reason) => Self::Encode(reason.clone()),
        }
    }
}
