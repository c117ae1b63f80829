//! Clusters: nodes that connect to each other, started together by this server (`start` with
//! `nodes: N` makes members `NAME-1 … NAME-N`) or found by `attach` (a node connected to
//! others makes cluster `NAME*` of it and its peers). This module owns the cluster table
//! (name → members) and the request that connects members to each other; by concern:
//!
//! - `members.rs`: the member names and each member's configuration (its index, its peers);
//! - `start.rs`: starting all members at once, introduced to each other as they come up;
//! - `view.rs`: what the members see of each other, as a matrix with any split named;
//! - `split.rs`: splitting a cluster in two on purpose (`partition`), and healing it;
//! - `attached_clusters.rs`: clusters found by `attach`, whose peers become members as they appear.
//!
//! The table itself sits in the [`Registry`] (`clusters`, `pending`) beside the node table;
//! everything here is `impl Registry` blocks and the pure parts they are made of.

mod attached_clusters;
mod members;
mod split;
mod start;
mod view;

pub use members::{check_readiness, member_configs, member_names};
pub use view::{ClusterView, MemberView};

use super::{NodeError, Registry};
use crate::helper::ToolCall;
use std::time::Duration;

/// Most members one `start` makes.
pub const MAX_MEMBERS: usize = 32;

/// How long each member of a cluster may take to say whom it sees (all are asked at once).
pub const VIEW_LIMIT: Duration = Duration::from_secs(3);

/// A cluster's member names, and for a cluster found by `attach` how it was found.
pub(super) struct Cluster {
    pub(super) members: Vec<String>,
    pub(super) found_by: Option<Found>,
}

/// How a cluster was found by `attach`: the attached member whose connections make it,
/// asked again before each call on the cluster (peers that joined since become members),
/// and the cookie and address its peers are attached with.
pub(super) struct Found {
    pub(super) via: String,
    pub(super) cookie: String,
    pub(super) address: Option<String>,
}

/// How to attach a member of an attached cluster when a call first needs it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Pending {
    pub(super) node: String,
    pub(super) cookie: String,
    pub(super) address: Option<String>,
}

impl Registry {
    /// The members of cluster `name` this server still knows, or `None` when `name` is no
    /// cluster (or all its members were removed).
    pub fn members(&self, name: &str) -> Option<Vec<String>> {
        let clusters = self.clusters.lock().expect("clusters lock");
        let pending = self.pending.lock().expect("pending lock");
        let nodes = self.nodes();
        let members: Vec<String> = clusters
            .get(name)?
            .members
            .iter()
            .filter(|m| nodes.contains_key(*m) || pending.contains_key(*m))
            .cloned()
            .collect();
        (!members.is_empty()).then_some(members)
    }

    /// The clusters this server started that still have members.
    pub fn cluster_names(&self) -> Vec<String> {
        let names: Vec<String> = self
            .clusters
            .lock()
            .expect("clusters lock")
            .keys()
            .cloned()
            .collect();
        names
            .into_iter()
            .filter(|n| self.members(n).is_some())
            .collect()
    }

    /// [`members`](Self::members), or an error that says how to make a cluster.
    fn cluster_members(&self, name: &str) -> Result<Vec<String>, NodeError> {
        self.members(name).ok_or_else(|| {
            NodeError::BadConfig(format!(
                "`{name}` is no cluster this server started (`start` with `nodes` makes one; \
                 `status` lists the nodes)"
            ))
        })
    }

    /// Whether node `name` is a member of a cluster (a peer of a found cluster is one before
    /// it is attached).
    pub(super) fn is_cluster_member(&self, name: &str) -> bool {
        self.clusters
            .lock()
            .expect("clusters lock")
            .values()
            .flat_map(|c| &c.members)
            .any(|m| m == name)
    }

    /// The Erlang node name of a member: a known node's, or a pending member's.
    fn member_node(&self, member: &str) -> String {
        if let Ok(status) = self.node_status(member) {
            return status.node;
        }
        let pending = self.pending.lock().expect("pending lock");
        pending.get(member).map_or_else(
            || super::supervisor::node_name(member, &self.node_suffix),
            |p| p.node.clone(),
        )
    }

    /// Asks every one of `members` (each within `limit`) to unblock the others and connect
    /// to those it does not see.
    async fn connect_members(&self, members: &[String], limit: Duration) {
        let peers: Vec<String> = members.iter().map(|m| self.member_node(m)).collect();
        let peers = peers.join(",");
        let calls = members.iter().map(|m| {
            let call = ToolCall::new("heal")
                .text("peers", peers.as_str())
                .with_timeout(limit);
            async move { tokio::time::timeout(limit, self.call_tool(m, &call)).await }
        });
        futures::future::join_all(calls).await;
    }
}

/// A cluster the tests put in the table as a start or an attach would.
#[cfg(test)]
fn add_cluster(registry: &Registry, name: &str, members: &[&str], found_by: Option<Found>) {
    registry.clusters.lock().unwrap().insert(
        name.to_string(),
        Cluster {
            members: members.iter().map(|m| m.to_string()).collect(),
            found_by,
        },
    );
}

#[cfg(test)]
mod tests {
    use super::super::registry::test_support::*;
    use super::*;

    #[tokio::test]
    async fn a_cluster_has_the_members_still_known() {
        let registry = registry(8);
        add_cluster(&registry, "web", &["web-1", "web-2", "web-3"], None);
        assert_eq!(registry.members("web"), None, "no member registered yet");
        assert_eq!(registry.cluster_names(), Vec::<String>::new());
        add_child(&registry, "web-1");
        add_stopped_child(&registry, "web-3").await;
        assert_eq!(registry.members("web").unwrap(), ["web-1", "web-3"]);
        registry.remove_node("web-3").await.unwrap();
        assert_eq!(registry.members("web").unwrap(), ["web-1"]);
        assert_eq!(registry.cluster_names(), ["web"]);
        assert_eq!(registry.members("web-1"), None, "a member is no cluster");
        let err = registry.cluster_members("db").unwrap_err();
        assert!(err.to_string().contains("is no cluster"), "{err}");
    }

    #[tokio::test]
    async fn a_pending_member_counts_before_it_is_attached() {
        let registry = registry(8);
        add_cluster(&registry, "a*", &["a", "a-b"], None);
        registry.pending.lock().unwrap().insert(
            "a-b".into(),
            Pending {
                node: "b@h".into(),
                cookie: "c".into(),
                address: None,
            },
        );
        assert_eq!(registry.members("a*").unwrap(), ["a-b"]);
        assert!(registry.is_cluster_member("a-b"));
        assert!(!registry.is_cluster_member("b"));
    }

    #[tokio::test]
    async fn a_member_is_known_by_its_erlang_node_name() {
        let registry = registry(8);
        add_child(&registry, "web-1");
        registry.pending.lock().unwrap().insert(
            "web-2".into(),
            Pending {
                node: "other@h".into(),
                cookie: "c".into(),
                address: None,
            },
        );
        let started = registry.member_node("web-1");
        assert_eq!(started, registry.node_status("web-1").unwrap().node);
        assert_eq!(
            started,
            super::super::supervisor::node_name("web-1", &registry.node_suffix)
        );
        assert_eq!(registry.member_node("web-2"), "other@h");
        // A member removed since: the name it had.
        assert_eq!(
            registry.member_node("web-3"),
            super::super::supervisor::node_name("web-3", &registry.node_suffix)
        );
    }
}
