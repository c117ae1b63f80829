//! Erlang distribution client: EPMD lookup, the hidden-node handshake, and one multiplexed
//! connection per peer node.
//!
//! This layer knows nodes, processes and terms; it never knows what a request means (that is
//! `helper`'s job) nor which tool asked for it.
//!
//! Facts this module is built on (see `shared/DESIGN.md`): erl_dist's handshake runs over
//! futures-io (we use `tokio_util::compat`), but after the handshake we frame messages ourselves
//! with `Message::write_into`/`read_from` on a plain tokio `TcpStream`, which gives us one reader
//! task per connection (erl_dist's `Receiver::recv` is not cancel-safe), buffered writes with
//! TCP_NODELAY, and keepalive ticks (erl_dist never sends them).

mod connect;
mod connection;

pub use connection::Connection;

use std::time::Duration;

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
    #[error("connection to `{node}` lost")]
    ConnectionLost { node: String },
    #[error("no reply from `{node}` within {} ms", timeout.as_millis())]
    Timeout { node: String, timeout: Duration },
    #[error("cannot encode request: {0}")]
    Encode(String),
}
