//! Starting a cluster's members at once: a new cluster (`start_cluster`) or the known members
//! of one again (`start_cluster_again`). Each member is introduced to the others as soon as
//! its helper is up, so that its application starts in the cluster, and all of them once more
//! at the end.

use super::{check_readiness, member_configs, member_names, Cluster, MAX_MEMBERS};
use crate::helper::ToolCall;
use crate::node::child_config::NodeConfig;
use crate::node::node_status::NodeStatus;
use crate::node::persist::Membership;
use crate::node::registry::Entry;
use crate::node::supervisor::{self, Supervised};
use crate::node::{NodeError, Registry};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long each member of a started cluster has to connect to the others.
const INTRODUCE_LIMIT: Duration = Duration::from_secs(5);

/// A member to start: its child and its new config (none: its last), or why it cannot start.
type MemberStart = Result<(Arc<Supervised>, Option<NodeConfig>), NodeError>;

impl Registry {
    /// Starts cluster `base.name` of `count` members ([`members`](super::members)): the first
    /// alone (a Mix project compiles once), then the others at once, each introduced to the
    /// others as it comes up ([`start_members`](Self::start_members)), all of them once more
    /// at the end ([`introduce`](Self::introduce)). Each member's result, in order; an error
    /// before any member starts.
    pub async fn start_cluster(
        &self,
        base: NodeConfig,
        count: usize,
        connect: bool,
    ) -> Result<Vec<(String, Result<NodeStatus, NodeError>)>, NodeError> {
        self.refuse_if_shutting_down()?;
        check_readiness(&base.readiness).map_err(NodeError::BadConfig)?;
        if !(2..=MAX_MEMBERS).contains(&count) {
            return Err(NodeError::BadConfig(format!(
                "`nodes` must be 2..={} (leave it out for one node)",
                MAX_MEMBERS
            )));
        }
        let names = member_names(&base.name, count);
        let members: Vec<(String, String)> = names
            .iter()
            .map(|n| (n.clone(), supervisor::node_name(n, &self.node_suffix)))
            .collect();
        let cookie = supervisor::random_cookie();
        let configs = member_configs(&base, &members, &cookie, connect);
        // Each member's own (its `{index}` filled in), before any member starts.
        for config in &configs {
            config.validate()?;
        }
        {
            let mut clusters = self.clusters.lock().expect("clusters lock");
            let nodes = self.nodes();
            check_new(&base.name, &names, clusters.get(&base.name), &nodes)?;
            clusters.insert(
                base.name.clone(),
                Cluster {
                    members: names.clone(),
                    found_by: None,
                },
            );
        }
        let mut configs = configs.into_iter();
        let start = |config: NodeConfig| {
            let node = self.prepare_start(&config)?;
            node.set_introduced(connect);
            if let Some(store) = &self.store {
                let index = names.iter().position(|n| *n == config.name).unwrap_or(0) + 1;
                let name = base.name.clone();
                store.joined(
                    &config.name,
                    Membership {
                        name,
                        index,
                        connect,
                    },
                );
            }
            Ok((node, Some(config)))
        };
        let up = connect.then(Mutex::default);
        let first = configs.next().expect("two members at least");
        let mut results = self
            .start_members(vec![(first.name.clone(), start(first))], up.as_ref())
            .await;
        let rest = configs.map(|c| (c.name.clone(), start(c))).collect();
        results.extend(self.start_members(rest, up.as_ref()).await);
        if connect {
            self.introduce(&base.name, INTRODUCE_LIMIT).await;
        }
        Ok(results)
    }

    /// Starts the known members of cluster `name` again, all at once, then introduces them
    /// to each other when `connect`. Each member's result, in order.
    pub async fn start_cluster_again(
        &self,
        name: &str,
        connect: bool,
    ) -> Result<Vec<(String, Result<NodeStatus, NodeError>)>, NodeError> {
        self.refuse_if_shutting_down()?;
        let members = self.cluster_members(name)?;
        let starts = members
            .into_iter()
            .map(|m| {
                let node = self.child(&m).inspect(|node| node.set_introduced(connect));
                (m, node.map(|node| (node, None)))
            })
            .collect();
        let up = connect.then(Mutex::default);
        let results = self.start_members(starts, up.as_ref()).await;
        if connect {
            self.introduce(name, INTRODUCE_LIMIT).await;
        }
        Ok(results)
    }

    /// Starts members at once (each a child and its new config, or why it cannot start),
    /// each in a task of its own: a caller that goes away does not cut a start short. With
    /// `up` (the node names of the members whose helpers are up), each member is introduced
    /// as soon as its helper is up to the members up before it (both have their cookies by
    /// then); its boot waits for that, so its application starts in the cluster.
    async fn start_members(
        &self,
        starts: Vec<(String, MemberStart)>,
        up: Option<&Mutex<Vec<String>>>,
    ) -> Vec<(String, Result<NodeStatus, NodeError>)> {
        let starts = starts.into_iter().map(|(name, start)| async move {
            let (node, config) = match start {
                Ok(start) => start,
                Err(e) => return (name, Err(e)),
            };
            let introduce = async {
                let Some(up) = up else {
                    return std::future::pending().await;
                };
                // The start's own timeout ends the wait first (see below).
                if !node
                    .helper_up(crate::bounds::START_TIMEOUT_MS.clamp_ms(Duration::MAX))
                    .await
                {
                    return std::future::pending().await;
                }
                let peers = {
                    let mut up = up.lock().expect("up lock");
                    let peers = up.join(",");
                    up.push(node.node_name.clone());
                    peers
                };
                // Even with no peers up yet: the member's boot waits to hear it is connected.
                let call = ToolCall::new("heal")
                    .text("peers", peers.as_str())
                    .with_timeout(INTRODUCE_LIMIT);
                let _ = tokio::time::timeout(INTRODUCE_LIMIT, node.client.run_tool(&call)).await;
            };
            let starting = node.clone();
            let mut task = tokio::spawn(async move { starting.start(config).await });
            // A start that ends first (running, or failed) leaves nothing to introduce: the
            // introduction after all starts covers a member cut short here.
            let result = tokio::select! {
                result = &mut task => result,
                () = introduce => task.await,
            };
            let result = result.unwrap_or_else(|e| {
                Err(NodeError::BadConfig(format!(
                    "the start of `{name}` failed: {e}"
                )))
            });
            (name, result)
        });
        futures::future::join_all(starts).await
    }

