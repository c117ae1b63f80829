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
}

/// Default for [`Registry::with_limits`].
pub const DEFAULT_MAX_NODES: usize = 32;

/// How long a call on a node that is starting or restarting waits for it to come up before
/// it gives up (saying so): a first compile can take this long, an agent's call should not
/// fail only because it came early.
pub const BOOT_WAIT: Duration = Duration::from_secs(30);

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
        let client =
            helper::Client::with_limits(node, cookie, self.call_limits).with_address(address);
        client.attach().await.map_err(|source| NodeError::Attach {
            node: node.to_string(),
            source,
        })?;
        let attached = Arc::new(Attached::new(name.to_string(), client));
        let mut nodes = self.nodes();
        self.check_room(&nodes)?;
        if let Some(existing) = nodes.get(name) {
            return Err(NodeError::NameTaken {
                name: name.to_string(),
                state: existing.status().state,
            });
        }
        nodes.insert(name.to_string(), Entry::Attached(attached.clone()));
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
