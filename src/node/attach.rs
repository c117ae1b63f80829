//! Attaching to nodes this server did not start, and letting go of them.
//!
//! `attach_node` connects to a node by name and cookie, loads the helper into it and registers
//! it (then asks [`cluster`](super::cluster) for the cluster its connections make);
//! `attach_pending` attaches the members of such a cluster when a call first needs them;
//! `detach_node` forgets a node and stops the helper's server on it. The node itself is an
//! [`Attached`]: this file only moves it in and out of the registry.

use super::attached_node::Attached;
use super::child_config::validate_name;
use super::cluster::Pending;
use super::node_status::NodeStatus;
use super::registry::Entry;
use super::{NodeError, Registry};
use crate::helper;
use std::sync::Arc;
use std::time::Duration;

impl Registry {
    /// Connects to a node this server did not start (`node` is `name@host`), loads the helper
    /// into it over distribution, and registers it under `name`. `address` reaches the host
    /// when the host part of `node` does not resolve from here.
    pub async fn attach_node(
        &self,
        name: &str,
        node: &str,
        cookie: &str,
        address: Option<String>,
    ) -> Result<NodeStatus, NodeError> {
        self.refuse_if_shutting_down()?;
        validate_name(name)?;
        self.check_free(&self.nodes(), name)?;
        let address_for_peers = address.clone();
        let client =
            helper::Client::with_limits(node, cookie, self.call_limits).with_address(address);
        client.attach().await.map_err(|source| NodeError::Attach {
            node: node.to_string(),
            source,
        })?;
        let attached = Arc::new(Attached::new(name.to_string(), client));
        self.register_attached(&attached)?;
        // Known to the server before, attached again: no longer detached.
        self.detached.lock().expect("detached lock").remove(name);
        if let Some(store) = &self.store {
            store.attached(name, node, address_for_peers.as_deref());
        }
        if !self.is_cluster_member(name) {
            self.find_cluster(name, &attached.client, cookie, address_for_peers)
                .await;
        }
        Ok(attached.status())
    }

    /// Puts a node just attached in the table, unless its name was taken or the table
    /// filled up while it was connecting.
    fn register_attached(&self, attached: &Arc<Attached>) -> Result<(), NodeError> {
        let mut nodes = self.nodes();
        self.check_free(&nodes, &attached.name)?;
        nodes.insert(attached.name.clone(), Entry::Attached(attached.clone()));
        Ok(())
    }

    /// Attaches the members of cluster `name` that a call needs and that are not attached
    /// yet (members of a cluster found by `attach`), all at once, each within `limit`. The
    /// members that could not be attached, with why.
    pub async fn attach_pending(&self, name: &str, limit: Duration) -> Vec<(String, String)> {
        self.refresh_found(name, limit).await;
        let members = self.members(name).unwrap_or_default();
        let waiting: Vec<(String, Pending)> = {
            let pending = self.pending.lock().expect("pending lock");
            members
                .iter()
                .filter_map(|m| Some((m.clone(), pending.get(m)?.clone())))
                .collect()
        };
        let attaches = waiting.into_iter().map(|(member, p)| async move {
            let attached = tokio::time::timeout(
                limit,
                self.attach_node(&member, &p.node, &p.cookie, p.address.clone()),
            )
            .await;
            match attached {
                // Attached meanwhile by another call: as good.
                Ok(Ok(_)) | Ok(Err(NodeError::NameTaken { .. })) => {
                    self.pending.lock().expect("pending lock").remove(&member);
                    None
                }
                Ok(Err(e)) => Some((member, format!("not attached: {e}"))),
                Err(_) => Some((member, format!("not attached in {} ms", limit.as_millis()))),
            }
        });
        futures::future::join_all(attaches)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Forgets an attached node after stopping the helper's server on it.
    pub async fn detach_node(&self, name: &str) -> Result<NodeStatus, NodeError> {
        let attached = self.forget_attached(name)?;
        attached.stop_sampling();
        if let Err(e) = attached.client.detach().await {
            tracing::warn!(%name, "detach: the helper did not confirm: {e}");
        }
        Ok(attached.status())
    }

    /// Takes attached node `name` out of the table, with the cluster its attach found (its
    /// attached peers stay, by their names). A child is refused.
    fn forget_attached(&self, name: &str) -> Result<Arc<Attached>, NodeError> {
        let Entry::Attached(attached) = self.get(name)? else {
            return Err(NodeError::BadConfig(format!(
                "node `{name}` was started by this server: `stop` it instead of detaching"
            )));
        };
        self.nodes().remove(name);
        self.forget_found(name);
        if let Some(store) = &self.store {
            store.forget(name);
        }
        Ok(attached)
    }
}

#[cfg(test)]
mod tests {
    use super::super::registry::test_support::*;
    use super::*;
    use crate::node::cluster::Found;
    use crate::node::NodeState;

    #[tokio::test]
    async fn an_attached_node_takes_a_free_name_and_a_slot() {
        let registry = registry(2);
        registry
            .register_attached(&attached("peer", "peer@10.0.0.1"))
            .unwrap();
        let status = registry.node_status("peer").unwrap();
        assert_eq!(
            (status.node.as_str(), status.state),
            ("peer@10.0.0.1", NodeState::Attached)
        );
        // A name taken meanwhile (by a start, or another attach) is not replaced.
        add_stopped_child(&registry, "web").await;
        let err = registry
            .register_attached(&attached("web", "web@10.0.0.2"))
            .unwrap_err();
        assert!(
            matches!(
                err,
                NodeError::NameTaken {
                    state: NodeState::Stopped,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(
            registry.node_status("web").unwrap().state,
            NodeState::Stopped
        );
        add_child(&registry, "api");
        let err = registry
            .register_attached(&attached("other", "other@10.0.0.3"))
            .unwrap_err();
        assert!(matches!(err, NodeError::TooManyNodes { max: 2 }), "{err}");
        assert_eq!(names(&registry), ["api", "peer", "web"]);
    }

    #[tokio::test]
    async fn attach_refuses_a_bad_or_taken_name_before_connecting() {
        let registry = registry(4);
        add_child(&registry, "web");
        // No node answers at these names: an error other than these would mean it connected.
        let err = registry
            .attach_node("web", "web@127.0.0.1", "c", None)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                NodeError::NameTaken {
                    state: NodeState::Starting,
                    ..
                }
            ),
            "{err}"
        );
        let err = registry
            .attach_node("9web", "web@127.0.0.1", "c", None)
            .await
            .unwrap_err();
        assert!(matches!(err, NodeError::InvalidName(_)), "{err}");
    }

    #[tokio::test]
    async fn detach_forgets_the_node_and_the_cluster_its_attach_found() {
        let registry = registry(8);
        let peer = attached("peer", "peer@h1");
        add_attached(&registry, &peer);
        let found = Found {
            via: "peer".into(),
            cookie: "c".into(),
            address: None,
        };
        registry.record_found(found, "peer@h1", vec!["other@h1".into()]);
        assert_eq!(registry.members("peer*").unwrap(), ["peer", "peer-other"]);
        let forgotten = registry.forget_attached("peer").unwrap();
        assert!(Arc::ptr_eq(&forgotten, &peer));
        assert!(names(&registry).is_empty());
        assert_eq!(registry.members("peer*"), None);
        assert!(registry.pending.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_child_is_stopped_not_detached() {
        let registry = registry(4);
        add_stopped_child(&registry, "web").await;
        let err = registry.detach_node("web").await.unwrap_err();
        assert!(err.to_string().contains("`stop` it instead"), "{err}");
        assert_eq!(names(&registry), ["web"]);
    }
}
