//! How a call that arrives while its node boots or restarts waits for it: until it runs
//! ([`Supervised::wait_running`]) or, for a call that only looks, until its helper answers
//! ([`Supervised::wait_answering`]); and the clear error when it is not coming up.

use super::Supervised;
use crate::node::node_status::NodeState;
use crate::node::{NodeError, FAILURE_TAIL_LINES};
use std::time::{Duration, Instant};

impl Supervised {
    /// Waits while the child is starting or restarting (at most `limit`), so a call made
    /// while it boots runs once it is up; fails at once with the reason when it is not
    /// running and not coming up, or when it failed meanwhile.
    pub async fn wait_running(&self, limit: Duration) -> Result<(), NodeError> {
        let coming_up =
            |state: &NodeState| matches!(state, NodeState::Starting | NodeState::Restarting);
        let mut states = self.state_changes.subscribe();
        let state = *states.borrow_and_update();
        if !coming_up(&state) {
            return self.ensure_running();
        }
        let next_restart = self.inner().next_restart;
        if next_restart.is_some_and(|at| at > Instant::now() + limit) {
            // A long backoff: nothing will happen within the wait.
            return self.ensure_running();
        }
        let began = Instant::now();
        // `is_ok` drops the borrow `wait_for` returns: holding it while the state lock is
        // taken would deadlock with the publishing in `InnerGuard::drop`.
        let settled = tokio::time::timeout(limit, states.wait_for(|s| !coming_up(s)))
            .await
            .is_ok_and(|changed| changed.is_ok());
        match self.state() {
            NodeState::Running => Ok(()),
            NodeState::Failed if settled => Err(NodeError::StartFailed {
                name: self.name.clone(),
                reason: self.inner().failure.clone().unwrap_or_default(),
                output: self.logs.tail_text(FAILURE_TAIL_LINES),
            }),
            state if coming_up(&state) => Err(NodeError::StillStarting {
                name: self.name.clone(),
                state,
                waited_s: began.elapsed().as_secs(),
            }),
            _ => self.ensure_running(),
        }
    }

    /// As [`Self::wait_running`], except that a child still starting is ready for a call
    /// that only looks as soon as its helper has announced itself (before its applications
    /// have started, which is when a boot that hangs can be seen).
    pub async fn wait_answering(&self, limit: Duration) -> Result<(), NodeError> {
        let began = Instant::now();
        if self.state() == NodeState::Starting {
            let mut states = self.state_changes.subscribe();
            // Up, or the start ended (ready, failed, stopped) meanwhile: then as below.
            // The borrow `wait_for` returns is dropped at once (see `wait_running`).
            let settled = async {
                let _ = states.wait_for(|s| *s != NodeState::Starting).await.is_ok();
            };
            let up = tokio::select! {
                up = self.helper_up(limit) => up,
                () = settled => false,
            };
            if up && self.state() == NodeState::Starting {
                return Ok(());
            }
        }
        self.wait_running(limit.saturating_sub(began.elapsed()))
            .await
    }

    /// Fails unless the child is running, so callers get a clear error instead of a timeout.
    pub fn ensure_running(&self) -> Result<(), NodeError> {
        match self.state() {
            NodeState::Running => Ok(()),
            state => Err(NodeError::NotRunning {
                name: self.name.clone(),
                state,
                hint: state.hint(),
            }),
        }
    }
}
