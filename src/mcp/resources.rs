//! MCP resources: each node's log as `beam://NAME/logs` (its newest lines, as the `logs` tool
//! prints them) and its supervision tree as `beam://NAME/tree` (the `supervision_tree` tool's
//! text), read through the same [`crate::node::Registry`] calls as those tools.
//!
//! Subscriptions announce new error-level log lines (crash and supervisor reports included)
//! with `notifications/resources/updated` for both URIs of the node, at most one per
//! [`THROTTLE`] per resource: through `resources/subscribe` on sessions that began with
//! `initialize`, and through `subscriptions/listen` on 2026-07-28 ones. A watcher ends with
//! its subscription, its session, or its node (`remove`); it never polls.

use super::tools::supervision_tree;
use super::McpServer;
use crate::node::{NodeError, NodeState, Query};
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ResourceUpdatedNotificationParam, SubscriptionFilter,
};
use rmcp::service::SubscriptionContext;
use rmcp::{ErrorData, Peer, RoleServer};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

/// Newest log lines in a `logs` resource (each at most ~1 KB: about 100 KB at most).
pub const LOG_LINES: usize = 100;
/// At most one update notification per resource this often.
pub const THROTTLE: Duration = Duration::from_secs(1);
/// Samples per series in a `vitals` resource.
const VITALS_POINTS: usize = 300;
/// Most resources one session may watch through `resources/subscribe`.
const MAX_SUBSCRIPTIONS: usize = 256;

/// What a `beam://` URI names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Logs,
    Tree,
    Vitals,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Logs, Kind::Tree, Kind::Vitals];

    fn path(self) -> &'static str {
        match self {
            Kind::Logs => "logs",
            Kind::Tree => "tree",
            Kind::Vitals => "vitals",
        }
    }

    fn mime_type(self) -> &'static str {
        match self {
            Kind::Vitals => "application/json",
            _ => "text/plain",
        }
    }

    fn template(self) -> String {
        format!("beam://{{name}}/{}", self.path())
    }

    fn uri(self, name: &str) -> String {
        format!("beam://{name}/{}", self.path())
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Logs => "The node's newest log lines (stdout, stderr, logger events), one per line; subscribe to hear of new error-level lines.",
            Kind::Tree => "The node's OTP supervision tree, as the `supervision_tree` tool shows it.",
            Kind::Vitals => "The node's vital signs over the last hour, as JSON columns (`keys`, `rows`: memory by type, processes, ports, atoms, ETS tables and their limits, run queue, errors, and the OS process's memory, fds and threads), one sample every 2 s, thinned to 300.",
        }
    }
}

/// A parsed `beam://NAME/logs` or `beam://NAME/tree`.
struct BeamUri {
    name: String,
    kind: Kind,
}

impl BeamUri {
    fn parse(uri: &str) -> Result<Self, ErrorData> {
        let not_found = || {
            ErrorData::resource_not_found(
                format!("unknown resource `{uri}`: resources are beam://NAME/logs, beam://NAME/tree and beam://NAME/vitals (see resources/list)"),
                Some(serde_json::json!({ "uri": uri })),
            )
        };
        let (name, path) = uri
            .strip_prefix("beam://")
            .and_then(|rest| rest.split_once('/'))
            .ok_or_else(not_found)?;
        let kind = Kind::ALL
            .into_iter()
            .find(|kind| kind.path() == path)
            .ok_or_else(not_found)?;
        Ok(Self {
            name: name.to_string(),
            kind,
        })
    }
}

/// A node error as a JSON-RPC error: unknown nodes are unknown resources; the message says
/// what to do next either way.
fn node_error(uri: &str, error: NodeError) -> ErrorData {
    let data = Some(serde_json::json!({ "uri": uri }));
    match error {
        NodeError::UnknownNode { .. } | NodeError::InvalidName(_) => {
            ErrorData::resource_not_found(error.to_string(), data)
        }
        NodeError::AttachedNode { name } => ErrorData::resource_not_found(
            format!("node `{name}` is attached: this server keeps no log for it (beam://{name}/tree can be read, without updates)"),
            data,
        ),
        _ => ErrorData::internal_error(error.to_string(), data),
    }
}

