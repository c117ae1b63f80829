//! The registry of named nodes (children it started and nodes it attached to): the library API
//! that the MCP tools (and Rust users) call.
//!
//! This file owns the node table (names → nodes, sorted by name): looking a name up, adding a
//! child (a start) and forgetting one (`remove`), listing, the limit on live nodes, and the
//! lifecycle calls on one child (start, stop, restart) and on all (shutdown). The rest of the
//! API is `impl Registry` blocks by concern, each using the table through the helpers here:
//! calls on a node in [`calls`](super::calls), attaching and detaching nodes this server did
//! not start in [`attach`](super::attach), clusters in [`cluster`](super::cluster).

use super::attached_node::Attached;
use super::child_config::{validate_name, NodeConfig};
use super::cluster::{Cluster, Pending};
use super::logs::LogLimits;
use super::node_status::{NodeState, NodeStatus};
use super::persist::NodeStore;
use super::state_file::StateFile;
use super::supervisor::Supervised;
use super::NodeError;
use crate::helper::{self, HelperCode};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A name's node: one we started and supervise, or one we attached to.
#[derive(Clone)]
pub(super) enum Entry {
    Child(Arc<Supervised>),
    Attached(Arc<Attached>),
}

impl Entry {
    pub(super) fn status(&self) -> NodeStatus {
        match self {
            Entry::Child(child) => child.status(),
            Entry::Attached(attached) => attached.status(),
        }
    }
}

/// All nodes of one server. Cheap to share (`Arc`); every method is safe to call concurrently.
///
/// Locks, when more than one is held, are taken in this order: `clusters`, `pending`, `nodes`.
pub struct Registry {
    nodes: Mutex<BTreeMap<String, Entry>>,
    helper_code: Arc<HelperCode>,
    /// Makes Erlang node names unique per server (pid and a random part: two servers may share
    /// a pid, e.g. PID 1 in two containers), so they never collide in EPMD.
    pub(super) node_suffix: String,
    shutting_down: AtomicBool,
    state_file: Option<Arc<StateFile>>,
    /// Where nodes are recorded for the next server (`--state-dir`; see `registry_restore`).
    pub(super) store: Option<Arc<NodeStore>>,
    pub(super) log_limits: LogLimits,
    /// Nodes (started or attached) this server keeps at most; with `log_limits` this bounds
    /// the memory all logs can take.
    max_nodes: usize,
    pub(super) call_limits: helper::Limits,
    /// Clusters: name → members (started with `nodes`, or found by `attach`).
    pub(super) clusters: Mutex<BTreeMap<String, Cluster>>,
    /// Members of attached clusters not attached yet: attached when a call needs them.
    pub(super) pending: Mutex<BTreeMap<String, Pending>>,
    /// Nodes the server before attached to, by name (see `registry_restore`), each with its
    /// status: listed until attached again or removed.
    pub(super) detached: Mutex<BTreeMap<String, NodeStatus>>,
}

/// Default for [`Registry::with_limits`].
pub const DEFAULT_MAX_NODES: usize = 32;

impl Registry {
    /// Writes the helper's `.beam` files to a private temp dir; children load them from there.
    pub fn new() -> std::io::Result<Self> {
        Ok(Self {
            nodes: Mutex::default(),
            helper_code: Arc::new(HelperCode::install()?),
            node_suffix: format!("{:04x}_{:x}", rand::random::<u16>(), std::process::id()),
            shutting_down: AtomicBool::new(false),
            state_file: None,
            store: None,
            log_limits: LogLimits::default(),
            max_nodes: DEFAULT_MAX_NODES,
            call_limits: helper::Limits::default(),
            clusters: Mutex::default(),
            pending: Mutex::default(),
            detached: Mutex::default(),
        })
    }

    /// Caps the `eval`s running at once on each node.
    pub fn with_max_evals(mut self, max_evals: usize) -> Self {
        self.call_limits.max_evals = max_evals.max(1);
        self
    }

