//! Calls on one node by name: its own report, `eval`, a tool run inside it, waiting for it to
//! be ready, and what this server keeps of it (logs, vital signs, where it runs).
//!
//! A call on a child that is still starting or restarting waits for it (at most
//! [`BOOT_WAIT`]) rather than fail only because it came early; a call that only looks
//! ([`Registry::look`]) runs on a starting child as soon as its helper answers, since where a
//! boot waits is what it may be asked to show.

use super::node_status::{NodeState, NodeStatus, Silence};
use super::registry::Entry;
use super::{NodeError, Registry};
use crate::helper::{self, EvalError, EvalOutput, EvalRequest, NodeInfo, ToolCall, ToolReply};
use std::sync::Arc;
use std::time::Duration;

/// How long a call on a node that is starting or restarting waits for it to come up before
/// it gives up (saying so): a first compile can take this long, an agent's call should not
/// fail only because it came early.
pub const BOOT_WAIT: Duration = Duration::from_secs(30);

/// A round trip a node must answer within when its report is slow to come, or it is said to
/// be not answering: `status` says so within 2 s of being asked ([`PROBE_AFTER`] and this).
pub const ANSWER_PROBE: Duration = Duration::from_millis(1500);
/// How long a report may take before the round trip of [`ANSWER_PROBE`] is made.
const PROBE_AFTER: Duration = Duration::from_millis(300);

impl Registry {
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

    /// The helper client of a node for a call that only looks: a child still starting is
    /// asked as soon as its helper answers; otherwise as [`Self::running_client`].
    async fn answering_client(&self, name: &str) -> Result<Arc<helper::Client>, NodeError> {
        match self.get(name)? {
            Entry::Child(child) => {
                child.wait_answering(BOOT_WAIT).await?;
                Ok(child.client.clone())
            }
            Entry::Attached(attached) => Ok(attached.client.clone()),
        }
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
                return Ok(None);
            }
            match tokio::time::timeout(limit, self.node_info(&node.name, limit)).await {
                Ok(Ok(info)) => Ok(Some(info)),
                Ok(Err(NodeError::NotAnswering { silence, .. })) => Err(silence),
                _ => Ok(None),
            }
        });
        let infos = futures::future::join_all(infos).await;
        nodes
            .into_iter()
            .zip(infos)
            .map(|(mut node, info)| {
                let info = info.unwrap_or_else(|silence| {
                    node.not_answering = Some(silence);
                    None
                });
                (node, info)
            })
            .collect()
    }

    /// The node's own report (versions, memory, processes) from its helper.
    pub async fn node_info(&self, name: &str, timeout: Duration) -> Result<NodeInfo, NodeError> {
        let client = self.running_client(name).await?;
        // A node that fails a round trip is said to be not answering at once, not after
        // `timeout`: its report may be slow, a stopped VM answers nothing. The round trip is
        // made only when the report is slow to come (so a busy server does not ask twice),
        // and ends before `timeout` (so a report that timed out is never all that is said).
        let silent = async {
            tokio::time::sleep(PROBE_AFTER.min(timeout / 4)).await;
            match client.ping(ANSWER_PROBE.min(timeout / 2)).await {
                Err(e) if e.is_timeout() => {}
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            info = client.status(timeout) => info.map_err(helper_failed(name)),
            () = silent => Err(self.not_answering(name)),
        }
    }

    /// [`NodeError::NotAnswering`] of `name`, with how long since its last answer.
    fn not_answering(&self, name: &str) -> NodeError {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let last_answer_s = self
            .vitals(name)
            .and_then(|v| v.last_answered_ms())
            .map(|at| now_ms.saturating_sub(at) / 1000);
        NodeError::NotAnswering {
            name: name.to_string(),
            silence: Silence { last_answer_s },
        }
    }

    /// Evaluates code on a running node. `Ok(Err(_))`: the code failed, the node is fine.
    pub async fn eval_on_node(
        &self,
        name: &str,
        request: &EvalRequest,
    ) -> Result<Result<EvalOutput, EvalError>, NodeError> {
        let client = self.running_client(name).await?;
        client.eval(request).await.map_err(helper_failed(name))
    }

    /// Runs one tool inside a running node: one that looks (`processes`, `diagnose`…) or one
    /// that changes the node (`recompile` loads code, `trace` starts a session), e.g.
    /// `registry.call_tool("web", &ToolCall::new("processes").bounded("limit", Some(5), bound))`.
    pub async fn call_tool(&self, name: &str, call: &ToolCall) -> Result<ToolReply, NodeError> {
        let client = self.running_client(name).await?;
        client.run_tool(call).await.map_err(helper_failed(name))
    }

    /// [`look`](Self::look) for a tool whose data has a type of its own: read once into `T`
    /// (`diagnose`'s report).
    pub async fn look_typed<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
        call: &ToolCall,
    ) -> Result<crate::helper::TypedReply<T>, NodeError> {
        let client = self.answering_client(name).await?;
        client
            .run_tool_typed(call)
            .await
            .map_err(helper_failed(name))
    }

    /// Runs a tool that only looks (`diagnose`, `waits`, `processes`…) inside a node: as
    /// [`Self::call_tool`], except that a child still starting is asked as soon as its helper
    /// answers rather than once it is ready, so a boot that hangs can be looked at.
    pub async fn look(&self, name: &str, call: &ToolCall) -> Result<ToolReply, NodeError> {
        let client = self.answering_client(name).await?;
        client.run_tool(call).await.map_err(helper_failed(name))
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
}

