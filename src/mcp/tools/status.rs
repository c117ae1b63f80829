//! `status`: every node (or one) with its state, OS pid, uptime, restarts and last exit.

use crate::mcp::output::{failure, success};
use crate::mcp::McpServer;
use crate::node::cluster::{self, ClusterView};
use crate::node::{NodeError, NodeInfo, NodeState, NodeStatus, Silence};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::time::{Duration, SystemTime};

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// A node or cluster, in detail.
    pub name: Option<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Output {
    pub nodes: Vec<NodeStatus>,
    /// The node's own report (only with `name`, when running).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub info: Option<NodeInfo>,
    /// Who sees whom (only when `name` is a cluster).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterView>,
}

#[tool_router(router = status_router, vis = "pub(crate)")]
impl McpServer {
    /// Nodes: state, pid, uptime, restarts, last exit; a cluster's who-sees-whom.
    #[tool(
        name = "status",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn status(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(name) = input.name else {
            let nodes: Vec<NodeStatus> = self
                .registry
                .list_nodes_with_info(LIST_INFO_TIMEOUT)
                .await
                .into_iter()
                .map(|(mut node, info)| {
                    if let Some(info) = &info {
                        let name = node.name.clone();
                        seen_now(&mut node, info, |app| {
                            self.registry.logged_app_exit(&name, app)
                        });
                    }
                    node.app_restarts = info.map(|i| i.app_restarts);
                    node
                })
                .collect();
            let text = if nodes.is_empty() {
                "no nodes; start one with `start`".to_string()
            } else {
                nodes.iter().map(status_line).collect::<Vec<_>>().join("\n")
            };
            return Ok(success(
                text,
                &Output {
                    nodes,
                    info: None,
                    cluster: None,
                },
            ));
        };
        if let Some(members) = self.registry.members(&name) {
            // A cluster: each member, and who sees whom.
            let nodes: Vec<NodeStatus> = members
                .iter()
                .filter_map(|m| self.registry.node_status(m).ok())
                .collect();
            return Ok(
                match self.registry.cluster_view(&name, cluster::VIEW_LIMIT).await {
                    Ok(view) => {
                        let lines: Vec<String> = nodes.iter().map(status_line).collect();
                        let text = format!("{}\n{}", view.text(), lines.join("\n"));
                        let output = Output {
                            nodes,
                            info: None,
                            cluster: Some(view),
                        };
                        success(text, &output)
                    }
                    Err(e) => e.into(),
                },
            );
        }
        let mut node = match self.registry.node_status(&name) {
            Ok(node) => node,
            Err(e) => return Ok(e.into()),
        };
        let mut info = None;
        if node.state == NodeState::Running {
            match self.registry.node_info(&name, Duration::from_secs(5)).await {
                Ok(i) => {
                    seen_now(&mut node, &i, |app| {
                        self.registry.logged_app_exit(&name, app)
                    });
                    node.app_restarts = Some(i.app_restarts.clone());
                    let mut text = status_line(&node);
                    // The project's application, or an umbrella's (one line each above).
                    let apps = match &i.app {
                        Some(app) => app.clone(),
                        None if !node.apps.is_empty() => {
                            let names: Vec<&str> =
                                node.apps.iter().map(|a| a.name.as_str()).collect();
                            names.join(",")
                        }
                        None => "-".into(),
                    };
                    let _ = write!(
                        text,
                        "\notp={} elixir={} processes={} memory={}KB vm_uptime={}s app={apps}",
                        i.otp_release,
                        i.elixir_version.as_deref().unwrap_or("-"),
                        i.process_count,
                        i.memory_total / 1024,
                        i.uptime_ms / 1000,
                    );
                    info = Some(i);
                    return Ok(success(
                        text,
                        &Output {
                            nodes: vec![node],
                            info,
                            cluster: None,
                        },
                    ));
                }
                Err(e) => {
                    unanswered(&mut node);
                    if let NodeError::NotAnswering { silence, .. } = &e {
                        node.not_answering = Some(silence.clone());
                    }
                    let text = status_line(&node);
                    return Ok(failure(format!("{text}\nthe node did not answer: {e}")));
                }
            }
        }
        let text = status_line(&node);
        Ok(success(
            text,
            &Output {
                nodes: vec![node],
                info,
                cluster: None,
            },
        ))
    }
}

/// An application the server still counts as running that the node, asked now, no longer
/// runs: exited, as of this answer (the node's own report of it may not have arrived yet),
/// with the reason the node `logged` for it in this run when it has.
fn seen_now(node: &mut NodeStatus, info: &NodeInfo, logged: impl Fn(&str) -> Option<String>) {
    let Some(started) = &info.started else {
        return;
    };
    for app in node.apps.iter_mut() {
        if app.state == "running" && !started.contains(&app.name) {
            app.state = "exited";
            app.exited_at = Some(humantime::format_rfc3339_millis(SystemTime::now()).to_string());
            app.reason = Some(
                logged(&app.name)
                    .unwrap_or_else(|| "not running when this status asked the node".into()),
            );
        }
    }
}

