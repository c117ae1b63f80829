//! The `os_sup_mcp` command line: parse flags, then either serve (start the requested
//! transports, stop every child on SIGINT/SIGTERM) or act as a client of a running server.
//! Nothing else lives here.

use clap::{Parser, Subcommand};
use os_sup_mcp::node::state_file::{self, StateFile};
use os_sup_mcp::node::{LogLimits, NodeConfig, Registry};
use os_sup_mcp::{client, config, mcp};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// MCP server that runs, supervises and looks inside Erlang/Elixir nodes.
///
/// Without a command it serves MCP over TCP (newline-delimited JSON-RPC; bridge a stdio client
/// with `socat STDIO TCP:127.0.0.1:9100`) or over stdio with --stdio. With a command it is a
/// client of a running server, e.g. `os_sup_mcp status` or `os_sup_mcp eval web '1 + 1'`.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Start the nodes listed in this TOML file at startup (see README).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Server address for client commands.
    #[arg(
        long,
        default_value = "127.0.0.1:9100",
        value_name = "ADDR",
        global = true
    )]
    connect: String,
    /// Address for the stream transport: HOST:PORT (TCP) or unix:PATH (a socket only this
    /// user can use).
    #[arg(long, default_value = "127.0.0.1:9100", value_name = "ADDR")]
    listen: String,
    /// Also serve Streamable HTTP at /mcp (and GET /health) on this address, e.g.
    /// 127.0.0.1:9101.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// Bearer token required on HTTP requests to /mcp. Prefer the OS_SUP_MCP_TOKEN variable: a
    /// command line is visible to every local user in `ps`.
    #[arg(
        long,
        env = "OS_SUP_MCP_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    token: Option<String>,
    /// Another name HTTP requests may address this server by (a DNS name of this machine, a
    /// proxy); repeatable. Loopback names and, with a wildcard bind, this machine's addresses
    /// and host name are always allowed.
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// Allow non-loopback TCP, or non-loopback HTTP without a token.
    #[arg(long)]
    allow_insecure: bool,
    /// Most concurrent sessions per transport (TCP/Unix, HTTP); more are refused with an error.
    #[arg(long, default_value_t = mcp::MAX_SESSIONS, value_name = "N")]
    max_sessions: usize,
    /// Most nodes (started and attached) this server manages.
    #[arg(long, default_value_t = os_sup_mcp::node::DEFAULT_MAX_NODES, value_name = "N")]
    max_nodes: usize,
    /// Log lines kept per node (the oldest are dropped first).
    #[arg(long, default_value_t = LogLimits::default().max_lines, value_name = "N")]
    log_lines: usize,
    /// Log bytes kept per node.
    #[arg(long, default_value_t = LogLimits::default().max_bytes, value_name = "BYTES")]
    log_bytes: usize,
    /// Most `eval`s running at once on one node; the next is refused as busy.
    #[arg(long, default_value_t = os_sup_mcp::node::DEFAULT_MAX_EVALS, value_name = "N")]
    max_evals: usize,
    /// Offer only tools that run no code and change no node, for production nodes. `attach`
    /// (which loads the helper into a node) is left out unless --allow-attach is also given.
    #[arg(long)]
    read_only: bool,
    /// With --read-only, still offer `attach`/`detach`: attaching loads the helper's code
    /// into the node named.
    #[arg(long, requires = "read_only")]
    allow_attach: bool,
    /// Serve one MCP session on stdin/stdout instead of TCP.
    #[arg(long)]
    stdio: bool,
    /// Start this Mix project at startup (named after its directory).
    #[arg(long, value_name = "PATH")]
    project: Option<PathBuf>,
    /// Directory of the crash-recovery state files [default: $XDG_STATE_HOME/os_sup_mcp or
    /// ~/.local/state/os_sup_mcp].
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Log filter (error, warn, info, debug, trace, or a tracing directive). Logs go to stderr.
    #[arg(long, default_value = "info", value_name = "LEVEL")]
    log_level: String,
}

/// Client commands: each makes one tool call on a running server and prints its text.
#[derive(Subcommand, Debug)]
enum Command {
    /// Show all nodes, or one.
    Status { name: Option<String> },
    /// Start a Mix project (or start a stopped node again when PATH is omitted).
    Start { name: String, path: Option<PathBuf> },
    /// Stop a node.
    Stop { name: String },
    /// Restart a node.
    Restart { name: String },
    /// Forget a stopped, failed or attached node and its logs.
    Remove { name: String },
    /// Evaluate code on a node.
    Eval {
        name: String,
        code: String,
        /// Time the code may run, in ms (default 5000, max 60000).
        #[arg(long)]
        timeout_ms: Option<u64>,
        /// auto (default), elixir or erlang.
        #[arg(long)]
        lang: Option<String>,
    },
    /// Show a node's log.
    Logs {
        name: String,
        #[arg(long, default_value_t = 100)]
        tail: usize,
        /// Only lines matching this regex.
        #[arg(long)]
        grep: Option<String>,
        /// A sequence number, an RFC 3339 time, or a duration such as 5m.
        #[arg(long)]
        since: Option<String>,
        /// Only lines at this level or more severe (e.g. warning, error).
        #[arg(long)]
        min_level: Option<String>,
        /// stdout, stderr or logger.
        #[arg(long)]
        source: Option<String>,
        /// Leave out what evals caused.
        #[arg(long)]
        skip_eval: bool,
    },
    /// List the server's tools, or show one tool's arguments.
    Tools { tool: Option<String> },
    /// Call any tool with JSON arguments, e.g. `call supervision_tree '{"name":"web"}'`.
    Call {
        tool: String,
        arguments: Option<String>,
    },
}

