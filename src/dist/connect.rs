//! Opening a connection: EPMD port lookup and the client side of the distribution handshake as a
//! hidden node with a unique local name.

use super::DistError;
use erl_dist::epmd::EpmdClient;
use erl_dist::handshake::{ClientSideHandshake, HandshakeError, HandshakeStatus};
use erl_dist::node::{Creation, LocalNode, NodeName, PeerNode};
use erl_dist::DistributionFlags;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::net::TcpStream;
use tokio_util::compat::TokioAsyncReadCompatExt;

/// A handshaken TCP stream, ready for distribution messages.
pub(super) struct Handshaken {
    pub stream: TcpStream,
    pub local: LocalNode,
    pub peer: PeerNode,
}

/// Looks `node` up in EPMD and performs the handshake with `cookie`. `address` reaches the
/// node's host when its name's host part does not resolve from here; as `HOST:PORT` it also
/// names the EPMD port there (a port forwarded through an SSH tunnel, say).
pub(super) async fn connect(
    node: &str,
    address: Option<&str>,
    cookie: &str,
) -> Result<Handshaken, DistError> {
    let peer_name: NodeName = node
        .parse()
        .map_err(|_| DistError::BadNodeName(node.to_string()))?;
    let (host, epmd) = match address {
        Some(address) => split_epmd_port(address),
        None => (peer_name.host(), None),
    };
    let port = epmd_port(&peer_name, host, epmd).await?;
    let stream = TcpStream::connect((host, port))
        .await
        .map_err(|_| DistError::NotRegistered {
            node: node.to_string(),
        })?;
    stream.set_nodelay(true).ok();
    let mut local = LocalNode::new(unique_local_name(&peer_name), Creation::random());
    // Without these the peer drops its answer to our liveness probe (a monitor by name):
    // it only sends `MONITOR_P_EXIT` to nodes that say they understand it.
    local.flags |= DistributionFlags::DIST_MONITOR | DistributionFlags::DIST_MONITOR_NAME;
    let handshake_error = |e: HandshakeError| match e {
        // A peer that dislikes our digest simply closes the socket.
        HandshakeError::CookieMismatch => DistError::AuthFailed {
            node: node.to_string(),
        },
        HandshakeError::Io(io) if io.kind() == ErrorKind::UnexpectedEof => DistError::AuthFailed {
            node: node.to_string(),
        },
        other => DistError::Handshake {
            node: node.to_string(),
            reason: other.to_string(),
        },
    };
    let mut handshake = ClientSideHandshake::new(stream.compat(), local.clone(), cookie);
    let status = handshake
        .execute_send_name(erl_dist::LOWEST_DISTRIBUTION_PROTOCOL_VERSION)
        .await
        .map_err(handshake_error)?;
    if let HandshakeStatus::Alive = status {
        // Cannot happen with a unique local name; refuse rather than hijack a connection.
        return Err(DistError::Handshake {
            node: node.to_string(),
            reason: "peer reports our name as already connected".into(),
        });
    }
    let (stream, peer) = handshake
        .execute_rest(true)
        .await
        .map_err(handshake_error)?;
    Ok(Handshaken {
        stream: stream.into_inner(),
        local,
        peer,
    })
}

/// `HOST:PORT` (or `[V6]:PORT`) as the host and its EPMD port; anything else is a host.
fn split_epmd_port(address: &str) -> (&str, Option<u16>) {
    if let Some((host, port)) = address.rsplit_once(':') {
        let bracketed = host.starts_with('[') && host.ends_with(']');
        if let (Ok(port), true) = (port.parse(), bracketed || !host.contains(':')) {
            return (
                host.trim_start_matches('[').trim_end_matches(']'),
                Some(port),
            );
        }
    }
    (address, None)
}

/// The distribution port `peer` registered in EPMD on `host` (at `epmd`, else at
/// `ERL_EPMD_PORT` or 4369).
async fn epmd_port(peer: &NodeName, host: &str, epmd: Option<u16>) -> Result<u16, DistError> {
    let epmd_port = epmd.unwrap_or_else(|| {
        std::env::var("ERL_EPMD_PORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(erl_dist::epmd::DEFAULT_EPMD_PORT)
    });
    let shown = format!("{host}:{epmd_port}");
    let stream = TcpStream::connect((host, epmd_port))
        .await
        .map_err(|source| DistError::EpmdUnavailable {
            host: shown.clone(),
            source,
        })?;
    let entry = EpmdClient::new(stream.compat())
        .get_node(peer.name())
        .await
        .map_err(|e| DistError::EpmdUnavailable {
            host: shown,
            source: std::io::Error::other(e.to_string()),
        })?;
    entry
        .map(|e| e.port)
        .ok_or_else(|| DistError::NotRegistered {
            node: peer.to_string(),
        })
}

/// Every connection gets its own local node name: a peer that still holds a connection under
/// the same name answers `alive` and erl_dist would wait forever. A random part per server
/// keeps two servers with the same pid (PID 1 in two containers) apart.
fn unique_local_name(peer: &NodeName) -> NodeName {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static SERVER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let server = SERVER.get_or_init(|| {
        format!(
            "{}_{:06x}",
            std::process::id(),
            rand::random::<u32>() & 0xff_ffff
        )
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = format!("os_sup_mcp_{server}_{n}");
    // Long and short names cannot talk to each other: mirror the peer's kind of host.
    let host = if peer.host().contains('.') || peer.host().contains(':') {
        "127.0.0.1".to_string()
    } else {
        peer.host().to_string()
    };
    NodeName::new(&name, &host).expect("generated node name is valid")
}

#[cfg(test)]
mod tests {
    use super::split_epmd_port;

    #[test]
    fn an_address_may_name_the_epmd_port() {
        assert_eq!(split_epmd_port("10.0.0.5"), ("10.0.0.5", None));
        assert_eq!(split_epmd_port("db1.internal"), ("db1.internal", None));
        assert_eq!(
            split_epmd_port("127.0.0.1:14369"),
            ("127.0.0.1", Some(14369))
        );
        assert_eq!(split_epmd_port("[::1]:14369"), ("::1", Some(14369)));
        assert_eq!(split_epmd_port("::1"), ("::1", None));
        assert_eq!(split_epmd_port("fe80::1"), ("fe80::1", None));
        assert_eq!(split_epmd_port("host:notaport"), ("host:notaport", None));
    }
}
