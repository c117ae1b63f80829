//! The JSON the page polls, each answer made by the same [`Registry`](crate::node::Registry)
//! call a tool makes. The answers are `status` (+ the node's own report), `supervision_tree`,
//! `processes` with a window, `process_info` with a profile, `logs` since a sequence number,
//! and the activity feed; plus start/stop/restart.

use super::Dashboard;
use crate::mcp::tools::processes::{self, SortBy};
use crate::mcp::tools::supervision_tree;
use crate::node::{NodeError, NodeInfo, NodeStatus, Query, Since};
use axum::extract::{Path, Query as Params, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::future::Future;
use std::time::Duration;

/// Longest wait for one node's answer; the page shows the error and asks again later.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Log lines sent at most per request (the page keeps 2000).
const MAX_LOG_LINES: usize = 1000;
/// Processes listed at most.
const MAX_PROCESSES: u32 = 30;
/// Longest sampling window the page may ask for.
const MAX_WINDOW_MS: u32 = 5000;
/// Window of the mailbox-growth sample that marks tree processes.
const GROWTH_WINDOW_MS: u32 = 500;

/// At most [`super::MAX_API_REQUESTS`] API requests at once; the next is told to retry.
pub(super) async fn one_of_few(
    State(dashboard): State<Dashboard>,
    request: Request,
    next: Next,
) -> Response {
    let Ok(_permit) = dashboard.permits.clone().try_acquire_owned() else {
        return failure(
            StatusCode::SERVICE_UNAVAILABLE,
            "the dashboard is busy; retry shortly".into(),
        );
    };
    next.run(request).await
}

fn failure(status: StatusCode, error: String) -> Response {
    (status, Json(json!({ "error": error }))).into_response()
}

fn node_failure(error: NodeError) -> Response {
    let status = match error {
        NodeError::UnknownNode { .. } | NodeError::InvalidName(_) => StatusCode::NOT_FOUND,
        _ => StatusCode::CONFLICT,
    };
    failure(status, error.to_string())
}

/// Runs one registry call with [`CALL_TIMEOUT`].
async fn bounded<T>(call: impl Future<Output = Result<T, NodeError>>) -> Result<T, Response> {
    bounded_within(CALL_TIMEOUT, call).await
}

/// Runs one registry call with `limit`.
async fn bounded_within<T>(
    limit: Duration,
    call: impl Future<Output = Result<T, NodeError>>,
) -> Result<T, Response> {
    match tokio::time::timeout(limit, call).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(node_failure(e)),
        Err(_) => Err(failure(
            StatusCode::GATEWAY_TIMEOUT,
            format!("the node did not answer within {} s", limit.as_secs()),
        )),
    }
}

/// A refusal unless the request carries `X-OS-Sup: 1`, which the page sends and a cross-site
/// form, `<img>` or `<script>` cannot (and a cross-site `fetch` that sets it needs a CORS
/// preflight this server never grants).
fn not_from_the_page(headers: &HeaderMap) -> Option<Response> {
    headers.get("x-os-sup").is_none_or(|v| v != "1").then(|| {
        failure(
            StatusCode::FORBIDDEN,
            "send the header `X-OS-Sup: 1` (the dashboard page does)".into(),
        )
    })
}

#[derive(Serialize)]
struct NodeView {
    #[serde(flatten)]
    status: NodeStatus,
    /// The node's own report (running nodes that answered).
    info: Option<NodeInfo>,
}

/// `GET /api/nodes`: every node's status, and each running node's memory and process count.
pub(super) async fn nodes(State(dashboard): State<Dashboard>) -> Response {
    let registry = &dashboard.registry;
    let views: Vec<NodeView> = registry
        .list_nodes_with_info(Duration::from_secs(1))
        .await
        .into_iter()
        .map(|(status, info)| NodeView { status, info })
        .collect();
    Json(json!({
        "server": {
            "instance": dashboard.instance,
            "version": env!("CARGO_PKG_VERSION"),
            "read_only": dashboard.read_only,
        },
        "nodes": views,
    }))
    .into_response()
}