    /// After a start of the whole cluster `name`, whose members left connecting to this
    /// server: every member connects to the others, now that all have their cookies; a
    /// member that crashes from now on connects itself when it is back.
    async fn introduce(&self, name: &str, limit: Duration) {
        let members = self.members(name).unwrap_or_default();
        for member in &members {
            if let Ok(node) = self.child(member) {
                node.set_introduced(false);
            }
        }
        self.connect_members(&members, limit).await;
    }
}

/// Why a new cluster `name` of members `names` cannot be made beside `nodes`, if it cannot:
/// `known`, the cluster of that name, still has members, or a node has the cluster's name or
/// a member's.
fn check_new(
    name: &str,
    names: &[String],
    known: Option<&Cluster>,
    nodes: &BTreeMap<String, Entry>,
) -> Result<(), NodeError> {
    let mut known = known.into_iter().flat_map(|c| &c.members);
    if known.any(|m| nodes.contains_key(m)) {
        return Err(NodeError::BadConfig(format!(
            "cluster `{name}` exists: `start` it with only its name to start its members \
             again, or `remove` each member to start a new one"
        )));
    }
    if let Some(taken) = std::iter::once(name)
        .chain(names.iter().map(String::as_str))
        .find(|n| nodes.contains_key(*n))
    {
        return Err(NodeError::BadConfig(format!(
            "`{taken}` is already a node: `remove` it or choose another cluster name"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::registry::test_support::*;
    use crate::node::Readiness;

    fn names(of: &[&str]) -> Vec<String> {
        of.iter().map(|n| n.to_string()).collect()
    }

    fn cluster(members: &[&str]) -> Cluster {
        Cluster {
            members: names(members),
            found_by: None,
        }
    }

    #[tokio::test]
    async fn a_new_cluster_needs_its_name_and_its_members_names_free() {
        let registry = registry(8);
        let members = names(&["web-1", "web-2"]);
        assert!(check_new("web", &members, None, &registry.nodes()).is_ok());
        add_child(&registry, "web-2");
        let err = check_new("web", &members, None, &registry.nodes()).unwrap_err();
        assert!(
            err.to_string().contains("`web-2` is already a node"),
            "{err}"
        );
        let err = check_new("web-2", &names(&["web-2-1"]), None, &registry.nodes()).unwrap_err();
        assert!(
            err.to_string().contains("`web-2` is already a node"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_cluster_with_members_left_is_started_by_name_not_anew() {
        let registry = registry(8);
        add_stopped_child(&registry, "web-1").await;
        let known = cluster(&["web-1", "web-2"]);
        let err =
            check_new("web", &names(&["web-1"]), Some(&known), &registry.nodes()).unwrap_err();
        assert!(
            err.to_string()
                .contains("cluster `web` exists: `start` it with only its name"),
            "{err}"
        );
        // Once its members are removed, the name makes a new cluster.
        registry.remove_node("web-1").await.unwrap();
        assert!(check_new("web", &names(&["web-1"]), Some(&known), &registry.nodes()).is_ok());
    }

    /// Why a start of cluster `base` with `count` members is refused (it must be, before
    /// any member starts).
    async fn refused(registry: &Registry, base: NodeConfig, count: usize) -> String {
        match registry.start_cluster(base, count, true).await {
            Ok(_) => panic!("the cluster was started"),
            Err(e) => e.to_string(),
        }
    }

    #[tokio::test]
    async fn a_cluster_is_refused_before_any_member_starts() {
        let registry = registry(8);
        for count in [1, MAX_MEMBERS + 1] {
            let err = refused(&registry, config("web"), count).await;
            assert!(err.contains("`nodes` must be 2..=32"), "{err}");
        }
        let mut same_port = config("web");
        same_port.readiness = Readiness::Port(4000);
        let err = refused(&registry, same_port, 2).await;
        assert!(err.contains("wait on port 4000 for every member"), "{err}");
        // A member's own config, its index filled in, is checked too: port 65536 is none.
        let mut past_the_ports = config("web");
        past_the_ports.readiness = Readiness::Http("http://127.0.0.1:{65534+index}/".into());
        let err = refused(&registry, past_the_ports, 2).await;
        assert!(err.contains("http://127.0.0.1:65536/"), "{err}");
        assert!(registry.list_nodes().is_empty());
        assert!(registry.cluster_names().is_empty());
        assert!(registry.members("web").is_none());
    }

    #[tokio::test]
    async fn a_cluster_name_is_no_node_name() {
        let registry = registry(8);
        add_child(&registry, "web-1");
        super::super::add_cluster(&registry, "web", &["web-1", "web-2"], None);
        let err = match registry.prepare_start(&config("web")) {
            Ok(_) => panic!("a node took the cluster's name"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("`web` is a cluster"), "{err}");
        let err = refused(&registry, config("web"), 2).await;
        assert!(err.contains("cluster `web` exists"), "{err}");
    }
}