/// The error of a call that node `name`'s helper did not answer (or answered wrongly).
fn helper_failed(name: &str) -> impl FnOnce(helper::HelperError) -> NodeError + '_ {
    move |source| NodeError::Helper {
        name: name.to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::registry::test_support::*;

    #[tokio::test]
    async fn what_is_kept_of_a_child_is_read_by_its_name() {
        let registry = registry(4);
        add_stopped_child(&registry, "web").await;
        let page = registry
            .logs("web", &crate::node::Query::default())
            .unwrap();
        assert!(page.lines.is_empty());
        assert_eq!(*registry.log_errors("web").unwrap().borrow(), 0);
        assert!(registry.vitals("web").is_some());
        assert_eq!(registry.local_os_pid("web"), None, "it never ran");
        // Started with a command, not from a project directory.
        let err = registry.project_path("web").unwrap_err();
        assert!(err.to_string().contains("has no project path"), "{err}");
        assert!(registry.vitals("db").is_none());
        assert!(matches!(
            registry.logs("db", &crate::node::Query::default()),
            Err(NodeError::UnknownNode { .. })
        ));
    }

    #[tokio::test]
    async fn an_attached_node_has_vitals_but_no_logs_here() {
        let registry = registry(4);
        add_attached(&registry, &attached("peer", "peer@10.0.0.1"));
        assert!(registry.vitals("peer").is_some());
        assert_eq!(registry.local_os_pid("peer"), None);
        assert!(matches!(
            registry.logs("peer", &crate::node::Query::default()),
            Err(NodeError::AttachedNode { .. })
        ));
        assert!(matches!(
            registry
                .wait_ready("peer", &crate::node::Readiness::App, Duration::from_secs(1))
                .await,
            Err(NodeError::AttachedNode { .. })
        ));
    }

    #[tokio::test]
    async fn a_node_that_is_not_running_is_not_asked() {
        let registry = registry(4);
        add_stopped_child(&registry, "web").await;
        let err = registry
            .node_info("web", Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(err, NodeError::NotRunning { .. }), "{err}");
        // Its status is listed, without a report.
        let listed = registry.list_nodes_with_info(Duration::from_secs(1)).await;
        assert_eq!(listed.len(), 1);
        assert!(listed[0].1.is_none());
    }
}
