//! A node this server did not start: reached over distribution with a name and cookie, with the
//! helper loaded into it. There is no OS process to supervise; detaching leaves the node as it
//! was (the helper's server stops, nothing the node uses is unloaded).

use super::status::{NodeState, NodeStatus};
use crate::helper;
use std::sync::Arc;
use std::time::Instant;

pub struct Attached {
    pub name: String,
    pub node_name: String,
    pub client: Arc<helper::Client>,
    attached_at: Instant,
}

impl Attached {
    pub fn new(name: String, client: helper::Client) -> Self {
        Self {
            name,
            node_name: client.node().to_string(),
            client: Arc::new(client),
            attached_at: Instant::now(),
        }
    }

    pub fn status(&self) -> NodeStatus {
        NodeStatus {
            name: self.name.clone(),
            node: self.node_name.clone(),
            state: NodeState::Attached,
            os_pid: None,
            uptime_ms: Some(self.attached_at.elapsed().as_millis() as u64),
            restarts: 0,
            restart_policy: super::RestartPolicy::Temporary,
            next_restart_in_ms: None,
            last_exit: None,
            last_error: None,
            warnings: Vec::new(),
            failure: None,
            apps: Vec::new(),
            path: None,
            command: Vec::new(),
            app_restarts: None,
        }
    }
}
