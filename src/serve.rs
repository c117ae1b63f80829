//! Serving: what `os_sup_mcp` does without a client command. Checks the exposure policy,
//! opens the state file, starts the transports (TCP or Unix socket, stdio, HTTP) over one
//! [`Registry`], starts the configured nodes, and on SIGINT/SIGTERM stops every node before
//! it returns.

use crate::node::persist::NodeStore;
use crate::node::state_file::{self, StateFile};
use crate::node::{LogLimits, NodeConfig, Registry};
use crate::{config, mcp};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Everything the command line decides about serving.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// `HOST:PORT` or `unix:PATH` for the stream transport (unused with `stdio`).
    pub listen: String,
    pub stdio: bool,
    pub http: Option<String>,
    pub token: Option<String>,
    pub allowed_hosts: Vec<String>,
    pub allow_insecure: bool,
    pub max_sessions: usize,
    pub max_nodes: usize,
    pub max_evals: usize,
    pub log_limits: LogLimits,
    pub read_only: bool,
    pub allow_attach: bool,
    /// The toolsets offered (`core` is always in).
    pub toolsets: Vec<mcp::Toolset>,
    pub config: Option<PathBuf>,
    pub project: Option<PathBuf>,
    /// Given: the nodes are also kept there for the next server (one server per directory).
    pub state_dir: Option<PathBuf>,
    /// Start again the nodes that were up when the server before on `state_dir` ended.
    pub resume: bool,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9100".into(),
            stdio: false,
            http: None,
            token: None,
            allowed_hosts: Vec::new(),
            allow_insecure: false,
            max_sessions: mcp::MAX_SESSIONS,
            max_nodes: crate::node::DEFAULT_MAX_NODES,
            max_evals: crate::node::DEFAULT_MAX_EVALS,
            log_limits: LogLimits::default(),
            read_only: false,
            allow_attach: false,
            toolsets: mcp::Toolset::ALL.to_vec(),
            config: None,
            project: None,
            state_dir: None,
            resume: false,
        }
    }
}

/// Refuses to expose code execution beyond this machine without authentication: TCP has none
/// at all, HTTP needs a token. `--allow-insecure` overrides.
pub fn check_exposure(cli: &ServeOptions) -> Result<(), String> {
    if cli.allow_insecure {
        return Ok(());
    }
    if !cli.stdio && !cli.listen.starts_with("unix:") && !is_loopback(&cli.listen) {
        return Err(format!(
            "refusing to serve MCP over TCP on non-loopback {}: anyone who reaches it can run code \
             on this machine and TCP has no authentication. Use --http with --token, a unix: \
             socket, or pass --allow-insecure if the network is trusted.",
            cli.listen
        ));
    }
    if let Some(http) = &cli.http {
        if !is_loopback(http) && cli.token.is_none() {
            return Err(format!(
                "refusing to serve HTTP on non-loopback {http} without --token (or \
                 OS_SUP_MCP_TOKEN): anyone who reaches it could run code on this machine. \
                 Pass --allow-insecure if the network is trusted."
            ));
        }
    }
    Ok(())
}

/// True when every address `spec` (HOST:PORT) resolves to is a loopback address.
fn is_loopback(spec: &str) -> bool {
    use std::net::ToSocketAddrs;
    match spec.to_socket_addrs() {
        Ok(addrs) => {
            let addrs: Vec<_> = addrs.collect();
            !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback())
        }
        Err(_) => false,
    }
}