/// `GET /api/nodes/{name}/tree`: the supervision tree, and the processes whose mailbox grew
/// over a short window (the page marks them in the tree).
pub(super) async fn tree(State(dashboard): State<Dashboard>, Path(name): Path<String>) -> Response {
    let registry = &dashboard.registry;
    let walk = supervision_tree::call(&supervision_tree::Input {
        depth: Some(10),
        max_children: Some(100),
        ..supervision_tree::Input::default()
    });
    let growth = processes::call(&processes::Input {
        sort_by: SortBy::MessageQueueLen,
        limit: Some(20),
        window_ms: Some(GROWTH_WINDOW_MS),
        ..processes::Input::default()
    });
    let (tree, growth) = tokio::join!(
        bounded(registry.call_tool(&name, &walk)),
        bounded(registry.call_tool(&name, &growth)),
    );
    let tree = match tree {
        Ok(tree) => tree.data,
        Err(response) => return response,
    };
    let growing: Vec<_> = growth
        .map(|g| processes::rows(&g.data))
        .unwrap_or_default()
        .into_iter()
        .filter(|row| row.value > 0)
        .map(|row| json!({"pid": row.pid, "growth": row.value, "queue": row.message_queue_len}))
        .collect();
    Json(json!({"tree": tree, "growing": growing, "window_ms": GROWTH_WINDOW_MS})).into_response()
}

/// `GET /api/nodes/{name}/vitals`: the vital signs this server kept of the node (at most
/// [`PLOT_POINTS`] samples of each meter, thinned evenly over the kept hour).
pub(super) async fn vitals(
    State(dashboard): State<Dashboard>,
    Path(name): Path<String>,
) -> Response {
    match dashboard.registry.vitals(&name) {
        Some(vitals) => Json(vitals.to_json(PLOT_POINTS)).into_response(),
        None => failure(
            StatusCode::NOT_FOUND,
            format!("no vital signs kept for `{name}` (only nodes this server started have them)"),
        ),
    }
}

/// `GET /api/clusters`: who sees whom in each cluster this server started (every member of
/// every cluster asked at once, each within [`CLUSTER_VIEW_LIMIT`]).
pub(super) async fn clusters(State(dashboard): State<Dashboard>) -> Response {
    let registry = &dashboard.registry;
    let names = registry.cluster_names();
    let views = names
        .iter()
        .map(|name| registry.cluster_view(name, CLUSTER_VIEW_LIMIT));
    let views: Vec<_> = futures::future::join_all(views)
        .await
        .into_iter()
        .filter_map(Result::ok)
        .collect();
    Json(json!({ "clusters": views })).into_response()
}

/// How long each member may take to say whom it sees, for the page (shorter than a tool's
/// [`VIEW_LIMIT`](crate::node::cluster::VIEW_LIMIT): the page asks every 3 s).
const CLUSTER_VIEW_LIMIT: Duration = Duration::from_secs(2);

/// Points per plotted series.
const PLOT_POINTS: usize = 300;

#[derive(Deserialize)]
pub(super) struct ProcessesParams {
    #[serde(default)]
    sort_by: SortBy,
    #[serde(default)]
    window_ms: u32,
    #[serde(default = "default_limit")]
    limit: u32,
}

fn default_limit() -> u32 {
    15
}

/// `GET /api/nodes/{name}/processes?sort_by=memory&window_ms=1000&limit=15`.
pub(super) async fn processes(
    State(dashboard): State<Dashboard>,
    Path(name): Path<String>,
    Params(params): Params<ProcessesParams>,
) -> Response {
    let window = params.window_ms.min(MAX_WINDOW_MS);
    let call = processes::call(&processes::Input {
        sort_by: params.sort_by,
        limit: Some(params.limit.clamp(1, MAX_PROCESSES)),
        window_ms: (window > 0).then_some(window),
        ..processes::Input::default()
    });
    match bounded(dashboard.registry.call_tool(&name, &call)).await {
        Ok(found) => Json(found.data).into_response(),
        Err(response) => response,
    }
}

