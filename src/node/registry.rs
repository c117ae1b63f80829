//! The registry of named nodes (children it started and nodes it attached to): the library API
//! that the MCP tools (and Rust users) call.

use super::attached::Attached;
use super::config::{validate_name, NodeConfig};
use super::logs::LogLimits;
use super::state_file::StateFile;
use super::status::{NodeState, NodeStatus};
use super::supervisor::Supervised;
use super::NodeError;
use crate::helper::{
    self, EvalError, EvalOutput, EvalRequest, HelperCode, NodeInfo, ToolCall, ToolReply,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A name's node: one we started and supervise, or one we attached to.
#[derive(Clone)]
enum Entry {
    Child(Arc<Supervised>),
    Attached(Arc<Attached>),
}

impl Entry {
    fn status(&self) -> NodeStatus {
        match self {
            Entry::Child(child) => child.status(),
            Entry::Attached(attached) => attached.status(),
        }
    }
}

/// All nodes of one server. Cheap to share (`Arc`); every method is safe to call concurrently.
pub struct Registry {
    nodes: Mutex<BTreeMap<String, Entry>>,
    helper_code: Arc<HelperCode>,
    /// Makes Erlang node names unique per server (pid and a random part: two servers may share
    /// a pid, e.g. PID 1 in two containers), so they never collide in EPMD.
    node_suffix: String,
    shutting_down: AtomicBool,
    state_file: Option<Arc<StateFile>>,
    log_limits: LogLimits,
    /// Nodes (started or attached) this server keeps at most; with `log_limits` this bounds
    /// the memory all logs can take.
    max_nodes: usize,
    call_limits: helper::Limits,
    /// Clusters: name → members (started with `nodes`, or found by `attach`).
    clusters: Mutex<BTreeMap<String, Cluster>>,
    /// Members of attached clusters not attached yet: attached when a call needs them.
    pending: Mutex<BTreeMap<String, Pending>>,
}

/// How long each member of a started cluster has to connect to the others.
const INTRODUCE_LIMIT: Duration = Duration::from_secs(5);

/// A member to start: its child and its new config (none: its last), or why it cannot start.
type StartOf = Result<(Arc<Supervised>, Option<NodeConfig>), NodeError>;

/// How long an attached node has to say which nodes it is connected to.
const PEERS_LIMIT: Duration = Duration::from_secs(2);

/// A cluster's member names, and for a cluster found by `attach` how it was found.
struct Cluster {
    members: Vec<String>,
    found_by: Option<Found>,
}

/// How a cluster was found by `attach`: the attached member whose connections make it,
/// asked again before each call on the cluster (peers that joined since become members),
/// and the cookie and address its peers are attached with.
struct Found {
    via: String,
    cookie: String,
    address: Option<String>,
}

/// How to attach a member of an attached cluster when a call first needs it.
#[derive(Clone)]
struct Pending {
    node: String,
    cookie: String,
    address: Option<String>,
}

/// Default for [`Registry::with_limits`].
pub const DEFAULT_MAX_NODES: usize = 32;

/// How long a call on a node that is starting or restarting waits for it to come up before
/// it gives up (saying so): a first compile can take this long, an agent's call should not
/// fail only because it came early.
pub const BOOT_WAIT: Duration = Duration::from_secs(30);

/// How long `partition` keeps each side connected within itself before it answers.
const PARTITION_SETTLE: Duration = Duration::from_secs(5);

impl Registry {
    /// Writes the helper's `.beam` files to a private temp dir; children load them from there.
    pub fn new() -> std::io::Result<Self> {
        Ok(Self {
            nodes: Mutex::default(),
            helper_code: Arc::new(HelperCode::install()?),
            node_suffix: format!("{:04x}_{:x}", rand::random::<u16>(), std::process::id()),
            shutting_down: AtomicBool::new(false),
            state_file: None,
            log_limits: LogLimits::default(),
            max_nodes: DEFAULT_MAX_NODES,
            call_limits: helper::Limits::default(),
            clusters: Mutex::default(),
            pending: Mutex::default(),
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

    /// Records running children in `state_file` for crash recovery (see [`StateFile`]).
    pub fn with_state_file(mut self, state_file: StateFile) -> Self {
        self.state_file = Some(Arc::new(state_file));
        self
    }

    fn nodes(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.nodes.lock().expect("registry lock")
    }

    fn get(&self, name: &str) -> Result<Entry, NodeError> {
        validate_name(name)?;
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

    fn child(&self, name: &str) -> Result<Arc<Supervised>, NodeError> {
        match self.get(name)? {
            Entry::Child(child) => Ok(child),
            Entry::Attached(_) => Err(NodeError::AttachedNode {
                name: name.to_string(),
            }),
        }
    }

    /// The helper client of a node that can answer: a child that is starting or restarting
    /// is waited for (at most [`BOOT_WAIT`]), so a call made while it boots is not refused.
    async fn running_client(&self, name: &str) -> Result<Arc<helper::Client>, NodeError> {
        match self.get(name)? {
            Entry::Child(child) => {
                child.wait_running(BOOT_WAIT).await?;
                Ok(child.client.clone())
            }
            Entry::Attached(attached) => Ok(attached.client.clone()),
        }
    }

    fn refuse_if_shutting_down(&self) -> Result<(), NodeError> {
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
    fn prepare_start(&self, config: &NodeConfig) -> Result<Arc<Supervised>, NodeError> {
        self.refuse_if_shutting_down()?;
        config.validate()?;
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
                let node = Arc::new(Supervised::new(
                    config.clone(),
                    self.helper_code.clone(),
                    &self.node_suffix,
                    self.state_file.clone(),
                    self.log_limits,
                    self.call_limits,
                ));
                nodes.insert(config.name.clone(), Entry::Child(node.clone()));
                Ok(node)
            }
        }
    }

    /// Starts a known (stopped or failed) child again with its last config.
    pub async fn start_existing(&self, name: &str) -> Result<NodeStatus, NodeError> {
        self.refuse_if_shutting_down()?;
        self.child(name)?.start(None).await
    }

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

    /// After attaching `name`, the nodes it is connected to form cluster `NAME*` (`name` and
    /// `NAME-<node>` for each peer, attached with the same cookie when a call needs it).
    async fn find_cluster(
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
        if peers.is_empty() {
            return;
        }
        let cluster = format!("{name}*");
        self.clusters.lock().expect("clusters lock").insert(
            cluster.clone(),
            Cluster {
                members: vec![name.to_string()],
                found_by: Some(found),
            },
        );
        self.add_peers(&cluster, client.node(), peers);
    }

    /// Before a call on cluster `name` found by `attach`: the nodes its attached member is
    /// connected to now that are not members yet become members (attached when needed).
    async fn refresh_found(&self, name: &str, limit: Duration) {
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

    /// The nodes `client`'s node is connected to, or `None` when it did not say in `limit`.
    async fn peers_of(client: &helper::Client, limit: Duration) -> Option<Vec<String>> {
        let call = ToolCall::new("cluster_view").with_timeout(limit);
        let reply = tokio::time::timeout(limit, client.run_tool(&call))
            .await
            .ok()?
            .ok()?;
        Some(
            reply.data["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n.as_str().map(String::from))
                .collect(),
        )
    }

    /// Adds `peers` (Erlang node names seen from node `seen_from`) that are not members of
    /// found cluster `cluster` yet, as pending members `BASE-<node>`.
    fn add_peers(&self, cluster: &str, seen_from: &str, peers: Vec<String>) {
        let host_of = |node: &str| node.split('@').nth(1).unwrap_or("").to_string();
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
            if entry.members.len() >= super::cluster::MAX_MEMBERS {
                break;
            }
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
            let member = format!("{}-{short}", found.via);
            if validate_name(&member).is_err()
                || nodes.contains_key(&member)
                || entry.members.contains(&member)
            {
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

    /// Starts cluster `base.name` of `count` members ([`cluster`](super::cluster)): the first
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
        super::cluster::check_readiness(&base.readiness).map_err(NodeError::BadConfig)?;
        if !(2..=super::cluster::MAX_MEMBERS).contains(&count) {
            return Err(NodeError::BadConfig(format!(
                "`nodes` must be 2..={} (leave it out for one node)",
                super::cluster::MAX_MEMBERS
            )));
        }
        let names = super::cluster::member_names(&base.name, count);
        let members: Vec<(String, String)> = names
            .iter()
            .map(|n| {
                (
                    n.clone(),
                    super::supervisor::node_name(n, &self.node_suffix),
                )
            })
            .collect();
        let cookie = super::supervisor::random_cookie();
        let configs = super::cluster::member_configs(&base, &members, &cookie, connect);
        // Each member's own (its `{index}` filled in), before any member starts.
        for config in &configs {
            config.validate()?;
        }
        {
            let mut clusters = self.clusters.lock().expect("clusters lock");
            let nodes = self.nodes();
            let mut known = clusters
                .get(&base.name)
                .into_iter()
                .flat_map(|c| &c.members);
            if known.any(|m| nodes.contains_key(m)) {
                return Err(NodeError::BadConfig(format!(
                    "cluster `{}` exists: `start` it with only its name to start its members \
                     again, or `remove` each member to start a new one",
                    base.name
                )));
            }
            if let Some(taken) = std::iter::once(&base.name)
                .chain(&names)
                .find(|n| nodes.contains_key(*n))
            {
                return Err(NodeError::BadConfig(format!(
                    "`{taken}` is already a node: `remove` it or choose another cluster name"
                )));
            }
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
        starts: Vec<(String, StartOf)>,
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

    /// What each member of cluster `name` sees: its `nodes()` (asked of all members at
    /// once, each within `limit`), as a matrix with any split named.
    pub async fn cluster_view(
        &self,
        name: &str,
        limit: Duration,
    ) -> Result<super::cluster::ClusterView, NodeError> {
        self.attach_pending(name, limit).await;
        let members = self.cluster_members(name)?;
        let nodes: Vec<String> = members.iter().map(|m| self.member_node(m)).collect();
        let node_of: BTreeMap<String, String> =
            nodes.iter().cloned().zip(members.clone()).collect();
        let views = members.iter().zip(nodes).map(|(member, node)| {
            let node_of = &node_of;
            async move {
                let state = self
                    .node_status(member)
                    .map_or(NodeState::Stopped, |s| s.state);
                let mut view = super::cluster::MemberView {
                    member: member.clone(),
                    node,
                    state,
                    status: "ok".into(),
                    sees: Vec::new(),
                    blocks: Vec::new(),
                    others: Vec::new(),
                };
                if !matches!(state, NodeState::Running | NodeState::Attached) {
                    view.status = "not running".into();
                    return view;
                }
                let call = ToolCall::new("cluster_view").with_timeout(limit);
                match tokio::time::timeout(limit, self.call_tool(member, &call)).await {
                    Err(_) => {
                        view.status = format!("timeout: no answer in {} ms", limit.as_millis())
                    }
                    Ok(Err(e)) => view.status = e.to_string(),
                    Ok(Ok(reply)) => {
                        let nodes = |key: &str| -> Vec<String> {
                            reply.data[key]
                                .as_array()
                                .map(|a| {
                                    a.iter()
                                        .filter_map(|n| n.as_str())
                                        .map(String::from)
                                        .collect()
                                })
                                .unwrap_or_default()
                        };
                        for node in nodes("nodes") {
                            match node_of.get(&node) {
                                Some(m) => view.sees.push(m.clone()),
                                None => view.others.push(node),
                            }
                        }
                        view.blocks = nodes("blocked")
                            .iter()
                            .filter_map(|n| node_of.get(n).cloned())
                            .collect();
                        view.sees.sort();
                        view.blocks.sort();
                    }
                }
                view
            }
        });
        let views = futures::future::join_all(views).await;
        Ok(super::cluster::ClusterView::new(name, views))
    }

    /// Splits cluster `name` in two: the members in `side` against the others. Each side
    /// refuses the other's connections until [`heal`](Self::heal); every member is asked at
    /// once, each within `limit`. The view afterwards.
    pub async fn partition(
        &self,
        name: &str,
        side: &[String],
        limit: Duration,
    ) -> Result<super::cluster::ClusterView, NodeError> {
        let members = self.cluster_members(name)?;
        if members.iter().any(|m| self.child(m).is_err()) {
            return Err(NodeError::BadConfig(format!(
                "`{name}` was found by `attach`: `partition` splits only clusters this server \
                 started (`start` with `nodes`)"
            )));
        }
        if let Some(stranger) = side.iter().find(|m| !members.contains(m)) {
            return Err(NodeError::BadConfig(format!(
                "`{stranger}` is not a member of `{name}` (members: {})",
                members.join(", ")
            )));
        }
        if side.is_empty() || side.len() >= members.len() {
            return Err(NodeError::BadConfig(format!(
                "`side` must name some members of `{name}` but not all (members: {})",
                members.join(", ")
            )));
        }
        let node = |m: &String| super::supervisor::node_name(m, &self.node_suffix);
        let (inside, outside): (Vec<&String>, Vec<&String>) =
            members.iter().partition(|m| side.contains(m));
        let list = |group: &[&String]| group.iter().map(|m| node(m)).collect::<Vec<_>>().join(",");
        let (outside_nodes, inside_nodes) = (list(&outside), list(&inside));
        let mut expected = vec![inside.clone(), outside.clone()];
        expected.iter_mut().for_each(|g| g.sort());
        expected.sort();
        // Block the other side, then keep each side whole: `global` may cut a node from its
        // own side while the partition spreads; asked again until each side is connected.
        let deadline = tokio::time::Instant::now() + PARTITION_SETTLE;
        loop {
            let calls = members.iter().map(|m| {
                let (block, peers) = if side.contains(m) {
                    (&outside_nodes, &inside_nodes)
                } else {
                    (&inside_nodes, &outside_nodes)
                };
                let call = ToolCall::new("partition")
                    .text("block", block.as_str())
                    .text("peers", peers.as_str())
                    .with_timeout(limit);
                async move { tokio::time::timeout(limit, self.call_tool(m, &call)).await }
            });
            futures::future::join_all(calls).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let view = self.cluster_view(name, limit).await?;
            let sides: Option<Vec<Vec<&String>>> = view
                .split
                .as_ref()
                .map(|groups| groups.iter().map(|g| g.iter().collect()).collect());
            if sides.as_ref() == Some(&expected) || tokio::time::Instant::now() >= deadline {
                return Ok(view);
            }
        }
    }

    /// Ends a partition of cluster `name`: every member unblocks the others and connects to
    /// them again. The view afterwards (connections may take a moment to show everywhere).
    pub async fn heal(
        &self,
        name: &str,
        limit: Duration,
    ) -> Result<super::cluster::ClusterView, NodeError> {
        let members = self.cluster_members(name)?;
        self.connect_members(&members, limit).await;
        self.cluster_view(name, limit).await
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

    pub async fn stop_node(&self, name: &str) -> Result<NodeStatus, NodeError> {
        Ok(self.child(name)?.stop().await)
    }

    pub async fn restart_node(&self, name: &str) -> Result<NodeStatus, NodeError> {
        self.refuse_if_shutting_down()?;
        self.child(name)?.restart().await
    }

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
        self.check_room(&self.nodes())?;
        if let Ok(existing) = self.get(name) {
            return Err(NodeError::NameTaken {
                name: name.to_string(),
                state: existing.status().state,
            });
        }
        let address_for_peers = address.clone();
        let client =
            helper::Client::with_limits(node, cookie, self.call_limits).with_address(address);
        client.attach().await.map_err(|source| NodeError::Attach {
            node: node.to_string(),
            source,
        })?;
        let attached = Arc::new(Attached::new(name.to_string(), client));
        {
            let mut nodes = self.nodes();
            self.check_room(&nodes)?;
            if let Some(existing) = nodes.get(name) {
                return Err(NodeError::NameTaken {
                    name: name.to_string(),
                    state: existing.status().state,
                });
            }
            nodes.insert(name.to_string(), Entry::Attached(attached.clone()));
        }
        // A member of a cluster found earlier is part of it already.
        let known = self
            .clusters
            .lock()
            .expect("clusters lock")
            .values()
            .flat_map(|c| &c.members)
            .any(|m| m == name);
        if !known {
            self.find_cluster(name, &attached.client, cookie, address_for_peers)
                .await;
        }
        Ok(attached.status())
    }

    /// Forgets an attached node after stopping the helper's server on it.
    pub async fn detach_node(&self, name: &str) -> Result<NodeStatus, NodeError> {
        let Entry::Attached(attached) = self.get(name)? else {
            return Err(NodeError::BadConfig(format!(
                "node `{name}` was started by this server: `stop` it instead of detaching"
            )));
        };
        self.nodes().remove(name);
        // The cluster its attach found goes with it (its attached peers stay, by their names).
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
        attached.stop_sampling();
        if let Err(e) = attached.client.detach().await {
            tracing::warn!(%name, "detach: the helper did not confirm: {e}");
        }
        Ok(attached.status())
    }

    /// Forgets a stopped or failed child (and its logs), or detaches and forgets an attached
    /// node. A live child must be stopped first.
    pub async fn remove_node(&self, name: &str) -> Result<NodeStatus, NodeError> {
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
                Ok(child.status())
            }
        }
    }

    pub fn node_status(&self, name: &str) -> Result<NodeStatus, NodeError> {
        Ok(self.get(name)?.status())
    }

    pub fn list_nodes(&self) -> Vec<NodeStatus> {
        self.nodes().values().map(Entry::status).collect()
    }

    /// Every node's status with its own report when it is running (or attached) and answers
    /// within `limit`, connecting included; the nodes are asked in parallel.
    pub async fn list_nodes_with_info(
        &self,
        limit: Duration,
    ) -> Vec<(NodeStatus, Option<NodeInfo>)> {
        let nodes = self.list_nodes();
        let infos = nodes.iter().map(|node| async move {
            if !matches!(node.state, NodeState::Running | NodeState::Attached) {
                return None;
            }
            let info = tokio::time::timeout(limit, self.node_info(&node.name, limit)).await;
            info.ok()?.ok()
        });
        let infos = futures::future::join_all(infos).await;
        nodes.into_iter().zip(infos).collect()
    }

    /// The node's own report (versions, memory, processes) from its helper.
    pub async fn node_info(&self, name: &str, timeout: Duration) -> Result<NodeInfo, NodeError> {
        let client = self.running_client(name).await?;
        client
            .status(timeout)
            .await
            .map_err(|source| NodeError::Helper {
                name: name.to_string(),
                source,
            })
    }

    /// Evaluates code on a running node. `Ok(Err(_))`: the code failed, the node is fine.
    pub async fn eval_on_node(
        &self,
        name: &str,
        request: &EvalRequest,
    ) -> Result<Result<EvalOutput, EvalError>, NodeError> {
        let client = self.running_client(name).await?;
        client
            .eval(request)
            .await
            .map_err(|source| NodeError::Helper {
                name: name.to_string(),
                source,
            })
    }

    /// Runs one tool inside a running node: one that looks (`processes`, `diagnose`…) or one
    /// that changes the node (`recompile` loads code, `trace` starts a session), e.g.
    /// `registry.call_tool("web", &ToolCall::new("processes").bounded("limit", Some(5), bound))`.
    pub async fn call_tool(&self, name: &str, call: &ToolCall) -> Result<ToolReply, NodeError> {
        let client = self.running_client(name).await?;
        client
            .run_tool(call)
            .await
            .map_err(|source| NodeError::Helper {
                name: name.to_string(),
                source,
            })
    }

    /// The vital signs this server keeps of a node, started or attached (`None` for an
    /// unknown name).
    pub fn vitals(&self, name: &str) -> Option<Arc<super::vitals::Vitals>> {
        match self.get(name).ok()? {
            Entry::Child(child) => Some(child.vitals.clone()),
            Entry::Attached(attached) => Some(attached.vitals.clone()),
        }
    }

    /// The OS pid of a node's BEAM when it runs on this host: a started node's, or an
    /// attached node's once its samples found it here.
    pub fn local_os_pid(&self, name: &str) -> Option<u32> {
        match self.get(name).ok()? {
            Entry::Child(child) => child.status().os_pid,
            Entry::Attached(attached) => attached.local_os_pid(),
        }
    }

    /// Waits until a running child meets `readiness` (or exits, or `limit`, held to
    /// [`crate::bounds::WAIT_READY_MS`], passes).
    pub async fn wait_ready(
        &self,
        name: &str,
        readiness: &super::Readiness,
        limit: Duration,
    ) -> Result<NodeStatus, NodeError> {
        readiness.validate().map_err(NodeError::BadConfig)?;
        let limit = crate::bounds::WAIT_READY_MS.clamp_ms(limit);
        let child = self.child(name)?;
        child.wait_until(readiness, limit).await?;
        Ok(child.status())
    }

    /// The project directory of a child (for one-shot Mix tasks).
    pub fn project_path(&self, name: &str) -> Result<std::path::PathBuf, NodeError> {
        self.child(name)?
            .status()
            .path
            .map(Into::into)
            .ok_or_else(|| {
                NodeError::BadConfig(format!(
                    "node `{name}` has no project path; give `path` instead"
                ))
            })
    }

    /// A child's log lines (kept after it exits, until it is started again).
    pub fn logs(&self, name: &str, query: &super::Query) -> Result<super::Page, NodeError> {
        Ok(self.child(name)?.logs.query(query))
    }

    /// The reason in a child's own `Application APP exited: REASON` report, if it logged one.
    pub fn logged_app_exit(&self, name: &str, app: &str) -> Option<String> {
        self.child(name).ok()?.logged_app_exit(&[app.to_string()])
    }

    /// A child's count of error-or-worse log lines, which changes on each new one (see
    /// [`super::LogBuffer::errors`]).
    pub fn log_errors(&self, name: &str) -> Result<tokio::sync::watch::Receiver<u64>, NodeError> {
        Ok(self.child(name)?.logs.errors())
    }

    /// Stops every child and detaches from every attached node, in parallel; refuses new starts.
    pub async fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
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
    }
}
