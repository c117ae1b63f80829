//! The `os_sup_mcp` command line: parse flags, then either serve (start the requested
//! transports, stop every child on SIGINT/SIGTERM) or act as a client of a running server.
//! Nothing else lives here.

use clap::{Parser, Subcommand};
use os_sup_mcp::node::state_file::{self, StateFile};
use os_sup_mcp::node::{NodeConfig, Registry};
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
    /// Address for the TCP transport.
    #[arg(long, default_value = "127.0.0.1:9100", value_name = "ADDR")]
    listen: String,
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
    /// Evaluate code on a node.
    Eval { name: String, code: String },
    /// Show a node's log.
    Logs {
        name: String,
        #[arg(long, default_value_t = 100)]
        tail: usize,
        #[arg(long)]
        grep: Option<String>,
        #[arg(long)]
        since: Option<String>,
    },
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
            Self::Eval { name, code } => ("eval".into(), json!({ "name": name, "code": code })),
            Self::Logs {
                name,
                tail,
                grep,
                since,
            } => (
                "logs".into(),
                json!({ "name": name, "tail": tail, "grep": grep, "since": since }),
            ),
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
    let cli = Cli::parse();
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
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("os_sup_mcp: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let state_dir = cli
        .state_dir
        .clone()
        .unwrap_or_else(state_file::default_dir);
    let listener_label = if cli.stdio {
        "stdio"
    } else {
        cli.listen.as_str()
    };
    let (state, reaped) = StateFile::open(&state_dir, listener_label)
        .map_err(|e| anyhow::anyhow!("state directory {}: {e}", state_dir.display()))?;
    for line in &reaped {
        tracing::warn!("{line}");
    }
    if reaped.is_empty() {
        tracing::info!(dir = %state_dir.display(), "no survivors of earlier servers to reap");
    }
    let registry = Arc::new(Registry::new()?.with_state_file(state));
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));

    let listener = if cli.stdio {
        None
    } else {
        let listener = tokio::net::TcpListener::bind(&cli.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", cli.listen))?;
        tracing::info!(addr = %listener.local_addr()?, "serving MCP over TCP");
        Some(listener)
    };

    let mut initial = match &cli.config {
        Some(file) => config::load(file)?,
        None => Vec::new(),
    };
    if let Some(path) = cli.project {
        let path = std::fs::canonicalize(&path)
            .map_err(|e| anyhow::anyhow!("--project {}: {e}", path.display()))?;
        initial.push(NodeConfig::mix(project_name(&path), path));
    }
    for node in initial {
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
        Some(listener) => mcp::serve_tcp(listener, registry.clone(), shutdown.clone()).await,
        None => {
            tokio::select! {
                result = mcp::serve_stdio(registry.clone(), shutdown.clone()) => {
                    if let Err(e) = result {
                        tracing::warn!("stdio session ended: {e:#}");
                    }
                }
                _ = shutdown.cancelled() => {}
            }
        }
    }
    tracing::info!("stopping all nodes");
    shutdown.cancel();
    registry.shutdown().await;
    Ok(())
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