    /// Caps the number of nodes and each node's log.
    pub fn with_limits(mut self, max_nodes: usize, log_limits: LogLimits) -> Self {
        self.max_nodes = max_nodes.max(1);
        self.log_limits = log_limits;
        self
    }

    /// Records running children in `state_file` for crash recovery (see [`StateFile`]).
    pub fn with_state_file(mut self, state_file: StateFile) -> Self {
        self.state_file = Some(Arc::new(state_file));
        self
    }

    /// The node table, locked.
    pub(super) fn nodes(&self) -> MutexGuard<'_, BTreeMap<String, Entry>> {
        self.nodes.lock().expect("registry lock")
    }

    /// The node named `name`, or an error that lists the known names.
    pub(super) fn get(&self, name: &str) -> Result<Entry, NodeError> {
        validate_name(name)?;
        if let Some(status) = self.detached.lock().expect("detached lock").get(name) {
            return Err(NodeError::NotRunning {
                name: name.to_string(),
                state: status.state,
                hint: status.state.hint(),
            });
        }
        let nodes = self.nodes();
        nodes
            .get(name)
            .cloned()
            .ok_or_else(|| NodeError::UnknownNode {
                name: name.to_string(),
                known: if nodes.is_empty() {
                    "none".into()
                } else {
                    nodes.keys().cloned().collect::<Vec<_>>().join(", ")
                },
            })
    }

    /// The child named `name`; an attached node is refused.
    pub(super) fn child(&self, name: &str) -> Result<Arc<Supervised>, NodeError> {
        match self.get(name)? {
            Entry::Child(child) => Ok(child),
            Entry::Attached(_) => Err(NodeError::AttachedNode {
                name: name.to_string(),
            }),
        }
    }

    /// Only live nodes take a slot: stopped and failed ones are records, kept for their logs
    /// until `remove`d or started again.
    fn check_room(&self, nodes: &BTreeMap<String, Entry>) -> Result<(), NodeError> {
        let live = nodes
            .values()
            .filter(|entry| match entry {
                Entry::Child(child) => {
                    !matches!(child.state(), NodeState::Stopped | NodeState::Failed)
                }
                Entry::Attached(_) => true,
            })
            .count();
        if live >= self.max_nodes {
            return Err(NodeError::TooManyNodes {
                max: self.max_nodes,
            });
        }
        Ok(())
    }

    /// Whether a new node may take `name` in `nodes`: there is room, and no node has it.
    pub(super) fn check_free(
        &self,
        nodes: &BTreeMap<String, Entry>,
        name: &str,
    ) -> Result<(), NodeError> {
        self.check_room(nodes)?;
        match nodes.get(name) {
            Some(existing) => Err(NodeError::NameTaken {
                name: name.to_string(),
                state: existing.status().state,
            }),
            None => Ok(()),
        }
    }

    pub(super) fn refuse_if_shutting_down(&self) -> Result<(), NodeError> {
        if self.shutting_down.load(Ordering::Relaxed) {
            Err(NodeError::ShuttingDown)
        } else {
            Ok(())
        }
    }

    /// Starts a new child, or starts a stopped/failed one again with `config`. Returns once the
    /// node is ready (for Mix projects: the application started).
    pub async fn start_node(&self, config: NodeConfig) -> Result<NodeStatus, NodeError> {
        let node = self.prepare_start(&config)?;
        node.start(Some(config)).await
    }

    /// Like [`start_node`](Self::start_node), in a task of its own; the node is registered
    /// (as `starting`) before this returns, so calls made right after wait for it instead of
    /// finding no such node. The task's result is the start's.
    pub fn spawn_start(
        &self,
        config: NodeConfig,
    ) -> Result<tokio::task::JoinHandle<Result<NodeStatus, NodeError>>, NodeError> {
        let node = self.prepare_start(&config)?;
        Ok(tokio::spawn(async move { node.start(Some(config)).await }))
    }

    /// The child a start of `config` acts on, registered if it is new.
    pub(super) fn prepare_start(&self, config: &NodeConfig) -> Result<Arc<Supervised>, NodeError> {
        self.refuse_if_shutting_down()?;
        config.validate()?;
        if self
            .detached
            .lock()
            .expect("detached lock")
            .contains_key(&config.name)
        {
            return Err(NodeError::NameTaken {
                name: config.name.clone(),
                state: NodeState::Detached,
            });
        }
        if self.members(&config.name).is_some() {
            return Err(NodeError::BadConfig(format!(
                "`{}` is a cluster: `start` it without `path` or `command` to start its \
                 members again, or choose another name",
                config.name
            )));
        }
        let mut nodes = self.nodes();
        match nodes.get(&config.name) {
            Some(Entry::Child(existing)) => Ok(existing.clone()),
            Some(Entry::Attached(_)) => Err(NodeError::AttachedNode {
                name: config.name.clone(),
            }),
            None => {
                self.check_room(&nodes)?;
                let node = self.new_child(config.clone());
                nodes.insert(config.name.clone(), Entry::Child(node.clone()));
                if let Some(store) = &self.store {
                    store.node_changed(config, true);
                }
                Ok(node)
            }
        }
    }

    /// A child of this server (not in the table yet).
    pub(super) fn new_child(&self, config: NodeConfig) -> Arc<Supervised> {
        Arc::new(Supervised::new(
            config,
            self.helper_code.clone(),
            &self.node_suffix,
            self.state_file.clone(),
            self.store.clone(),
            self.log_limits,
            self.call_limits,
        ))
    }

    /// Starts a known (stopped or failed) child again with its last config.
    pub async fn start_existing(&self, name: &str) -> Result<NodeStatus, NodeError> {
        self.refuse_if_shutting_down()?;
        self.child(name)?.start(None).await
    }

    pub async fn stop_node(&self, name: &str) -> Result<NodeStatus, NodeError> {
        Ok(self.child(name)?.stop().await)
    }

    pub async fn restart_node(&self, name: &str) -> Result<NodeStatus, NodeError> {
        self.refuse_if_shutting_down()?;
        self.child(name)?.restart().await
    }

    /// Forgets a stopped or failed child (and its logs), or detaches and forgets an attached
    /// node. A live child must be stopped first.
    pub async fn remove_node(&self, name: &str) -> Result<NodeStatus, NodeError> {
        let detached = self.detached.lock().expect("detached lock").remove(name);
        if let Some(status) = detached {
            if let Some(store) = &self.store {
                store.forget(name);
            }
            return Ok(status);
        }
        match self.get(name)? {
            Entry::Attached(_) => self.detach_node(name).await,
            Entry::Child(child) => {
                let mut nodes = self.nodes();
                let state = child.state();
                if !matches!(state, NodeState::Stopped | NodeState::Failed) {
                    return Err(NodeError::BadConfig(format!(
                        "node `{name}` is {state}: `stop` it first, then `remove` it"
                    )));
                }
                nodes.remove(name);
                drop(nodes);
                if let Some(store) = &self.store {
                    store.forget(name);
                }
                Ok(child.status())
            }
        }
    }

    pub fn node_status(&self, name: &str) -> Result<NodeStatus, NodeError> {
        Ok(self.get(name)?.status())
    }

    /// Every node's status, by name (then the nodes the server before attached to).
    pub fn list_nodes(&self) -> Vec<NodeStatus> {
        let mut listed: Vec<NodeStatus> = self.nodes().values().map(Entry::status).collect();
        let detached = self.detached.lock().expect("detached lock");
        listed.extend(detached.values().cloned());
        listed
    }

    /// Stops every child and detaches from every attached node, in parallel; refuses new starts.
    pub async fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
        if let Some(store) = &self.store {
            // The nodes stopped now were up when the server ended: `--resume` starts them.
            store.freeze();
        }
        let entries: Vec<Entry> = self.nodes().values().cloned().collect();
        futures::future::join_all(entries.into_iter().map(|entry| async move {
            match entry {
                Entry::Child(child) => {
                    child.stop().await;
                }
                Entry::Attached(attached) => {
                    let _ = attached.client.detach().await;
                }
            }
        }))
        .await;
        if let Some(state) = &self.state_file {
            state.remove();
        }
        if let Some(store) = &self.store {
            store.close("exited 0 (it stopped its nodes first)");
        }
    }
}

