//! What happens when an incarnation dies on its own.
//!
//! Its exit is watched, and the restart policy
//! decides between `stopped`, `failed` and a restart; restarts follow one another with backoff
//! until one sticks or the restart intensity
//! ([`Intensity`](crate::node::restart_policy::Intensity)) is exceeded, and a stop request
//! cancels a backoff in progress.

use super::Supervised;
use crate::node::node_status::NodeState;
use crate::node::restart_policy::Decision;
use crate::node::spawn::ExitInfo;
use crate::node::NodeError;
use std::sync::Arc;
use std::time::Instant;

impl Supervised {
    /// Watches one incarnation; if it dies on its own, restarts it per the restart limits.
    pub(super) fn watch_exit(self: &Arc<Self>, generation: u64) {
        let this = self.clone();
        let handle = self.inner().process.as_ref().map(|p| p.exit_handle());
        let Some(handle) = handle else { return };
        tokio::spawn(async move {
            let mut exit = handle.exited().await;
            let _guard = this.lifecycle.lock().await;
            {
                let mut inner = this.inner();
                if let Some(description) = inner.exit_override.take() {
                    exit = ExitInfo {
                        description,
                        clean: false,
                    };
                }
                // Stops, restarts and failed starts handle their own exits.
                if inner.generation != generation || inner.state != NodeState::Running {
                    return;
                }
                this.process_gone(&mut inner);
                inner.last_exit = Some(exit.description.clone());
                inner.exit_error = this
                    .logs
                    .error_of_exit(inner.run_from, std::time::SystemTime::now());
                this.logs.keep_run_end();
                let policy = inner.config.restart.policy;
                if !policy.restarts_after(exit.clean) {
                    tracing::info!(name = %this.name, exit = %exit.description, ?policy, "node exited; not restarting");
                    if exit.clean {
                        inner.state = NodeState::Stopped;
                    } else {
                        inner.state = NodeState::Failed;
                        inner.failure = Some(format!(
                            "exited ({}); restart policy `temporary` does not restart it",
                            exit.description
                        ));
                    }
                    return;
                }
                // Restarting from this moment: a status read before the restart loop runs
                // must not say `running` with no OS process.
                inner.state = NodeState::Restarting;
            }
            tracing::warn!(name = %this.name, exit = %exit.description, "node crashed");
            this.client.disconnect().await;
            this.restart_after_crash(exit.description).await;
        });
    }

    /// The OTP part: restart with backoff until it sticks or the intensity is exceeded.
    async fn restart_after_crash(self: &Arc<Self>, mut last_exit: String) {
        loop {
            let (backoff, stop_requested) = {
                let mut inner = self.inner();
                let limits = inner.config.restart;
                let now = Instant::now();
                let backoff = match inner.intensity.on_crash(now, &limits) {
                    Decision::Restart { backoff } => backoff,
                    Decision::GiveUp { recent } => {
                        inner.state = NodeState::Failed;
                        inner.failure = Some(format!(
                            "restart limit reached: {recent} restarts within {} s; last exit: {last_exit}",
                            limits.period.as_secs()
                        ));
                        tracing::error!(name = %self.name, "restart limit reached; node failed");
                        return;
                    }
                };
                inner.restarts += 1;
                inner.state = NodeState::Restarting;
                inner.next_restart = Some(now + backoff);
                (backoff, inner.stop_requested.clone())
            };
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = stop_requested.cancelled() => {
                    let mut inner = self.inner();
                    inner.state = NodeState::Stopped;
                    inner.next_restart = None;
                    return;
                }
            }
            self.inner().next_restart = None;
            match self.start_process(Some(&last_exit)).await {
                Ok(()) => return,
                Err(NodeError::StartCancelled { .. }) => return,
                Err(e) => last_exit = e.to_string().lines().next().unwrap_or_default().to_string(),
            }
        }
    }
}
