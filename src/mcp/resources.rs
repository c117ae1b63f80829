//! MCP resources: a node's log, its supervision tree, and where one of its processes spends its
//! time. The log is `beam://NAME/logs` (its newest lines, as the `logs` tool prints them) and
//! the tree `beam://NAME/tree` (the `supervision_tree` tool's text), read through the same
//! [`crate::node::Registry`] calls as those tools; and, from a template only, the time
//! `beam://NAME/profile/PID` (`process_info` with `profile_ms`, in the folded-stacks format
//! flame-graph tools read).
//!
//! Subscriptions announce new error-level log lines (crash and supervisor reports included)
//! with `notifications/resources/updated` for both URIs of the node, at most one per
//! [`THROTTLE`] per resource: through `resources/subscribe` on sessions that began with
//! `initialize`, and through `subscriptions/listen` on 2026-07-28 ones. A watcher ends with
//! its subscription, its session, or its node (`remove`); it never polls.

use super::tools::process_info::profile_call;
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
/// How long a `profile` resource samples the process's stack, in ms.
const PROFILE_MS: u32 = 1000;

/// What a `beam://` URI names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Logs,
    Tree,
    Vitals,
    /// Of one process: the node's name and the pid follow.
    Profile,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Logs, Kind::Tree, Kind::Vitals, Kind::Profile];
    /// What `resources/list` shows of each node (a profile needs a pid: template only).
    const LISTED: [Kind; 3] = [Kind::Logs, Kind::Tree, Kind::Vitals];

    fn path(self) -> &'static str {
        match self {
            Kind::Logs => "logs",
            Kind::Tree => "tree",
            Kind::Vitals => "vitals",
            Kind::Profile => "profile",
        }
    }

    fn mime_type(self) -> &'static str {
        match self {
            Kind::Vitals => "application/json",
            _ => "text/plain",
        }
    }

    fn template(self) -> String {
        match self {
            Kind::Profile => "beam://{name}/profile/{pid}".to_string(),
            _ => format!("beam://{{name}}/{}", self.path()),
        }
    }

    fn uri(self, name: &str) -> String {
        format!("beam://{name}/{}", self.path())
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Logs => "The node's newest log lines (stdout, stderr, logger events), one per line; subscribe to hear of new error-level lines.",
            Kind::Tree => "The node's OTP supervision tree, as the `supervision_tree` tool shows it.",
            Kind::Vitals => "The node's vital signs over the last hour, as JSON columns (`keys`, `rows`: memory by type, processes, ports, atoms, ETS tables and their limits, run queue, errors, and the OS process's memory, fds and threads), one sample every 2 s, thinned to 300.",
            Kind::Profile => "Where one process (a pid such as 0.123.0, or a registered name) spends its time: its stack read every 5 ms for 1 s, in the folded-stacks format flame-graph tools read (`root;…;leaf count` per line, counting the reads that found it running or runnable; empty when it only waited).",
        }
    }
}

/// A parsed `beam://NAME/logs`, `…/tree`, `…/vitals` or `…/profile/PID`.
struct BeamUri {
    name: String,
    kind: Kind,
    /// The process of a profile (percent-escapes decoded), empty otherwise.
    pid: String,
}

impl BeamUri {
    fn parse(uri: &str) -> Result<Self, ErrorData> {
        let not_found = || {
            ErrorData::resource_not_found(
                format!("unknown resource `{uri}`: resources are beam://NAME/logs, beam://NAME/tree, beam://NAME/vitals and beam://NAME/profile/PID (see resources/list and resources/templates/list)"),
                Some(serde_json::json!({ "uri": uri })),
            )
        };
        let (name, path) = uri
            .strip_prefix("beam://")
            .and_then(|rest| rest.split_once('/'))
            .ok_or_else(not_found)?;
        let (path, pid) = match path.split_once('/') {
            Some((path, pid)) if path == Kind::Profile.path() && !pid.is_empty() => {
                (path, percent_decoded(pid))
            }
            Some(_) => return Err(not_found()),
            None if path == Kind::Profile.path() => return Err(not_found()),
            None => (path, String::new()),
        };
        let kind = Kind::ALL
            .into_iter()
            .find(|kind| kind.path() == path)
            .ok_or_else(not_found)?;
        Ok(Self {
            name: name.to_string(),
            kind,
            pid,
        })
    }
}