/// What the other concerns' tests build their registries from: a server's registry with
/// children that are registered but never run, and nodes "attached" without a connection.
#[cfg(test)]
pub(super) mod test_support {
    use super::*;

    /// A registry that keeps at most `max_nodes` live nodes.
    pub fn registry(max_nodes: usize) -> Registry {
        Registry::new()
            .expect("helper code installed")
            .with_limits(max_nodes, LogLimits::default())
    }

    /// A valid config of a child that runs `erl` (never run by these tests).
    pub fn config(name: &str) -> NodeConfig {
        let mut config = NodeConfig::mix(name, "/");
        config.path = None;
        config.command = Some(vec!["erl".into(), "-noshell".into()]);
        config
    }

    /// Registers child `name` as a start would, without starting it (state `starting`).
    pub fn add_child(registry: &Registry, name: &str) -> Arc<Supervised> {
        registry
            .prepare_start(&config(name))
            .expect("child registered")
    }

    /// Registers child `name`, then stops it (it never ran): a record, state `stopped`.
    pub async fn add_stopped_child(registry: &Registry, name: &str) {
        add_child(registry, name);
        registry.stop_node(name).await.expect("stopped");
    }

    /// A node attached as `name` to Erlang node `node`, never connected (the sampling of
    /// its vital signs needs a runtime: call from a `#[tokio::test]`).
    pub fn attached(name: &str, node: &str) -> Arc<Attached> {
        let client = helper::Client::new(node, "cookie");
        Arc::new(Attached::new(name.to_string(), client))
    }