/// One session's `resources/subscribe` watchers, by URI; dropping a guard stops its watcher.
/// A clone is empty: each session's handler is a clone of the server's, and its watchers
/// stop when that session's handler is dropped.
#[derive(Default)]
pub(crate) struct Subscriptions(Mutex<HashMap<String, DropGuard>>);

impl Clone for Subscriptions {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl Subscriptions {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, DropGuard>> {
        self.0.lock().expect("subscriptions lock")
    }
}

/// Calls `notify(uri)` after each error line newer than what `errors` has seen (at most once
/// per [`THROTTLE`]) until `stop`, the node's log goes away, or `notify` fails (the session is
/// gone). A fresh receiver has seen the count at subscription time, so a line logged between
/// subscribing and this task's start still counts.
async fn watch_errors<F, Fut, E>(
    mut errors: watch::Receiver<u64>,
    uri: String,
    stop: CancellationToken,
    notify: F,
) where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = errors.changed() => if changed.is_err() { return },
        }
        if notify(uri.clone()).await.is_err() {
            return;
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(THROTTLE) => {}
        }
    }
}

/// Whether `uri_template` is one of ours (for completion).
pub(crate) fn is_resource_template(uri_template: &str) -> bool {
    Kind::ALL.iter().any(|kind| kind.template() == uri_template)
}

impl McpServer {
    /// `resources/list`: both resources of each node (only the tree of an attached node,
    /// whose log this server does not keep).
    pub(crate) fn resources_list(&self) -> ListResourcesResult {
        let resources = self
            .registry
            .list_nodes()
            .into_iter()
            .flat_map(|node| {
                Kind::ALL
                    .into_iter()
                    .filter(move |&kind| kind == Kind::Tree || node.state != NodeState::Attached)
                    .map(move |kind| {
                        Resource::new(
                            kind.uri(&node.name),
                            format!("{} {}", node.name, kind.path()),
                        )
                        .with_description(kind.describe())
                        .with_mime_type(kind.mime_type())
                    })
            })
            .collect();
        ListResourcesResult::with_all_items(resources)
    }

    /// `resources/templates/list`: `beam://{name}/logs` and `beam://{name}/tree`.
    pub(crate) fn resource_templates(&self) -> ListResourceTemplatesResult {
        ListResourceTemplatesResult::with_all_items(
            Kind::ALL
                .into_iter()
                .map(|kind| {
                    ResourceTemplate::new(kind.template(), format!("node {}", kind.path()))
                        .with_description(kind.describe())
                        .with_mime_type(kind.mime_type())
                })
                .collect(),
        )
    }

    /// `resources/read`.
    pub(crate) async fn resource_read(&self, uri: &str) -> Result<ReadResourceResult, ErrorData> {
        let BeamUri { name, kind } = BeamUri::parse(uri)?;
        let text = match kind {
            Kind::Logs => {
                let query = Query {
                    tail: LOG_LINES,
                    ..Query::default()
                };
                self.registry
                    .logs(&name, &query)
                    .map_err(|e| node_error(uri, e))?
                    .compact()
            }
            Kind::Tree => {
                self.registry
                    .call_tool(&name, &supervision_tree::call(&Default::default()))
                    .await
                    .map_err(|e| node_error(uri, e))?
                    .text
            }
            Kind::Vitals => match self.registry.vitals(&name) {
                Some(vitals) => vitals.to_json(VITALS_POINTS).to_string(),
                None => {
                    return Err(ErrorData::resource_not_found(
                        format!(
                            "no vital signs for `{name}`: this server keeps them for the nodes \
                             it started (see resources/list)"
                        ),
                        Some(serde_json::json!({ "uri": uri })),
                    ))
                }
            },
        };
        Ok(ReadResourceResult::new(vec![ResourceContents::text(
            text, uri,
        )]))
    }

    /// The error-line counter behind `uri`.
    fn errors_of(&self, uri: &str) -> Result<watch::Receiver<u64>, ErrorData> {
        let BeamUri { name, .. } = BeamUri::parse(uri)?;
        self.registry
            .log_errors(&name)
            .map_err(|e| node_error(uri, e))
    }