#[derive(Deserialize)]
pub(super) struct ProfileParams {
    pid: String,
    #[serde(default = "default_profile_ms")]
    ms: u32,
}

fn default_profile_ms() -> u32 {
    1000
}

/// `GET /api/nodes/{name}/profile?pid=PID&ms=1000` with `X-OS-Sup: 1`: `process_info` with
/// `profile_ms` (at most [`MAX_WINDOW_MS`]): the process's stack read every 5 ms, folded for a
/// flame graph, and the application's functions seen most. It runs no code of the node's and
/// changes nothing, but keeps a sampler busy for `ms`: it takes the header, so that another
/// site's `<img>` cannot start one.
pub(super) async fn profile(
    State(dashboard): State<Dashboard>,
    Path(name): Path<String>,
    Params(params): Params<ProfileParams>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = not_from_the_page(&headers) {
        return refused;
    }
    let ms = params.ms.clamp(1, MAX_WINDOW_MS);
    // The mailbox is not read: only the profile is shown.
    let call = crate::mcp::tools::process_info::profile_call(&params.pid, ms);
    let limit = CALL_TIMEOUT + Duration::from_millis(ms.into());
    match bounded_within(limit, dashboard.registry.call_tool(&name, &call)).await {
        Ok(found) => Json(json!({
            "pid": found.data["pid"],
            "registered_name": found.data["registered_name"],
            "profile": found.data["profile"],
        }))
        .into_response(),
        Err(response) => response,
    }
}

#[derive(Deserialize)]
pub(super) struct LogParams {
    since: Option<u64>,
}

/// `GET /api/nodes/{name}/logs?since=SEQ`: lines from `since` on (the newest
/// [`MAX_LOG_LINES`]); without `since`, the tail. Kept after the node exits.
pub(super) async fn logs(
    State(dashboard): State<Dashboard>,
    Path(name): Path<String>,
    Params(params): Params<LogParams>,
) -> Response {
    let query = Query {
        tail: MAX_LOG_LINES,
        since: params.since.map(Since::Seq),
        ..Query::default()
    };
    match dashboard.registry.logs(&name, &query) {
        Ok(page) => Json(page).into_response(),
        Err(e) => node_failure(e),
    }
}

#[derive(Deserialize)]
pub(super) struct ActivityParams {
    #[serde(default)]
    since: u64,
}

/// `GET /api/activity?since=ID`: the tool calls answered after `since`.
pub(super) async fn activity(
    State(dashboard): State<Dashboard>,
    Params(params): Params<ActivityParams>,
) -> Response {
    let calls = dashboard
        .activity
        .since(params.since, crate::mcp::activity::MAX_CALLS);
    Json(json!({ "calls": calls })).into_response()
}

/// `POST /api/nodes/{name}/start|stop|restart` with `X-OS-Sup: 1` (only without `--read-only`).
pub(super) async fn act(
    State(dashboard): State<Dashboard>,
    Path((name, action)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = not_from_the_page(&headers) {
        return refused;
    }
    let registry = &dashboard.registry;
    tracing::info!(%name, %action, "dashboard request");
    let done = match action.as_str() {
        "start" => registry.start_existing(&name).await,
        "stop" => registry.stop_node(&name).await,
        "restart" => registry.restart_node(&name).await,
        _ => {
            return failure(
                StatusCode::NOT_FOUND,
                format!("no action `{action}`: use start, stop or restart"),
            )
        }
    };
    match done {
        Ok(status) => Json(status).into_response(),
        Err(e) => node_failure(e),
    }
}
