//! The `os_sup_mcp` command line: parse flags, then either serve ([`os_sup_mcp::serve`]: the
//! transports, every child stopped on SIGINT/SIGTERM) or act as a client of a running server.
//! Nothing else lives here.

use clap::Parser;
use os_sup_mcp::node::LogLimits;
use os_sup_mcp::serve::{self, ServeOptions};
use os_sup_mcp::{client, mcp};
use std::path::PathBuf;
use std::process::ExitCode;

/// MCP server that runs, supervises and looks inside Erlang/Elixir nodes.
///
/// Without a command it serves MCP over TCP (newline-delimited JSON-RPC; bridge a stdio client
/// with `socat STDIO TCP:127.0.0.1:9100`) or over stdio with --stdio. With a command it is a
/// client of a running server, e.g. `os_sup_mcp status` or `os_sup_mcp eval web '1 + 1'`.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<client::Command>,
    /// Start the nodes listed in this TOML file at startup (see README).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Server address for client commands: HOST:PORT or unix:PATH, as the server's --listen.
    #[arg(
        long,
        env = "OS_SUP_MCP_CONNECT",
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
    /// Log lines kept per node (the oldest are dropped first: info and debug before warnings and errors, which keep half).
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
    /// With --read-only, still offer `attach`/`remove`: attaching loads the helper's code
    /// into the node named.
    #[arg(long, requires = "read_only")]
    allow_attach: bool,
    /// Offer only these toolsets (comma-separated; `core` is always offered): core,
    /// introspect, trace, dev, code [default: all].
    #[arg(long = "tools", value_name = "SETS", value_delimiter = ',', value_parser = mcp::Toolset::parse)]
    toolsets: Option<Vec<mcp::Toolset>>,
    /// Serve one MCP session on stdin/stdout instead of TCP.
    #[arg(long)]
    stdio: bool,
    /// Start this Mix project at startup (named after its directory).
    #[arg(long, value_name = "PATH")]
    project: Option<PathBuf>,
    /// Directory of the crash-recovery state files [default: $XDG_STATE_HOME/os_sup_mcp or
    /// ~/.local/state/os_sup_mcp]. Given, it also keeps each node's spec (no secret) and log
    /// for the next server, which lists them as stopped and starts them on request; one
    /// server per directory.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Start again the nodes that were up when the server before on --state-dir ended.
    #[arg(long, requires = "state_dir")]
    resume: bool,
    /// Log filter (error, warn, info, debug, trace, or a tracing directive). Logs go to stderr.
    #[arg(long, default_value = "info", value_name = "LEVEL")]
    log_level: String,
}

impl Cli {
    fn serve_options(&self) -> ServeOptions {
        ServeOptions {
            listen: self.listen.clone(),
            stdio: self.stdio,
            http: self.http.clone(),
            token: self.token.clone(),
            allowed_hosts: self.allowed_hosts.clone(),
            allow_insecure: self.allow_insecure,
            max_sessions: self.max_sessions,
            max_nodes: self.max_nodes,
            max_evals: self.max_evals,
            log_limits: LogLimits {
                max_lines: self.log_lines.max(1),
                max_bytes: self.log_bytes.max(1024),
            },
            read_only: self.read_only,
            allow_attach: self.allow_attach,
            toolsets: self
                .toolsets
                .clone()
                .unwrap_or_else(|| mcp::Toolset::ALL.to_vec()),
            config: self.config.clone(),
            project: self.project.clone(),
            state_dir: self.state_dir.clone(),
            resume: self.resume,
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
        return client::command::run(&cli.connect, command);
    }
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // Reported with `eprintln!`, which panics when stderr is gone (its reader exited):
        // every task that logged would die, the signal handler first, and the server would
        // outlive SIGTERM. Logs are lost then; the server goes on.
        .log_internal_errors(false)
        .init();
    let options = cli.serve_options();
    if let Err(why) = serve::check_exposure(&options) {
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
    match runtime.block_on(serve::run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("os_sup_mcp: {e:#}");
            ExitCode::FAILURE
        }
    }
}