    /// `resources/subscribe` (sessions that began with `initialize`): watch `uri` until
    /// `unsubscribe` or the end of the session. Subscribing twice is subscribing once.
    pub(crate) fn resource_subscribe(
        &self,
        uri: String,
        peer: Peer<RoleServer>,
    ) -> Result<(), ErrorData> {
        let errors = self.errors_of(&uri)?;
        let mut watchers = self.subscriptions.map();
        if watchers.contains_key(&uri) {
            return Ok(());
        }
        if watchers.len() >= MAX_SUBSCRIPTIONS {
            return Err(ErrorData::invalid_request(
                format!("this session already watches {MAX_SUBSCRIPTIONS} resources; unsubscribe from one first"),
                None,
            ));
        }
        let stop = CancellationToken::new();
        watchers.insert(uri.clone(), stop.clone().drop_guard());
        tokio::spawn(watch_errors(errors, uri, stop, move |uri| {
            let peer = peer.clone();
            async move {
                peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                    .await
            }
        }));
        Ok(())
    }

    /// `resources/unsubscribe`: a URI not watched is fine.
    pub(crate) fn resource_unsubscribe(&self, uri: &str) {
        self.subscriptions.map().remove(uri);
    }

    /// What `subscriptions/listen` (2026-07-28) accepts: the resource URIs that can be watched
    /// now. `None` (nothing at all) leaves the request unanswered as unknown.
    pub(crate) fn accepted_subscriptions(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let uris = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|uri| self.errors_of(uri).is_ok())
            .take(MAX_SUBSCRIPTIONS);
        Some(
            SubscriptionFilter::builder()
                .resource_subscriptions(uris)
                .build(),
        )
    }

    /// `subscriptions/listen`: one watcher per accepted URI, until the request is cancelled.
    pub(crate) async fn resources_listen(&self, context: SubscriptionContext) {
        let stop = CancellationToken::new();
        let _stop_watchers = stop.clone().drop_guard();
        let uris = context.accepted().resource_subscriptions.clone();
        for uri in uris.into_iter().flatten() {
            let Ok(errors) = self.errors_of(&uri) else {
                continue;
            };
            let sink = context.sink().clone();
            tokio::spawn(watch_errors(errors, uri, stop.clone(), move |uri| {
                let sink = sink.clone();
                async move { sink.notify_resource_updated(uri).await }
            }));
        }
        context.cancelled().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse_and_unknown_ones_say_what_exists() {
        let uri = BeamUri::parse("beam://web/logs").unwrap();
        assert_eq!((uri.name.as_str(), uri.kind), ("web", Kind::Logs));
        assert_eq!(BeamUri::parse("beam://web/tree").unwrap().kind, Kind::Tree);
        for bad in ["beam://web", "beam://web/other", "file:///etc/passwd"] {
            let error = BeamUri::parse(bad).err().map(|e| e.message.to_string());
            assert!(
                error
                    .as_deref()
                    .is_some_and(|m| m.contains("beam://NAME/logs")),
                "{bad}: {error:?}"
            );
        }
    }

    #[tokio::test]
    async fn watchers_notify_once_per_burst_and_stop_with_the_log() {
        let (errors, receiver) = watch::channel(0u64);
        let (sent, mut notified) = tokio::sync::mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let watcher = tokio::spawn(watch_errors(
            receiver,
            "beam://a/logs".into(),
            stop,
            move |uri| {
                let sent = sent.clone();
                async move { sent.send(uri) }
            },
        ));
        for n in 1..=5 {
            errors.send_replace(n);
        }
        assert_eq!(notified.recv().await.as_deref(), Some("beam://a/logs"));
        drop(errors);
        tokio::time::timeout(Duration::from_secs(5), watcher)
            .await
            .expect("the watcher ends with its log")
            .unwrap();
        let rest: Vec<String> = std::iter::from_fn(|| notified.try_recv().ok()).collect();
        assert!(rest.len() <= 1, "a burst is throttled: {rest:?}");
    }
}