/// The applications the server counts as running when the node, asked now, did not answer:
/// what it last heard of them is no news of them now (an application that just exited can
/// take the node down with it).
fn unanswered(node: &mut NodeStatus) {
    for app in node.apps.iter_mut().filter(|a| a.state == "running") {
        app.state = "unknown";
        app.reason = Some("the node did not answer this status".into());
    }
}

/// How long `status` waits for each running node's own report when listing every node.
const LIST_INFO_TIMEOUT: Duration = Duration::from_secs(1);

/// `12s`, `5m`, `3h` since `at_ms` (ms since the Unix epoch).
fn ago(at_ms: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let secs = (now - at_ms).max(0) / 1000;
    match secs {
        0..=119 => format!("{secs}s"),
        120..=7199 => format!("{}m", secs / 60),
        _ => format!("{}h", secs / 3600),
    }
}

/// The answer of a tool that moves a node (`start`, `stop`, `restart`, `remove`,
/// `wait_ready`): `<done>: <its status line>` with its status as the data, or the error.
pub(crate) fn status_result(done: &str, outcome: Result<NodeStatus, NodeError>) -> CallToolResult {
    match outcome {
        Ok(status) => success(format!("{done}: {}", status_line(&status)), &status),
        Err(e) => e.into(),
    }
}

/// One line per node: `web running pid=123 up=12s restarts=0 node=web_1@127.0.0.1 path=...`
/// (`web app-exited …` while the VM runs without its project application).
pub(crate) fn status_line(s: &NodeStatus) -> String {
    // A VM whose project application exited is no running app: the headline says so (the
    // node is restarted unless `restart_on_app_exit` is off; the app's line says why).
    let app_exited = matches!(s.state, NodeState::Running | NodeState::Attached)
        && s.apps.iter().any(|a| a.state == "exited");
    let mut line = match &s.not_answering {
        // Whatever the state says: it answers nothing now.
        Some(Silence {
            last_answer_s: Some(secs),
        }) => format!("{} not-answering (last answer {secs}s ago)", s.name),
        Some(_) => format!("{} not-answering", s.name),
        None if app_exited => format!("{} app-exited", s.name),
        None => format!("{} {}", s.name, s.state),
    };
    if let Some(pid) = s.os_pid {
        let _ = write!(line, " pid={pid}");
    }
    if let Some(up) = s.uptime_ms {
        let _ = write!(line, " up={:.1}s", up as f64 / 1000.0);
    }
    let _ = write!(line, " restarts={}", s.restarts);
    if let Some(app) = &s.app_restarts {
        let _ = write!(line, " app_restarts={}", app.total);
    }
    let _ = write!(line, " node={}", s.node);
    if !matches!(s.state, NodeState::Attached | NodeState::Detached) {
        let policy = serde_json::to_value(s.restart_policy).unwrap_or_default();
        let _ = write!(line, " policy={}", policy.as_str().unwrap_or("?"));
    }
    if let Some(ms) = s.next_restart_in_ms {
        let _ = write!(line, " next_restart_in={ms}ms");
    }
    if let Some(path) = &s.path {
        let _ = write!(line, " path={path}");
    }
    if let Some(exit) = &s.last_exit {
        let _ = write!(line, " last_exit=\"{exit}\"");
    }
    for app in &s.apps {
        let _ = write!(line, "\n  app {}: {}", app.name, app.state);
        if let Some(at) = &app.exited_at {
            let _ = write!(line, " {}", at.get(11..19).unwrap_or(at));
        }
        if let Some(reason) = &app.reason {
            let _ = write!(line, " ({reason})");
        }
    }
    if let Some(app) = s.app_restarts.as_ref().filter(|a| a.total > 0) {
        let _ = write!(
            line,
            "\n  app restarts: {} ({} in the last 5 min)",
            app.total, app.last_5m
        );
        if let Some(last) = &app.last {
            let _ = write!(
                line,
                "; last {} ago: {} under {} ({})",
                ago(last.at_ms),
                last.child,
                last.supervisor,
                last.reason
            );
        }
    }
    for warning in &s.warnings {
        let _ = write!(line, "\n  warning: {warning}");
    }
    if let Some(error) = &s.last_error {
        let _ = write!(line, "\n  last error: {error}");
    }
    if let Some(error) = &s.exit_error {
        let _ = write!(line, "\n  error of the run that ended: {error}");
    }
    if let Some(failure) = &s.failure {
        let _ = write!(
            line,
            "\n  failure: {}",
            failure.lines().next().unwrap_or_default()
        );
    }
    line
}