/// `%XX` escapes decoded: a client that expands `beam://{name}/profile/{pid}` sends
/// `<0.123.0>` as `%3C0.123.0%3E`. Anything else is kept as it is.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .filter(|hex| hex.iter().all(u8::is_ascii_hexdigit))
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `process_info`'s `profile` as folded stacks, one `root;…;leaf count` line each, most
/// samples first; the samples of the stacks the node did not send (`folded_cut`) are added to
/// one `other` line, so the counts add up to the reads that found the process running.
fn folded(profile: &serde_json::Value) -> String {
    let mut stacks: Vec<(&str, u64)> = profile["folded"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| Some((entry["stack"].as_str()?, entry["count"].as_u64()?)))
        .collect();
    let kept: u64 = stacks.iter().map(|(_, count)| count).sum();
    let rest = profile["running"]
        .as_u64()
        .unwrap_or(0)
        .saturating_sub(kept);
    if rest > 0 {
        match stacks.iter_mut().find(|(stack, _)| *stack == "other") {
            Some((_, count)) => *count += rest,
            None => stacks.push(("other", rest)),
        }
    }
    stacks
        .iter()
        .map(|(stack, count)| format!("{stack} {count}\n"))
        .collect()
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
    /// `resources/list`: the log, tree and vital signs of each node (only the tree of an
    /// attached node, whose log this server does not keep); a profile is read from its
    /// template.
    pub(crate) fn resources_list(&self) -> ListResourcesResult {
        let resources = self
            .registry
            .list_nodes()
            .into_iter()
            .flat_map(|node| {
                Kind::LISTED
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

    /// `resources/templates/list`: `beam://{name}/logs`, `…/tree`, `…/vitals` and
    /// `…/profile/{pid}`.
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
        let BeamUri { name, kind, pid } = BeamUri::parse(uri)?;
        let text = match kind {
            Kind::Logs => {
                let query = Query {
                    tail: LOG_LINES,
                    fold: true,
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
            Kind::Profile => {
                let reply = self
                    .registry
                    .call_tool(&name, &profile_call(&pid, PROFILE_MS))
                    .await
                    .map_err(|e| node_error(uri, e))?;
                folded(&reply.data["profile"])
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

    /// The error-line counter behind `uri`; a profile has none (it is sampled when read).
    fn errors_of(&self, uri: &str) -> Result<watch::Receiver<u64>, ErrorData> {
        let BeamUri { name, kind, .. } = BeamUri::parse(uri)?;
        if kind == Kind::Profile {
            return Err(ErrorData::invalid_params(
                format!(
                    "`{uri}` is sampled each time it is read: read it again rather than subscribe"
                ),
                Some(serde_json::json!({ "uri": uri })),
            ));
        }
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
        let profile = BeamUri::parse("beam://web/profile/%3C0.12.0%3E").unwrap();
        assert_eq!(
            (profile.name.as_str(), profile.kind, profile.pid.as_str()),
            ("web", Kind::Profile, "<0.12.0>")
        );
        assert_eq!(
            BeamUri::parse("beam://web/profile/Shop.Cart").unwrap().pid,
            "Shop.Cart"
        );
        for bad in [
            "beam://web",
            "beam://web/other",
            "beam://web/profile",
            "beam://web/profile/",
            "beam://web/tree/x",
            "file:///etc/passwd",
        ] {
            let error = BeamUri::parse(bad).err().map(|e| e.message.to_string());
            assert!(
                error
                    .as_deref()
                    .is_some_and(|m| m.contains("beam://NAME/logs")),
                "{bad}: {error:?}"
            );
        }
    }

    #[test]
    fn profiles_fold_into_lines_that_add_up() {
        let profile = serde_json::json!({
            "running": 10,
            "folded": [{"stack": "a:b/0;c:d/1", "count": 6}, {"stack": "a:b/0", "count": 3}],
            "folded_cut": 1,
        });
        assert_eq!(folded(&profile), "a:b/0;c:d/1 6\na:b/0 3\nother 1\n");
        assert_eq!(folded(&serde_json::json!({"running": 0, "folded": []})), "");
        assert_eq!(percent_decoded("%23PID%3c0.1.0%3E%2"), "#PID<0.1.0>%2");
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
