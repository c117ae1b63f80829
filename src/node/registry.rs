//! The registry of named children: the library API that the MCP tools (and Rust users) call.

use super::config::{validate_name, NodeConfig};
use super::supervisor::{NodeStatus, Supervised};
use super::NodeError;
use crate::helper::{EvalError, EvalOutput, EvalRequest, HelperCode, NodeInfo};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// All children of one server. Cheap to share (`Arc`); every method is safe to call concurrently.
pub struct Registry {
    nodes: Mutex<BTreeMap<String, Arc<Supervised>>>,
    helper_code: Arc<HelperCode>,
    /// Makes Erlang node names unique per server process, so two servers never collide in EPMD.
    node_suffix: String,
    shutting_down: AtomicBool,
}

impl Registry {
    /// Writes the helper's `.beam` to a private temp dir; children load it from there.
    pub fn new() -> std::io::Result<Self> {
        Ok(Self {
            nodes: Mutex::default(),
            helper_code: Arc::new(HelperCode::install()?),
            node_suffix: format!("{:x}", std::process::id()),
            shutting_down: AtomicBool::new(false),
        })
    }

    fn nodes(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Supervised>>> {
        self.nodes.lock().expect("registry lock")
    }

    fn get(&self, name: &str) -> Result<Arc<Supervised>, NodeError> {
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

    /// Starts a new child, or starts a stopped/failed one again with `config`. Returns once the
    /// node is ready (for Mix projects: the application started).
    pub async fn start_node(&self, config: NodeConfig) -> Result<NodeStatus, NodeError> {
        if self.shutting_down.load(Ordering::Relaxed) {
            return Err(NodeError::ShuttingDown);
        }
        config.validate()?;
        let node = {
            let mut nodes = self.nodes();
            match nodes.get(&config.name) {
                Some(existing) => existing.clone(),
                None => {
                    let node = Arc::new(Supervised::new(
                        config.clone(),
                        self.helper_code.clone(),
                        &self.node_suffix,
                    ));
                    nodes.insert(config.name.clone(), node.clone());
                    node
                }
            }
        };
        node.start(Some(config)).await
    }

    /// Starts a known (stopped or failed) child again with its last config.
    pub async fn start_existing(&self, name: &str) -> Result<NodeStatus, NodeError> {
        if self.shutting_down.load(Ordering::Relaxed) {
            return Err(NodeError::ShuttingDown);
        }
        self.get(name)?.start(None).await
    }

    pub async fn stop_node(&self, name: &str) -> Result<NodeStatus, NodeError> {
        Ok(self.get(name)?.stop().await)
    }

    pub async fn restart_node(&self, name: &str) -> Result<NodeStatus, NodeError> {
        if self.shutting_down.load(Ordering::Relaxed) {
            return Err(NodeError::ShuttingDown);
        }
        self.get(name)?.restart().await
    }

    pub fn node_status(&self, name: &str) -> Result<NodeStatus, NodeError> {
        Ok(self.get(name)?.status())
    }

    pub fn list_nodes(&self) -> Vec<NodeStatus> {
        self.nodes().values().map(|n| n.status()).collect()
    }

    /// The node's own report (versions, memory, processes) from its helper.
    pub async fn node_info(&self, name: &str, timeout: Duration) -> Result<NodeInfo, NodeError> {
        let node = self.get(name)?;
        node.ensure_running()?;
        node.client
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
        let node = self.get(name)?;
        node.ensure_running()?;
        node.client
            .eval(request)
            .await
            .map_err(|source| NodeError::Helper {
                name: name.to_string(),
                source,
            })
    }

    /// The last `lines` lines the node printed.
    pub fn output_tail(&self, name: &str, lines: usize) -> Result<Vec<String>, NodeError> {
        Ok(self.get(name)?.output.tail(lines))
    }

    /// Stops every child in parallel and refuses new starts.
    pub async fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
        let nodes: Vec<_> = self.nodes().values().cloned().collect();
        futures::future::join_all(nodes.iter().map(|n| n.stop())).await;
    }
}
