//! The `os_sup_mcp` command line: parse flags, then either serve ([`os_sup_mcp::serve`]: the
//! transports, every child stopped on SIGINT/SIGTERM) or act as a client of a running server.
//! Nothing else lives here.

use clap::{Parser, Subcommand};
use os_sup_mcp::node::LogLimits;
use os_sup_mcp::serve::{self, ServeOptions};
use os_sup_mcp::{client, mcp};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

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

/// Client commands: each makes one tool call on a running server and prints its text.
#[derive(Subcommand, Debug)]
enum Command {
    /// Show all nodes, or one.
    Status { name: Option<String> },
    /// Start a Mix project (or start a stopped node again when PATH is omitted).
    Start {
        name: String,
        path: Option<PathBuf>,
        /// Start a cluster of this many members, NAME-1..NAME-N, connected to each other.
        #[arg(long)]
        nodes: Option<usize>,
    },
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
        /// Run it on every member of cluster NAME.
        #[arg(long)]
        all: bool,
    },
    /// What is wrong with a node (or a cluster), ranked, each finding with its next call.
    Diagnose {
        name: String,
        /// How long the node samples itself, in ms (100..5000, default 1000).
        #[arg(long)]
        window_ms: Option<u32>,
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
            Self::Start { name, path, nodes } => {
                let path = path.as_ref().map(std::fs::canonicalize).transpose()?;
                (
                    "start".into(),
                    json!({ "name": name, "path": path, "nodes": nodes }),
                )
            }
            Self::Diagnose { name, window_ms } => (
                "diagnose".into(),
                json!({ "name": name, "window_ms": window_ms }),
            ),
            Self::Stop { name } => ("stop".into(), json!({ "name": name })),
            Self::Restart { name } => ("restart".into(), json!({ "name": name })),
            Self::Remove { name } => ("remove".into(), json!({ "name": name })),
            Self::Eval {
                name,
                code,
                timeout_ms,
                lang,
                all,
            } => (
                "eval".into(),
                json!({ "name": name, "code": code, "timeout_ms": timeout_ms, "lang": lang,
                        "all": all.then_some(true) }),
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
                print_answer(&text);
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
            print_answer(&text);
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

/// Writes an answer to stdout; a reader that went away (`| head -1`) is no error of ours.
fn print_answer(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}