pub async fn run(cli: ServeOptions) -> anyhow::Result<()> {
    let config = match &cli.config {
        Some(file) => config::load(file)?,
        None => config::Config::default(),
    };
    let resume = cli.resume || config.resume;
    // A signal from here on is a clean shutdown, even before the server serves.
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    // Bound first: a server that cannot listen leaves its state dir as it was.
    let listener = if cli.stdio {
        None
    } else {
        let listener = mcp::Listener::bind(&cli.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", cli.listen))?;
        Some(listener)
    };
    let http = match &cli.http {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen for HTTP on {addr}: {e}"))?,
        ),
        None => None,
    };
    // A state dir given is this server's alone: taken before anything is done in it.
    let store = match &cli.state_dir {
        Some(dir) => Some(NodeStore::open(dir).map_err(|e| anyhow::anyhow!("{e}"))?),
        None if resume => anyhow::bail!(
            "--resume (or `resume = true`) needs --state-dir: the directory where the server \
             before kept its nodes"
        ),
        None => None,
    };
    let ended = store.as_ref().map(|(store, _)| store.clone());
    let served = serve(cli, config, resume, store, (listener, http), shutdown).await;
    // A server that could not start says so to the next one (not `killed`).
    if let (Err(e), Some(store)) = (&served, ended) {
        store.close(&format!("exited 1 as it started: {e:#}"));
    }
    served
}

/// The server on what `run` has taken: its sockets and its state dir.
async fn serve(
    cli: ServeOptions,
    config: config::Config,
    resume: bool,
    store: Option<(Arc<NodeStore>, crate::node::persist::Loaded)>,
    (listener, http): (Option<mcp::Listener>, Option<tokio::net::TcpListener>),
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let state_dir = cli
        .state_dir
        .clone()
        .unwrap_or_else(state_file::default_dir);
    let label = if cli.stdio {
        "stdio"
    } else {
        cli.listen.as_str()
    };
    let (state, reaped) = StateFile::open(&state_dir, label)
        .map_err(|e| anyhow::anyhow!("state directory {}: {e}", state_dir.display()))?;
    for line in &reaped {
        tracing::warn!("{line}");
    }
    if reaped.is_empty() {
        tracing::info!(dir = %state_dir.display(), "no survivors of earlier servers to reap");
    }
    let log_limits = cli.log_limits;
    let mut registry = Registry::new()?
        .with_state_file(state)
        .with_limits(cli.max_nodes, log_limits)
        .with_max_evals(cli.max_evals);
    if let Some((store, _)) = &store {
        registry = registry.with_store(store.clone());
    }
    let registry = Arc::new(registry);
    if let Some((_, loaded)) = &store {
        for line in &loaded.set_aside {
            tracing::warn!("state dir: {line}");
        }
        for line in registry.restore(loaded) {
            tracing::info!("known from the server before: {line}");
        }
        if resume {
            registry.resume(loaded);
        }
    }
    let mut sets = cli.toolsets.clone();
    sets.push(mcp::Toolset::Core);
    sets.sort();
    sets.dedup();
    let choice = mcp::ToolChoice {
        sets,
        read_only: cli.read_only,
        allow_attach: cli.allow_attach,
    };
    if cli.read_only {
        tracing::info!(
            allow_attach = cli.allow_attach,
            "read-only: only tools that run no code and change no node are offered"
        );
    }
    let server = mcp::McpServer::with_tools(registry.clone(), &choice);
    if choice.sets.len() < mcp::Toolset::ALL.len() {
        let sets: Vec<&str> = choice.sets.iter().map(|set| set.name()).collect();
        tracing::info!(toolsets = %sets.join(","), "offering only some toolsets");
    }
    for node in initial_nodes(&cli, config.nodes)? {
        let name = node.name.clone();
        // Registered before any session is served: an agent's first call waits for the boot.
        let start = registry.spawn_start(node)?;
        tokio::spawn(async move {
            match start.await {
                Ok(Ok(status)) => tracing::info!(%name, node = %status.node, "node started"),
                Ok(Err(e)) => tracing::error!(%name, "node failed to start: {e}"),
                Err(e) => tracing::error!(%name, "node start task ended: {e}"),
            }
        });
    }

    let mut http_task = None;
    if let Some(bound) = http {
        tracing::info!(http = %bound.local_addr()?, auth = cli.token.is_some(), "serving MCP over HTTP at /mcp and the dashboard at /");
        let options = mcp::HttpOptions {
            token: cli.token.clone(),
            allowed_hosts: cli.allowed_hosts.clone(),
            max_sessions: cli.max_sessions,
            pages: Some(crate::dashboard::router(
                registry.clone(),
                server.activity().clone(),
                cli.read_only,
            )),
        };
        let task = mcp::serve_http(bound, server.clone(), options, shutdown.clone());
        http_task = Some(tokio::spawn(task));
    }

    match listener {
        Some(listener) => {
            tracing::info!(addr = %listener.describe(), "serving MCP");
            mcp::serve_listener(listener, server, cli.max_sessions, shutdown.clone()).await
        }
        None => {
            tokio::select! {
                _ = mcp::serve_stdio(server, shutdown.clone()) => {}
                _ = shutdown.cancelled() => {}
            }
        }
    }
    tracing::info!("shutting down: stopping all nodes");
    shutdown.cancel();
    if let Some(http) = http_task {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), http).await;
    }
    registry.shutdown().await;
    Ok(())
}

