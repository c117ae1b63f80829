//! `start`: launch a Mix project (or any BEAM command) with the helper injected, and wait until
//! it is ready.

use super::status::{status_line, status_result};
use crate::mcp::output::{failure, success};
use crate::mcp::McpServer;
use crate::node::{cluster, NodeError, Query, StartSpec};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ProgressNotificationParam, RequestMetaObject};
use rmcp::{tool, tool_router, ErrorData, Peer, RoleServer};
use std::time::Duration;

/// How often a long start reports progress (when the client asked for it).
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

#[tool_router(router = start_router, vis = "pub(crate)")]
impl McpServer {
    /// Start a Mix project (`path`) or BEAM `command`; returns once up, or why not. Restarts it
    /// after crashes.
    #[tool(
        name = "start",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    pub async fn start(
        &self,
        Parameters(input): Parameters<StartSpec>,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let name = input.name.clone();
        if input.nodes.is_some() || self.registry.members(&name).is_some() {
            return Ok(self.start_cluster(input).await);
        }
        let starting = async {
            if input.path.is_none() && input.command.is_none() {
                self.registry.start_existing(&input.name).await
            } else {
                match input.into_config() {
                    Ok(config) => self.registry.start_node(config).await,
                    Err(e) => Err(NodeError::BadConfig(e)),
                }
            }
        };
        let result = match meta.get_progress_token() {
            None => starting.await,
            Some(token) => {
                // A first compile can take minutes: tell the client what the node prints.
                tokio::pin!(starting);
                let mut ticks = tokio::time::interval(PROGRESS_EVERY);
                let mut step = 0.0;
                loop {
                    tokio::select! {
                        result = &mut starting => break result,
                        _ = ticks.tick() => {
                            step += 1.0;
                            let message = self.latest_line(&name).unwrap_or_else(|| "starting".into());
                            let progress = ProgressNotificationParam::new(token.clone(), step).with_message(message);
                            let _ = peer.notify_progress(progress).await;
                        }
                    }
                }
            }
        };
        Ok(status_result("started", result))
    }
}

/// How long a started cluster may take to connect all its members before `start` answers
/// with the matrix as it is.
const CONNECT_WAIT: Duration = Duration::from_secs(15);

impl McpServer {
    /// Starts cluster `input.name` (`nodes` members), or its known members again; answers
    /// with each member's status and, once they see each other (or [`CONNECT_WAIT`]), the
    /// connection matrix: `ok` only when every member runs and, when we connect them, all
    /// are connected.
    async fn start_cluster(&self, input: StartSpec) -> CallToolResult {
        let name = input.name.clone();
        let (count, connect) = (input.nodes, input.connect);
        let results = match (count, self.registry.members(&name)) {
            (None, Some(_)) => match self.registry.start_cluster_again(&name, connect).await {
                Ok(results) => results,
                Err(e) => return e.into(),
            },
            (Some(count), _) => {
                if input.path.is_none() && input.command.is_none() {
                    return failure(
                        "`nodes` starts a new cluster: give `path` (a Mix project) or `command`"
                            .into(),
                    );
                }
                let config = match input.into_config() {
                    Ok(config) => config,
                    Err(e) => return NodeError::BadConfig(e).into(),
                };
                match self.registry.start_cluster(config, count, connect).await {
                    Ok(results) => results,
                    Err(e) => return e.into(),
                }
            }
            (None, None) => unreachable!("a cluster by count or by name"),
        };
        // The members were introduced to each other as they started; connections may take a
        // moment to show everywhere.
        let started = tokio::time::Instant::now();
        let view = loop {
            match self.registry.cluster_view(&name, cluster::VIEW_LIMIT).await {
                Ok(view)
                    if view.fully_connected || !connect || started.elapsed() >= CONNECT_WAIT =>
                {
                    break Some(view)
                }
                Ok(_) => tokio::time::sleep(Duration::from_millis(250)).await,
                Err(_) => break None,
            }
        };
        let mut lines = Vec::new();
        let mut failed = Vec::new();
        for (member, result) in &results {
            match result {
                Ok(status) => lines.push(status_line(status)),
                Err(e) => {
                    failed.push(member.clone());
                    lines.push(format!("{member}: {e}"));
                }
            }
        }
        let connected = view.as_ref().is_some_and(|v| v.fully_connected) || !connect;
        let head = if failed.is_empty() && connected {
            format!("started cluster {name}: {} members", results.len())
        } else if failed.is_empty() {
            format!(
                "started cluster {name}, but its members are NOT all connected after {} s: see the \
                 matrix, then `logs` of a member (grep os_sup_cluster)",
                CONNECT_WAIT.as_secs()
            )
        } else {
            format!(
                "cluster {name}: {} of {} members did not start ({}); `logs` of each says why",
                failed.len(),
                results.len(),
                failed.join(", ")
            )
        };
        let text = format!(
            "{head}\n{}\n{}",
            lines.join("\n"),
            view.as_ref().map(|v| v.text()).unwrap_or_default()
        );
        let data = serde_json::json!({
            "cluster": name,
            "members": results.iter().map(|(m, r)| match r {
                Ok(status) => serde_json::to_value(status).unwrap_or_default(),
                Err(e) => serde_json::json!({"name": m, "error": e.to_string()}),
            }).collect::<Vec<_>>(),
            "view": view,
        });
        if failed.is_empty() && connected {
            success(text, &data)
        } else {
            let mut result = success(text, &data);
            result.is_error = Some(true);
            result
        }
    }

    /// The node's newest log line, for progress messages.
    fn latest_line(&self, name: &str) -> Option<String> {
        let query = Query {
            tail: 1,
            ..Query::default()
        };
        let page = self.registry.logs(name, &query).ok()?;
        page.lines.last().map(|l| l.text.clone())
    }
}
