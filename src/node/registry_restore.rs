//! A server on a state dir that a server before used (`--state-dir`): the nodes it recorded
//! come back into the table, stopped, with how that server ended as their last exit and their
//! log read back from disk; its clusters come back too. `start NAME` starts one again from its
//! record; [`Registry::resume`] (`--resume`) starts every node that was up when it ended.
//!
//! Records hold no secret: a cluster's members get a new shared cookie here, and their own
//! variables (`OS_SUP_NODE_INDEX`, `OS_SUP_CLUSTER`, with this server's node names) again; any
//! other variable's value was never written, and the node's last exit says so. A node it
//! had attached to is listed as `detached` (its cookie is never kept) until attached again.

use super::cluster::Cluster;
use super::node_status::{NodeState, NodeStatus};
use super::persist::{Loaded, NodeStore};
use super::registry::Entry;
use super::supervisor;
use super::Registry;
use std::collections::BTreeMap;
use std::sync::Arc;

impl Registry {
    /// Records nodes in `store` for the next server, and reads their logs back from it.
    pub fn with_store(mut self, store: Arc<NodeStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Puts every node of `loaded` in the table, stopped, and its clusters; answers one line
    /// per node.
    pub fn restore(&self, loaded: &Loaded) -> Vec<String> {
        let mut clusters: BTreeMap<&str, Vec<(usize, &str)>> = BTreeMap::new();
        for record in &loaded.records {
            if let Some(member) = &record.cluster {
                clusters
                    .entry(&member.name)
                    .or_default()
                    .push((member.index, &record.name));
            }
        }
        for members in clusters.values_mut() {
            members.sort();
        }
        let cookies: BTreeMap<&str, String> = clusters
            .keys()
            .map(|c| (*c, supervisor::random_cookie()))
            .collect();
        let mut lines = Vec::new();
        for record in &loaded.records {
            let mut config = match record.spec.to_config(&record.name) {
                Ok(config) => config,
                Err(e) => {
                    lines.push(format!("{}: not restored: {e}", record.name));
                    continue;
                }
            };
            if let Some(member) = &record.cluster {
                config.cookie = cookies.get(member.name.as_str()).cloned();
                config
                    .env
                    .insert("OS_SUP_NODE_INDEX".into(), member.index.to_string());
                if member.connect {
                    let peers: Vec<String> = clusters[member.name.as_str()]
                        .iter()
                        .map(|(_, m)| supervisor::node_name(m, &self.node_suffix))
                        .collect();
                    config.env.insert("OS_SUP_CLUSTER".into(), peers.join(","));
                }
            }
            let missing = record.spec.env_missing();
            let why = if missing.is_empty() {
                loaded.previous.clone()
            } else {
                format!(
                    "{}; the values of its env {} were not kept (never written to disk): \
                     `start` it with its `path` or `command` and `env` to give them",
                    loaded.previous,
                    missing.join(", ")
                )
            };
            let node = self.new_child(config);
            node.restored(why.clone());
            let cluster = record
                .cluster
                .as_ref()
                .map(|m| format!(" (member {} of cluster {})", m.index, m.name))
                .unwrap_or_default();
            lines.push(format!("{}{cluster}: stopped ({why})", record.name));
            self.nodes().insert(record.name.clone(), Entry::Child(node));
        }
        for record in &loaded.attached {
            let why = format!(
                "{}; it was attached to {}: `attach` it again (its cookie is never kept)",
                loaded.previous, record.node
            );
            lines.push(format!("{}: detached ({why})", record.name));
            let status = NodeStatus {
                last_exit: Some(why),
                ..NodeStatus::bare(&record.name, &record.node, NodeState::Detached)
            };
            self.detached
                .lock()
                .expect("detached lock")
                .insert(record.name.clone(), status);
        }
        let mut table = self.clusters.lock().expect("clusters lock");
        for (name, members) in clusters {
            table.insert(
                name.to_string(),
                Cluster {
                    members: members.into_iter().map(|(_, m)| m.to_string()).collect(),
                    found_by: None,
                },
            );
        }
        lines
    }

    /// Starts again, each in a task of its own, every node of `loaded` that was up when the
    /// server before ended (a cluster's members together). Each task logs how it went.
    pub fn resume(self: &Arc<Self>, loaded: &Loaded) {
        let mut clusters = BTreeMap::new();
        for record in loaded.records.iter().filter(|r| r.up) {
            let registry = self.clone();
            match &record.cluster {
                Some(member) => {
                    clusters.insert(member.name.clone(), member.connect);
                }
                None => {
                    let name = record.name.clone();
                    tokio::spawn(async move {
                        match registry.start_existing(&name).await {
                            Ok(status) => tracing::info!(%name, node = %status.node, "resumed"),
                            Err(e) => tracing::error!(%name, "not resumed: {e}"),
                        }
                    });
                }
            }
        }
        for (name, connect) in clusters {
            let registry = self.clone();
            tokio::spawn(async move {
                match registry.start_cluster_again(&name, connect).await {
                    Ok(results) => {
                        for (member, result) in results {
                            match result {
                                Ok(_) => tracing::info!(name = %member, cluster = %name, "resumed"),
                                Err(e) => {
                                    tracing::error!(name = %member, cluster = %name, "not resumed: {e}")
                                }
                            }
                        }
                    }
                    Err(e) => tracing::error!(cluster = %name, "not resumed: {e}"),
                }
            });
        }
    }
}