impl Command {
    fn to_call(&self) -> anyhow::Result<(String, Value)> {
        Ok(match self {
            Self::Status { name } => ("status".into(), json!({ "name": name })),
            Self::Start { name, path } => {
                let path = path.as_ref().map(std::fs::canonicalize).transpose()?;
                ("start".into(), json!({ "name": name, "path": path }))
            }
            Self::Stop { name } => ("stop".into(), json!({ "name": name })),
            Self::Restart { name } => ("restart".into(), json!({ "name": name })),
            Self::Remove { name } => ("remove".into(), json!({ "name": name })),
            Self::Eval {
                name,
                code,
                timeout_ms,
                lang,
            } => (
                "eval".into(),
                json!({ "name": name, "code": code, "timeout_ms": timeout_ms, "lang": lang }),
            ),
            Self::Logs {
                name,
                tail,
                grep,
                since,
                min_level,
                source,
                skip_eval,
            } => (
                "logs".into(),
                json!({ "name": name, "tail": tail, "grep": grep, "since": since,
                        "min_level": min_level, "source": source,
                        "skip_eval": skip_eval.then_some(true) }),
            ),
            Self::Tools { .. } => unreachable!("`tools` is not a tool call"),
            Self::Call { tool, arguments } => {
                let arguments = match arguments {
                    Some(text) => serde_json::from_str(text)
                        .map_err(|e| anyhow::anyhow!("arguments are not JSON: {e}"))?,
                    None => json!({}),
                };
                (tool.clone(), arguments)
            }
        })
    }
}

/// Runs one client command; prints the result's text, to stderr when it is an error.
fn run_client(addr: &str, command: &Command) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Command::Tools { tool } = command {
        let listed = runtime.block_on(client::describe_tools(
            addr,
            tool.as_deref(),
            Duration::from_secs(30),
        ));
        return match listed {
            Ok(text) => {
                println!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("os_sup_mcp: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    let outcome = command.to_call().and_then(|(tool, mut arguments)| {
        if let Value::Object(map) = &mut arguments {
            map.retain(|_, v| !v.is_null());
        }
        runtime.block_on(client::call(
            addr,
            &tool,
            arguments,
            Duration::from_secs(600),
        ))
    });
    match outcome {
        Ok((text, false)) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Ok((text, true)) => {
            eprintln!("{text}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("os_sup_mcp: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let token_on_command_line =
        matches.value_source("token") == Some(clap::parser::ValueSource::CommandLine);
    if let Some(command) = &cli.command {
        return run_client(&cli.connect, command);
    }
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Err(why) = check_exposure(&cli) {
        eprintln!("os_sup_mcp: {why}");
        return ExitCode::from(2);
    }
    if token_on_command_line {
        tracing::warn!(
            "--token on the command line is visible to every local user (ps, /proc); set \
             OS_SUP_MCP_TOKEN in the environment instead"
        );
    }
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("os_sup_mcp: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Refuses to expose code execution beyond this machine without authentication: TCP has none
/// at all, HTTP needs a token. `--allow-insecure` overrides.
fn check_exposure(cli: &Cli) -> Result<(), String> {
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

async fn run(cli: Cli) -> anyhow::Result<()> {
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
    let log_limits = LogLimits {
        max_lines: cli.log_lines.max(1),
        max_bytes: cli.log_bytes.max(1024),
    };
    let registry = Arc::new(
        Registry::new()?
            .with_state_file(state)
            .with_limits(cli.max_nodes, log_limits)
            .with_max_evals(cli.max_evals),
    );
    let server = if cli.read_only {
        tracing::info!(
            allow_attach = cli.allow_attach,
            "read-only: only tools that run no code and change no node are offered"
        );
        mcp::McpServer::read_only(registry.clone(), cli.allow_attach)
    } else {
        mcp::McpServer::new(registry.clone())
    };
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));

    let listener = if cli.stdio {
        None
    } else {
        let listener = mcp::Listener::bind(&cli.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", cli.listen))?;
        tracing::info!(addr = %listener.describe(), "serving MCP");
        Some(listener)
    };
    let mut http = None;
    if let Some(addr) = &cli.http {
        let bound = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen for HTTP on {addr}: {e}"))?;
        tracing::info!(http = %bound.local_addr()?, auth = cli.token.is_some(), "serving MCP over HTTP at /mcp");
        let options = mcp::HttpOptions {
            token: cli.token.clone(),
            allowed_hosts: cli.allowed_hosts.clone(),
            max_sessions: cli.max_sessions,
        };
        let task = mcp::serve_http(bound, server.clone(), options, shutdown.clone());
        http = Some(tokio::spawn(task));
    }

    for node in initial_nodes(&cli)? {
        let registry = registry.clone();
        tokio::spawn(async move {
            let name = node.name.clone();
            match registry.start_node(node).await {
                Ok(status) => tracing::info!(%name, node = %status.node, "node started"),
                Err(e) => tracing::error!(%name, "node failed to start: {e}"),
            }
        });
    }

    match listener {
        Some(listener) => {
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
    if let Some(http) = http {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), http).await;
    }
    registry.shutdown().await;
    Ok(())
}

/// The nodes to start with the server: from `--config`, then `--project`.
fn initial_nodes(cli: &Cli) -> anyhow::Result<Vec<NodeConfig>> {
    let mut nodes = match &cli.config {
        Some(file) => config::load(file)?,
        None => Vec::new(),
    };
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
