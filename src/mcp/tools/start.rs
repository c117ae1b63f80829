//! `start`: launch a Mix project (or any BEAM command) with the helper injected, and wait until
//! it is ready.

use super::status::status_line;
use crate::mcp::output::success;
use crate::mcp::McpServer;
use crate::node::{NodeError, Query, StartSpec};
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
        Ok(match result {
            Ok(status) => success(format!("started: {}", status_line(&status)), &status),
            Err(e) => e.into(),
        })
    }
}

impl McpServer {
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
