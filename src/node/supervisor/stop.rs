//! Ending an incarnation's OS process.
//!
//! It ends it by steps for a stop asked for (the helper's graceful
//! stop, then SIGTERM, then SIGKILL of its process group, each step bounded), at once for a
//! start that failed or was cancelled; either way, with what it started outside its group (a
//! port's program), read before it is ended.

use super::Supervised;
use crate::node::node_status::NodeState;
use crate::node::spawn::ExitInfo;
use std::time::Duration;

/// Bound on waiting for a process to go after SIGKILL (a zombie never does).
const KILL_WAIT: Duration = Duration::from_secs(5);
/// Time the helper gets for a graceful `init:stop` before it halts the node itself.
const GRACEFUL_STOP: Duration = Duration::from_secs(5);
/// Time we wait for the process to exit after each step of a stop.
const STOP_STEP: Duration = Duration::from_secs(6);
const TERM_STEP: Duration = Duration::from_secs(3);

impl Supervised {
    /// Graceful stop through the helper, then SIGTERM, then SIGKILL of the process group.
    /// Caller holds `lifecycle`.
    pub(super) async fn stop_process(&self) {
        let Some(handle) = self.inner().process.as_ref().map(|p| p.exit_handle()) else {
            let mut inner = self.inner();
            if inner.state != NodeState::Failed {
                inner.state = NodeState::Stopped;
            }
            return;
        };
        self.inner().state = NodeState::Stopping;
        // What it started outside its group (a port's program) is ended with it.
        let family = handle.descendants();
        let asked = self
            .client
            .stop(GRACEFUL_STOP, Duration::from_secs(2))
            .await;
        if asked.is_err() {
            // No helper to ask: closing the control pipe tells it just the same, if it lives.
            if let Some(process) = self.inner().process.as_mut() {
                process.close_control_pipe();
            }
        }
        let exit = match handle.exited_within(STOP_STEP).await {
            Some(exit) => exit,
            None => {
                tracing::warn!(name = %self.name, "graceful stop timed out; sending SIGTERM");
                handle.signal_group(libc::SIGTERM);
                match handle.exited_within(TERM_STEP).await {
                    Some(exit) => exit,
                    None => {
                        tracing::warn!(name = %self.name, "SIGTERM ignored; sending SIGKILL");
                        handle.signal_group(libc::SIGKILL);
                        handle
                            .exited_within(KILL_WAIT)
                            .await
                            .unwrap_or_else(|| ExitInfo {
                                description: "did not exit after SIGKILL (unkillable or a zombie)"
                                    .into(),
                                clean: false,
                            })
                    }
                }
            }
        };
        // Anything the node left behind, in its group or not, goes with it.
        handle.signal_group(libc::SIGKILL);
        end_left_behind(&self.name, &family);
        self.client.disconnect().await;
        let mut inner = self.inner();
        self.process_gone(&mut inner);
        inner.state = NodeState::Stopped;
        inner.started_at = None;
        inner.last_exit = Some(exit.description);
        // A stop asked for is no error's doing.
        inner.exit_error = None;
    }

    /// SIGKILLs the current process group and waits (bounded) for the exit.
    pub(super) async fn kill_process(&self) -> Option<ExitInfo> {
        let handle = self.inner().process.as_ref().map(|p| p.exit_handle())?;
        let family = handle.descendants();
        handle.signal_group(libc::SIGKILL);
        let exit = handle.exited_within(KILL_WAIT).await;
        end_left_behind(&self.name, &family);
        let mut inner = self.inner();
        self.process_gone(&mut inner);
        if let Some(exit) = &exit {
            inner.last_exit = Some(exit.description.clone());
            inner.exit_error = self
                .logs
                .error_of_exit(inner.run_from, std::time::SystemTime::now());
            self.logs.keep_run_end();
        }
        exit
    }
}

/// Ends what the node started that outlived it (a port's program in a session of its own),
/// and says so in the server's log.
fn end_left_behind(name: &str, family: &[(u32, u64)]) {
    let ended = crate::node::proc_fs::end_left_behind(family);
    if ended > 0 {
        tracing::info!(
            name,
            ended,
            "ended OS processes the node started and left behind"
        );
    }
}
