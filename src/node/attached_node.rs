//! A node this server did not start: reached over distribution with a name and cookie, with the
//! helper loaded into it. There is no OS process to supervise; detaching leaves the node as it
//! was (the helper's server stops, nothing the node uses is unloaded). Its vital signs are
//! sampled while it is attached, as a started node's are; `/proc` only when the node runs on
//! this host.

use super::node_status::{NodeState, NodeStatus};
use super::proc_fs;
use super::vitals::{self, Vitals};
use crate::helper;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

pub struct Attached {
    pub name: String,
    pub node_name: String,
    pub client: Arc<helper::Client>,
    pub vitals: Arc<Vitals>,
    /// The BEAM's OS pid once a sample found the node on this host (0: not known).
    local_pid: Arc<AtomicU32>,
    attached_at: Instant,
    sampling: CancellationToken,
}

impl Attached {
    /// Registers the attachment and starts sampling it (until detached or dropped).
    pub fn new(name: String, client: helper::Client) -> Self {
        let attached = Self {
            name,
            node_name: client.node().to_string(),
            client: Arc::new(client),
            vitals: Arc::default(),
            local_pid: Arc::default(),
            attached_at: Instant::now(),
            sampling: CancellationToken::new(),
        };
        if vitals::sampling_on() {
            attached.sample_vitals();
        }
        attached
    }

    fn sample_vitals(&self) {
        let (client, vitals, stop, local_pid) = (
            self.client.clone(),
            self.vitals.clone(),
            self.sampling.clone(),
            self.local_pid.clone(),
        );
        let node = self.node_name.clone();
        tokio::spawn(async move {
            let mut local = None;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(vitals::SAMPLE_EVERY) => {}
                }
                let sample = tokio::select! {
                    _ = stop.cancelled() => return,
                    sample = vitals::take(&client, true, &mut local, |pid| proc_fs::is_local_beam(pid, &node)) => sample,
                };
                vitals.record(sample);
                local_pid.store(local.unwrap_or(0), Ordering::Relaxed);
            }
        });
    }

    /// The BEAM's OS pid when the node runs on this host (known after its first sample).
    pub fn local_os_pid(&self) -> Option<u32> {
        Some(self.local_pid.load(Ordering::Relaxed)).filter(|pid| *pid != 0)
    }

    /// Stops sampling (the kept history stays readable while something holds it).
    pub fn stop_sampling(&self) {
        self.sampling.cancel();
    }

    pub fn status(&self) -> NodeStatus {
        NodeStatus {
            uptime_ms: Some(self.attached_at.elapsed().as_millis() as u64),
            ..NodeStatus::bare(&self.name, &self.node_name, NodeState::Attached)
        }
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.stop_sampling();
    }
}
