//! Clusters found by `attach`: a node attached as `NAME` that is connected to others makes
//! cluster `NAME*` of itself and its peers, each a member `NAME-<its node's short name>`
//! pending until a call needs it (then attached with the same cookie). Before each call on
//! the cluster its attached member is asked again, so a node that joined since becomes a
//! member too.
//!
//! Nothing here attaches a node: [`attach`](crate::node::Registry::attach_node) does, and
//! calls in here to find and refresh the cluster.

use super::{Cluster, Found, Pending, MAX_MEMBERS};
use crate::helper::{self, ToolCall};
use crate::node::child_config::validate_name;
use crate::node::registry::Entry;
use crate::node::Registry;
use std::time::Duration;

/// How long an attached node has to say which nodes it is connected to.
const PEERS_LIMIT: Duration = Duration::from_secs(2);

impl Registry {
    /// After attaching `name`, the nodes it is connected to form cluster `NAME*` (`name` and
    /// `NAME-<node>` for each peer, attached with the same cookie when a call needs it).
    pub(in crate::node) async fn find_cluster(
        &self,
        name: &str,
        client: &helper::Client,
        cookie: &str,
        address: Option<String>,
    ) {
        let found = Found {
            via: name.to_string(),
            cookie: cookie.to_string(),
            address,
        };
        let Some(peers) = Self::peers_of(client, PEERS_LIMIT).await else {
            return;
        };
        self.record_found(found, client.node(), peers);
    }

    /// Cluster `VIA*` of the node attached as `found.via` (Erlang node `seen_from`) and
    /// `peers`, the nodes it is connected to; no cluster when it has none.
    pub(in crate::node) fn record_found(&self, found: Found, seen_from: &str, peers: Vec<String>) {
        if peers.is_empty() {
            return;
        }
        let cluster = format!("{}*", found.via);
        self.clusters.lock().expect("clusters lock").insert(
            cluster.clone(),
            Cluster {
                members: vec![found.via.clone()],
                found_by: Some(found),
            },
        );
        self.add_peers(&cluster, seen_from, peers);
    }

    /// Before a call on cluster `name` found by `attach`: the nodes its attached member is
    /// connected to now that are not members yet become members (attached when needed).
    pub(in crate::node) async fn refresh_found(&self, name: &str, limit: Duration) {
        let via = {
            let clusters = self.clusters.lock().expect("clusters lock");
            match clusters.get(name).and_then(|c| c.found_by.as_ref()) {
                Some(found) => found.via.clone(),
                None => return,
            }
        };
        let Ok(Entry::Attached(attached)) = self.get(&via) else {
            return;
        };
        if let Some(peers) = Self::peers_of(&attached.client, limit.min(PEERS_LIMIT)).await {
            self.add_peers(name, &attached.node_name, peers);
        }
    }

    /// Forgets the cluster the attach of `name` found, and its members not attached yet
    /// (those attached stay, by their names).
    pub(in crate::node) fn forget_found(&self, name: &str) {
        if let Some(cluster) = self
            .clusters
            .lock()
            .expect("clusters lock")
            .remove(&format!("{name}*"))
        {
            let mut pending = self.pending.lock().expect("pending lock");
            for member in cluster.members {
                pending.remove(&member);
            }
        }
    }

    /// The nodes `client`'s node is connected to, or `None` when it did not say in `limit`.
    async fn peers_of(client: &helper::Client, limit: Duration) -> Option<Vec<String>> {
        let call = ToolCall::new("cluster_view").with_timeout(limit);
        let reply = tokio::time::timeout(limit, client.run_tool(&call))
            .await
            .ok()?
            .ok()?;
        Some(super::view::node_list(&reply.data, "nodes"))
    }

    /// Adds `peers` (Erlang node names seen from node `seen_from`) that are not members of
    /// found cluster `cluster` yet, as pending members `BASE-<node>`.
    fn add_peers(&self, cluster: &str, seen_from: &str, peers: Vec<String>) {
        let own_host = host_of(seen_from);
        let mut clusters = self.clusters.lock().expect("clusters lock");
        let Some(entry) = clusters.get_mut(cluster) else {
            return;
        };
        let Some(found) = &entry.found_by else {
            return;
        };
        // The order `members` takes these locks in.
        let mut pending = self.pending.lock().expect("pending lock");
        let nodes = self.nodes();
        let known = |peer: &str, member: &String| {
            pending.get(member).is_some_and(|p| p.node == peer)
                || nodes.get(member).is_some_and(|e| e.status().node == peer)
        };
        let new: Vec<String> = peers
            .into_iter()
            .filter(|peer| !entry.members.iter().any(|m| known(peer, m)))
            .collect();
        for peer in new {
            if entry.members.len() >= MAX_MEMBERS {
                break;
            }
            let Some(member) = peer_member_name(&found.via, &peer) else {
                continue;
            };
            if nodes.contains_key(&member) || entry.members.contains(&member) {
                continue;
            }
            // The address reaches the attached node's host; a peer elsewhere resolves its own.
            let address = (host_of(&peer) == own_host)
                .then(|| found.address.clone())
                .flatten();
            pending.insert(
                member.clone(),
                Pending {
                    node: peer,
                    cookie: found.cookie.clone(),
                    address,
                },
            );
            entry.members.push(member);
        }
    }
}

/// The host part of Erlang node name `node` (empty when it has none).
fn host_of(node: &str) -> String {
    node.split('@').nth(1).unwrap_or("").to_string()
}