    /// Puts `attached` in the table as `attach_node` does once connected.
    pub fn add_attached(registry: &Registry, attached: &Arc<Attached>) {
        let mut nodes = registry.nodes();
        nodes.insert(attached.name.clone(), Entry::Attached(attached.clone()));
    }

    pub fn names(registry: &Registry) -> Vec<String> {
        registry.list_nodes().into_iter().map(|s| s.name).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    /// Why a start of `config` is refused (it must be).
    fn start_refused(registry: &Registry, config: &NodeConfig) -> NodeError {
        match registry.prepare_start(config) {
            Ok(_) => panic!("the start of `{}` was accepted", config.name),
            Err(e) => e,
        }
    }

    #[tokio::test]
    async fn a_start_registers_a_child_under_its_name_and_finds_it_again() {
        let registry = registry(4);
        let first = add_child(&registry, "web");
        assert_eq!(
            registry.node_status("web").unwrap().state,
            NodeState::Starting
        );
        assert!(Arc::ptr_eq(&registry.child("web").unwrap(), &first));
        // The same name again is the same child (started again), not a second one.
        let again = add_child(&registry, "web");
        assert!(Arc::ptr_eq(&again, &first));
        assert_eq!(names(&registry), ["web"]);
        assert!(registry
            .node_status("web")
            .unwrap()
            .node
            .starts_with("web_"));
    }

    #[tokio::test]
    async fn nodes_are_listed_by_name() {
        let registry = registry(8);
        for name in ["web", "api", "db-2", "db-10"] {
            add_child(&registry, name);
        }
        assert_eq!(names(&registry), ["api", "db-10", "db-2", "web"]);
    }

    #[tokio::test]
    async fn an_unknown_name_is_answered_with_the_known_ones() {
        let registry = registry(4);
        let err = registry.node_status("web").unwrap_err();
        assert!(
            matches!(&err, NodeError::UnknownNode { name, known } if name == "web" && known == "none"),
            "{err}"
        );
        add_child(&registry, "db");
        add_child(&registry, "api");
        let err = registry.node_status("web").unwrap_err();
        assert!(
            matches!(&err, NodeError::UnknownNode { known, .. } if known == "api, db"),
            "{err}"
        );
        let err = registry.node_status("no such name").unwrap_err();
        assert!(matches!(err, NodeError::InvalidName(_)), "{err}");
    }

    #[tokio::test]
    async fn only_live_nodes_take_a_slot() {
        let registry = registry(2);
        add_child(&registry, "a");
        add_child(&registry, "b");
        let err = start_refused(&registry, &config("c"));
        assert!(matches!(err, NodeError::TooManyNodes { max: 2 }), "{err}");
        // A stopped child is a record: it frees its slot and keeps its name.
        registry.stop_node("a").await.unwrap();
        add_child(&registry, "c");
        assert_eq!(names(&registry), ["a", "b", "c"]);
        // An attached node is live.
        let peer = attached("peer", "peer@127.0.0.1");
        assert!(matches!(
            registry.check_free(&registry.nodes(), "peer"),
            Err(NodeError::TooManyNodes { max: 2 })
        ));
        registry.stop_node("b").await.unwrap();
        assert!(registry.check_free(&registry.nodes(), "peer").is_ok());
        add_attached(&registry, &peer);
        assert!(matches!(
            registry.check_free(&registry.nodes(), "d"),
            Err(NodeError::TooManyNodes { max: 2 })
        ));
    }

    #[tokio::test]
    async fn a_taken_name_is_refused_with_its_state() {
        let registry = registry(4);
        add_stopped_child(&registry, "web").await;
        let err = registry.check_free(&registry.nodes(), "web").unwrap_err();
        assert!(
            matches!(err, NodeError::NameTaken { ref name, state: NodeState::Stopped } if name == "web"),
            "{err}"
        );
        assert!(registry.check_free(&registry.nodes(), "api").is_ok());
    }

    #[tokio::test]
    async fn an_attached_node_is_no_child() {
        let registry = registry(4);
        add_attached(&registry, &attached("peer", "peer@127.0.0.1"));
        assert_eq!(
            registry.node_status("peer").unwrap().state,
            NodeState::Attached
        );
        let err = start_refused(&registry, &config("peer"));
        assert!(matches!(err, NodeError::AttachedNode { .. }), "{err}");
        let err = registry.stop_node("peer").await.unwrap_err();
        assert!(matches!(err, NodeError::AttachedNode { .. }), "{err}");
        assert_eq!(names(&registry), ["peer"]);
    }

    #[tokio::test]
    async fn remove_forgets_only_a_child_that_is_not_live() {
        let registry = registry(4);
        add_child(&registry, "web");
        let err = registry.remove_node("web").await.unwrap_err();
        assert!(
            err.to_string().contains("is starting: `stop` it first"),
            "{err}"
        );
        assert_eq!(names(&registry), ["web"]);
        registry.stop_node("web").await.unwrap();
        let removed = registry.remove_node("web").await.unwrap();
        assert_eq!(
            (removed.name.as_str(), removed.state),
            ("web", NodeState::Stopped)
        );
        assert!(names(&registry).is_empty());
        assert!(matches!(
            registry.remove_node("web").await,
            Err(NodeError::UnknownNode { .. })
        ));
    }

    #[tokio::test]
    async fn a_server_shutting_down_starts_nothing() {
        let registry = registry(4);
        add_stopped_child(&registry, "web").await;
        registry.shutdown().await;
        let err = start_refused(&registry, &config("api"));
        assert!(matches!(err, NodeError::ShuttingDown), "{err}");
        let err = registry.start_existing("web").await.unwrap_err();
        assert!(matches!(err, NodeError::ShuttingDown), "{err}");
        // What it knew stays listed.
        assert_eq!(names(&registry), ["web"]);
    }

    #[tokio::test]
    async fn a_bad_config_registers_nothing() {
        let registry = registry(4);
        let mut bad = config("web");
        bad.command = Some(vec![" ".into()]);
        let err = start_refused(&registry, &bad);
        assert!(matches!(err, NodeError::BadConfig(_)), "{err}");
        assert!(names(&registry).is_empty());
    }
}
