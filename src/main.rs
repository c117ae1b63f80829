//! The `os_sup_mcp` command line: parse flags, start the requested transports, and stop every
//! child on SIGINT/SIGTERM. Nothing else lives here.

use clap::Parser;
use os_sup_mcp::mcp;
use os_sup_mcp::node::{NodeConfig, Registry};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// MCP server that runs, supervises and looks inside Erlang/Elixir nodes.
///
/// Serves MCP over TCP (newline-delimited JSON-RPC; bridge a stdio client with
/// `socat STDIO TCP:127.0.0.1:9100`) or over stdio with --stdio.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Cli {
    /// Address for the TCP transport.
    #[arg(long, default_value = "127.0.0.1:9100", value_name = "ADDR")]
    listen: String,
    /// Serve one MCP session on stdin/stdout instead of TCP.
    #[arg(long)]
    stdio: bool,
    /// Start this Mix project at startup (named after its directory).
    #[arg(long, value_name = "PATH")]
    project: Option<PathBuf>,
    /// Log filter (error, warn, info, debug, trace, or a tracing directive). Logs go to stderr.
    #[arg(long, default_value = "info", value_name = "LEVEL")]
    log_level: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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
    let registry = Arc::new(Registry::new()?);
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

    if let Some(path) = cli.project {
        let path = std::fs::canonicalize(&path)
            .map_err(|e| anyhow::anyhow!("--project {}: {e}", path.display()))?;
        let name = project_name(&path);
        let registry = registry.clone();
        tokio::spawn(async move {
            match registry
                .start_node(NodeConfig::mix(name.clone(), path))
                .await
            {
                Ok(status) => tracing::info!(%name, node = %status.node, "project started"),
                Err(e) => tracing::error!(%name, "project failed to start: {e}"),
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
