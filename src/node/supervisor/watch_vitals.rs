//! Sampling a node's vital signs beside it.
//!
//! One sampler per incarnation, every
//! [`vitals::SAMPLE_EVERY`], into the history the node keeps across restarts.

use super::Supervised;
use crate::node::node_status::NodeState;
use crate::node::vitals;
use std::sync::Arc;

impl Supervised {
    /// Samples one incarnation's vital signs every [`vitals::SAMPLE_EVERY`] until it is gone
    /// (the node is not asked before it runs; `/proc` is read from its spawn on).
    pub(super) fn sample_vitals(self: &Arc<Self>, generation: u64, os_pid: u32) {
        let this = Arc::downgrade(self);
        tokio::spawn(async move {
            // The BEAM's own pid, once the node reports it (a command may start it under a
            // shell); this server spawned it, so the pid it reports is trusted.
            let mut beam_pid = Some(os_pid);
            loop {
                tokio::time::sleep(vitals::SAMPLE_EVERY).await;
                let Some(this) = this.upgrade() else { return };
                let running = {
                    let inner = this.inner();
                    if inner.generation != generation || inner.process.is_none() {
                        return;
                    }
                    inner.state == NodeState::Running
                };
                let sample = vitals::take(&this.client, running, &mut beam_pid, |_| true).await;
                this.vitals.record(sample);
            }
        });
    }
}