/// The nodes to start with the server: from `--config` (`configured`), then `--project`.
fn initial_nodes(
    cli: &ServeOptions,
    configured: Vec<NodeConfig>,
) -> anyhow::Result<Vec<NodeConfig>> {
    let mut nodes = configured;
    if let Some(path) = &cli.project {
        let path = std::fs::canonicalize(path)
            .map_err(|e| anyhow::anyhow!("--project {}: {e}", path.display()))?;
        nodes.push(NodeConfig::mix(project_name(&path), path));
    }
    Ok(nodes)
}

/// A valid node name from a project directory (`my-app.v2` → `my-app_v2`).
fn project_name(path: &std::path::Path) -> String {
    let base = path.file_name().and_then(|n| n.to_str()).unwrap_or("app");
    let mut name: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name.insert(0, 'p');
        name.truncate(64);
    }
    name
}

async fn stop_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("signal received; shutting down");
    shutdown.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(listen: &str, http: Option<&str>, token: bool) -> ServeOptions {
        ServeOptions {
            listen: listen.into(),
            http: http.map(String::from),
            token: token.then(|| "t".into()),
            ..ServeOptions::default()
        }
    }

    #[test]
    fn loopback_and_unix_sockets_are_fine_without_auth() {
        assert!(check_exposure(&options("127.0.0.1:9100", None, false)).is_ok());
        assert!(check_exposure(&options("[::1]:9100", None, false)).is_ok());
        assert!(check_exposure(&options("localhost:9100", None, false)).is_ok());
        assert!(check_exposure(&options("unix:/tmp/x.sock", None, false)).is_ok());
        assert!(check_exposure(&options("127.0.0.1:0", Some("127.0.0.1:0"), false)).is_ok());
    }

    #[test]
    fn code_execution_is_not_exposed_beyond_this_machine_without_auth() {
        let tcp = check_exposure(&options("0.0.0.0:9100", None, false)).unwrap_err();
        assert!(
            tcp.contains("--allow-insecure") && tcp.contains("unix:"),
            "{tcp}"
        );
        let http =
            check_exposure(&options("127.0.0.1:0", Some("0.0.0.0:9101"), false)).unwrap_err();
        assert!(http.contains("--token"), "{http}");
        assert!(check_exposure(&options("127.0.0.1:0", Some("0.0.0.0:9101"), true)).is_ok());
        // A name that does not resolve is not assumed to be loopback.
        assert!(check_exposure(&options("no-such-host.invalid:1", None, false)).is_err());
        let stdio = ServeOptions {
            stdio: true,
            listen: "0.0.0.0:1".into(),
            ..ServeOptions::default()
        };
        assert!(check_exposure(&stdio).is_ok(), "stdio listens on nothing");
        let insecure = ServeOptions {
            allow_insecure: true,
            ..options("0.0.0.0:1", Some("0.0.0.0:2"), false)
        };
        assert!(check_exposure(&insecure).is_ok());
    }

    #[test]
    fn project_names_are_valid_node_names() {
        assert_eq!(
            project_name(std::path::Path::new("/x/my-app.v2")),
            "my-app_v2"
        );
        assert_eq!(project_name(std::path::Path::new("/x/2fast")), "p2fast");
    }
}