/// The member a found cluster's peer `peer` (an Erlang node name) becomes: `VIA-<its short
/// name>`, with anything a node name may not hold made `_`, at most 40 characters of it;
/// `None` when that is no valid name.
fn peer_member_name(via: &str, peer: &str) -> Option<String> {
    let short: String = peer
        .split('@')
        .next()
        .unwrap_or("")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let member = format!("{via}-{short}");
    validate_name(&member).is_ok().then_some(member)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::registry::test_support::*;

    fn found(via: &str, address: Option<&str>) -> Found {
        Found {
            via: via.into(),
            cookie: "secret".into(),
            address: address.map(String::from),
        }
    }

    fn pending(registry: &Registry, member: &str) -> Option<Pending> {
        registry.pending.lock().unwrap().get(member).cloned()
    }

    #[test]
    fn a_peer_member_is_named_after_its_node() {
        assert_eq!(peer_member_name("a", "b@host").as_deref(), Some("a-b"));
        assert_eq!(
            peer_member_name("a", "my.app+1@host").as_deref(),
            Some("a-my_app_1")
        );
        let long = format!("{}@h", "x".repeat(50));
        assert_eq!(
            peer_member_name("a", &long),
            Some(format!("a-{}", "x".repeat(40)))
        );
        // Over 64 characters in all: no valid name.
        assert_eq!(peer_member_name(&"v".repeat(30), &long), None);
    }

    #[tokio::test]
    async fn the_peers_of_an_attached_node_make_a_cluster_of_pending_members() {
        let registry = registry(8);
        add_attached(&registry, &attached("shop", "shop@h1"));
        let peers = vec!["cart@h1".to_string(), "pay@h2".to_string()];
        registry.record_found(found("shop", Some("10.0.0.1")), "shop@h1", peers);
        assert_eq!(
            registry.members("shop*").unwrap(),
            ["shop", "shop-cart", "shop-pay"]
        );
        assert_eq!(registry.cluster_names(), ["shop*"]);
        // Same cookie; the attach's address only for a peer on the attached node's host.
        let cart = pending(&registry, "shop-cart").unwrap();
        assert_eq!(
            cart,
            Pending {
                node: "cart@h1".into(),
                cookie: "secret".into(),
                address: Some("10.0.0.1".into()),
            }
        );
        assert_eq!(pending(&registry, "shop-pay").unwrap().address, None);
        assert!(registry.is_cluster_member("shop-pay"));
    }

    #[tokio::test]
    async fn a_node_with_no_peers_makes_no_cluster() {
        let registry = registry(8);
        add_attached(&registry, &attached("shop", "shop@h1"));
        registry.record_found(found("shop", None), "shop@h1", Vec::new());
        assert_eq!(registry.members("shop*"), None);
        assert!(!registry.is_cluster_member("shop"));
    }

    #[tokio::test]
    async fn a_peer_seen_again_is_not_added_twice() {
        let registry = registry(8);
        add_attached(&registry, &attached("shop", "shop@h1"));
        registry.record_found(found("shop", None), "shop@h1", vec!["cart@h1".into()]);
        // Seen again (pending, then attached under its member name), and a new one joined.
        registry.add_peers("shop*", "shop@h1", vec!["cart@h1".into()]);
        add_attached(&registry, &attached("shop-cart", "cart@h1"));
        registry.pending.lock().unwrap().remove("shop-cart");
        let again = vec!["cart@h1".into(), "stock@h1".into()];
        registry.add_peers("shop*", "shop@h1", again);
        assert_eq!(
            registry.members("shop*").unwrap(),
            ["shop", "shop-cart", "shop-stock"]
        );
    }

    #[tokio::test]
    async fn a_peer_whose_name_is_taken_is_left_out() {
        let registry = registry(8);
        add_attached(&registry, &attached("shop", "shop@h1"));
        add_child(&registry, "shop-cart");
        registry.record_found(found("shop", None), "shop@h1", vec!["cart@h1".into()]);
        assert_eq!(registry.members("shop*").unwrap(), ["shop"]);
        assert!(registry.pending.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_found_cluster_grows_to_the_member_limit_at_most() {
        let registry = registry(8);
        add_attached(&registry, &attached("big", "big@h"));
        let peers = (0..MAX_MEMBERS + 5).map(|i| format!("n{i}@h")).collect();
        registry.record_found(found("big", None), "big@h", peers);
        let members = registry.members("big*").unwrap();
        assert_eq!(members.len(), MAX_MEMBERS);
        assert_eq!(members[1], "big-n0");
    }

    #[tokio::test]
    async fn only_a_found_cluster_takes_peers() {
        let registry = registry(8);
        add_child(&registry, "web-1");
        super::super::add_cluster(&registry, "web", &["web-1"], None);
        registry.add_peers("web", "web-1@h", vec!["intruder@h".into()]);
        assert_eq!(registry.members("web").unwrap(), ["web-1"]);
    }

    #[tokio::test]
    async fn forgetting_a_found_cluster_drops_its_pending_members() {
        let registry = registry(8);
        add_attached(&registry, &attached("shop", "shop@h1"));
        let peers = vec!["cart@h1".into(), "pay@h1".into()];
        registry.record_found(found("shop", None), "shop@h1", peers);
        registry.forget_found("shop");
        assert_eq!(registry.members("shop*"), None);
        assert!(registry.pending.lock().unwrap().is_empty());
    }
}
