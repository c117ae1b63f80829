//! Forwarding a node's OTP logger events into its log.
//!
//! One subscription to its helper per
//! incarnation, taken again after a lost connection, for as long as that incarnation runs.

use super::Supervised;
use crate::node::logs::{Level, Origin, Source};
use crate::node::node_status::NodeState;
use std::sync::Arc;
use std::time::Duration;

/// Pause before subscribing again after the subscription ended or was refused.
const RESUBSCRIBE_PAUSE: Duration = Duration::from_millis(200);

impl Supervised {
    /// Copies the node's OTP logger events into its log for as long as this incarnation lives,
    /// subscribing again after a lost connection.
    pub(super) fn forward_logger_events(self: &Arc<Self>, generation: u64) {
        let this = self.clone();
        let up = self.inner().process.as_ref().map(|p| p.helper_up());
        tokio::spawn(async move {
            // Not before the helper says it answers: a request to a name not registered yet
            // is dropped, and a handshake before the cookie is set is refused (and logged by
            // the node). The helper keeps the events logged meanwhile.
            if let Some(up) = up {
                if up.await.is_err() {
                    return;
                }
            }
            loop {
                let alive = {
                    let inner = this.inner();
                    inner.generation == generation
                        && matches!(inner.state, NodeState::Starting | NodeState::Running)
                };
                if !alive {
                    return;
                }
                match this.client.subscribe_logs().await {
                    Ok(mut events) => {
                        while let Some(event) = events.next().await {
                            let level = Level::parse(&event.level);
                            let origin = if event.first_to_die {
                                Origin::FirstToDie
                            } else {
                                Origin::of_eval(event.eval)
                            };
                            this.logs
                                .push_from(Source::Logger, level, &event.text, origin);
                        }
                    }
                    Err(e) => tracing::trace!(name = %this.name, "log subscription: {e}"),
                }
                tokio::time::sleep(RESUBSCRIBE_PAUSE).await;
            }
        });
    }
}
