//! The client's verbs (`status`, `start`, `eval`, `logs`, `trace`…): each is one tool call
//! whose arguments are its flags, run on a running server by [`run`]. A verb is named after its
//! tool (`trace-results` also answers to `trace_results`); `call` reaches any tool with JSON.

use clap::Subcommand;
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Client commands: each makes one tool call on a running server and prints its text.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show all nodes, or one.
    Status { name: Option<String> },
    /// Start a Mix project (or start a stopped node again when PATH is omitted), e.g.
    /// `start shop path/to/app --command "mix phx.server" --ready-url http://127.0.0.1:4000/`.
    Start {
        /// The node's name (a cluster's, with --nodes).
        name: String,
        /// The Mix project's directory.
        path: Option<PathBuf>,
        /// Run this instead of `mix run --no-halt`, in PATH: a command line split like a
        /// shell's (quotes group words), e.g. "mix phx.server" or "iex -S mix".
        #[arg(long, value_name = "COMMAND")]
        command: Option<String>,
        /// Ready once this URL answers 2xx or 3xx (a web app).
        #[arg(long, value_name = "URL", group = "ready")]
        ready_url: Option<String>,
        /// Ready once 127.0.0.1:PORT accepts TCP connections.
        #[arg(long, value_name = "PORT", group = "ready")]
        ready_port: Option<u16>,
        /// Ready once a line of output matches this regex.
        #[arg(long, value_name = "REGEX", group = "ready")]
        ready_log: Option<String>,
        /// Ready once the application has started (the default).
        #[arg(long, group = "ready")]
        ready_app: bool,
        /// An environment variable for the node, KEY=VALUE; repeatable.
        #[arg(long = "env", value_name = "KEY=VALUE", value_parser = key_value)]
        env: Vec<(String, String)>,
        /// MIX_ENV (dev unless given).
        #[arg(long, value_name = "ENV")]
        mix_env: Option<String>,
        /// When to restart it: transient (default: after a crash), permanent or temporary
        /// (never: a node left up after its application exits, to look at).
        #[arg(long, value_name = "POLICY",
              value_parser = ["transient", "permanent", "temporary"])]
        restart: Option<String>,
        /// How long it may take to be ready, in ms (default 120000).
        #[arg(long, value_name = "MS")]
        start_timeout_ms: Option<u64>,
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
        /// A sequence number (a header's `next since=`), a time as lines print it
        /// (17:29:04.183, UTC, today), an RFC 3339 time, or an age such as 5m.
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
        /// Every line as logged: alike lines are otherwise folded into their first, counted.
        #[arg(long)]
        no_fold: bool,
    },
    /// Who waits on whom: blocked calls followed to the bottleneck, rates, deadlocks.
    Waits {
        name: String,
        /// Only the chain of this process (`#PID<0.1.0>`, `<0.1.0>` or a registered name).
        #[arg(long)]
        pid: Option<String>,
        /// How long rates are measured, in ms (0..5000, default 500).
        #[arg(long)]
        window_ms: Option<u32>,
        /// Chains shown (1..20, default 5).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Trace a module's (or one function's) calls and results, bounded; prints the session id
    /// that `trace-results` reads.
    Trace {
        name: String,
        /// `MyApp.Cart`, `:ets` or `ets`.
        module: String,
        /// `name` or `name/arity`; every function of the module when omitted.
        function: Option<String>,
        /// The session stops after this many calls (1..10000).
        #[arg(long, default_value_t = 100)]
        max_events: u32,
        /// The session stops after this long, in ms (max 60000).
        #[arg(long)]
        duration_ms: Option<u32>,
        /// The session stops when calls come faster than this many a second.
        #[arg(long)]
        rate: Option<u32>,
        /// Only the calls of this process.
        #[arg(long)]
        pid: Option<String>,
        /// Calls only, not their results (for loops).
        #[arg(long)]
        no_returns: bool,
        /// Trace a whole hot module (many calls a second).
        #[arg(long)]
        force: bool,
    },
    /// A trace session's events: `trace-results web:t1`, or `trace-results web` for the
    /// node's newest session.
    #[command(alias = "trace_results")]
    TraceResults {
        /// A session id as `trace` printed it (`web:t1`), or a node's name.
        target: String,
        /// Only events from this sequence number on (the `since=` a page ends with).
        #[arg(long)]
        since: Option<u64>,
        /// Events shown (1..1000, default 100).
        #[arg(long)]
        limit: Option<u32>,
        /// Stop the session first.
        #[arg(long)]
        stop: bool,
    },
    /// List the server's tools, or show one tool's arguments, their forms and an example.
    Tools { tool: Option<String> },
    /// Call any tool with JSON arguments, e.g. `call supervision_tree '{"name":"web"}'`.
    Call {
        tool: String,
        arguments: Option<String>,
    },
}

/// The verb that calls tool `tool` (`trace-results` for `trace_results`), if there is one.
pub fn verb_of(tool: &str) -> Option<String> {
    let verbs = Command::augment_subcommands(clap::Command::new("os_sup_mcp"));
    let verb = tool.replace('_', "-");
    let found = verbs
        .get_subcommands()
        .any(|c| c.get_name() == verb && !matches!(tool, "tools" | "call"));
    found.then_some(verb)
}

impl Command {
    /// The tool this command calls and its arguments (absent ones left out).
    fn to_call(&self) -> anyhow::Result<(String, Value)> {
        let (tool, arguments) = match self {
            Self::Status { name } => ("status".into(), json!({ "name": name })),
            Self::Start {
                name,
                path,
                command,
                ready_url,
                ready_port,
                ready_log,
                ready_app,
                env,
                mix_env,
                restart,
                start_timeout_ms,
                nodes,
            } => {
                let path = path
                    .as_ref()
                    .map(|p| {
                        std::fs::canonicalize(p)
                            .map_err(|e| anyhow::anyhow!("PATH `{}`: {e}", p.display()))
                    })
                    .transpose()?;
                let command = command.as_deref().map(split_command).transpose()?;
                let ready = match (ready_url, ready_port, ready_log, ready_app) {
                    (Some(url), ..) => Some(json!({ "url": url })),
                    (_, Some(port), ..) => Some(json!({ "port": port })),
                    (_, _, Some(re), _) => Some(json!({ "log": re })),
                    (_, _, _, true) => Some(json!("app")),
                    _ => None,
                };
                let env: Map<String, Value> =
                    env.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                (
                    "start".into(),
                    json!({ "name": name, "path": path, "nodes": nodes, "command": command,
                            "ready": ready, "mix_env": mix_env, "restart": restart,
                            "start_timeout_ms": start_timeout_ms,
                            "env": (!env.is_empty()).then_some(env) }),
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
                no_fold,
            } => (
                "logs".into(),
                json!({ "name": name, "tail": tail, "grep": grep, "since": since,
                        "min_level": min_level, "source": source,
                        "skip_eval": skip_eval.then_some(true),
                        "fold": no_fold.then_some(false) }),
            ),
            Self::Waits {
                name,
                pid,
                window_ms,
                limit,
            } => (
                "waits".into(),
                json!({ "name": name, "pid": pid, "window_ms": window_ms, "limit": limit }),
            ),
            Self::Trace {
                name,
                module,
                function,
                max_events,
                duration_ms,
                rate,
                pid,
                no_returns,
                force,
            } => (
                "trace".into(),
                json!({ "name": name, "module": module, "function": function,
                        "max_events": max_events, "duration_ms": duration_ms, "rate": rate,
                        "pid": pid, "returns": no_returns.then_some(false),
                        "force": force.then_some(true) }),
            ),
            Self::TraceResults {
                target,
                since,
                limit,
                stop,
            } => {
                // `web:t1` is a session; `web` a node, whose newest session is read.
                let (session, name) = match target.contains(':') {
                    true => (Some(target), None),
                    false => (None, Some(target)),
                };
                (
                    "trace_results".into(),
                    json!({ "session": session, "name": name, "since": since,
                            "limit": limit, "stop": stop.then_some(true) }),
                )
            }
            Self::Tools { .. } => unreachable!("`tools` is not a tool call"),
            Self::Call { tool, arguments } => {
                let arguments = match arguments {
                    Some(text) => serde_json::from_str(text)
                        .map_err(|e| anyhow::anyhow!("arguments are not JSON: {e}"))?,
                    None => json!({}),
                };
                return Ok((tool.clone(), arguments));
            }
        };
        let mut arguments = arguments;
        if let Value::Object(map) = &mut arguments {
            map.retain(|_, v| !v.is_null());
        }
        Ok((tool, arguments))
    }
}

/// Runs one client command on the server at `addr`; prints the result's text, to stderr when
/// it is an error. Exit code 0: done; 1: the tool answered with an error; 2: no answer.
pub fn run(addr: &str, command: &Command) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Command::Tools { tool } = command {
        let listed = runtime.block_on(super::describe_tools(
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
    let outcome = command.to_call().and_then(|(tool, arguments)| {
        runtime.block_on(super::call(
            addr,
            &tool,
            arguments,
            Duration::from_secs(600),
        ))
    });
    match outcome {
        Ok(answer) if !answer.is_error => {
            print_answer(&runnable_next(&answer.text, &answer.data));
            ExitCode::SUCCESS
        }
        Ok(answer) => {
            eprintln!("{}", runnable_next(&answer.text, &answer.data));
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("os_sup_mcp: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Writes an answer to stdout; a reader that went away (`| head -1`) is no error of ours.
fn print_answer(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

/// The next calls an answer's data holds: every `next` that is `{tool, arguments}` (a
/// finding's, at any depth), as (tool, arguments).
fn next_calls<'a>(data: &'a Value, out: &mut Vec<(&'a str, &'a Value)>) {
    match data {
        Value::Object(map) => {
            for (key, value) in map {
                if let (true, Some(tool), Some(args)) = (
                    key == "next",
                    value["tool"].as_str(),
                    value.get("arguments").filter(|a| a.is_object()),
                ) {
                    out.push((tool, args));
                } else {
                    next_calls(value, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| next_calls(v, out)),
        _ => {}
    }
}

/// An answer's text as it is, then each of its next calls (those of its `data`, in order,
/// each once) as the command that makes it from a shell: `os_sup_mcp call TOOL '{JSON}'`.
/// The text is not read: the data says which calls there are.
fn runnable_next(text: &str, data: &Value) -> String {
    let mut calls = Vec::new();
    next_calls(data, &mut calls);
    let mut commands: Vec<String> = Vec::new();
    for (tool, args) in calls {
        let json = args.to_string().replace('\'', "'\\''");
        let command = format!("  os_sup_mcp call {tool} '{json}'");
        if !commands.contains(&command) {
            commands.push(command);
        }
    }
    if commands.is_empty() {
        return text.to_string();
    }
    format!("{text}\n\nnext, from a shell:\n{}", commands.join("\n"))
}

/// `KEY=VALUE` of `--env`.
fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.into(), value.into())),
        _ => Err(format!("`{text}` is not KEY=VALUE")),
    }
}

/// A command line split into words as a POSIX shell would, for quoting only: whitespace
/// separates, '…' and "…" group (a backslash escapes the next character outside single
/// quotes); nothing is expanded.
fn split_command(line: &str) -> anyhow::Result<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => anyhow::bail!("--command: a ' is not closed in `{line}`"),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => w.extend(chars.next()),
                        Some(c) => w.push(c),
                        None => anyhow::bail!("--command: a \" is not closed in `{line}`"),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    if words.is_empty() {
        anyhow::bail!("--command is empty: give the command line to run, e.g. \"mix phx.server\"");
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_splits_like_a_shells() {
        assert_eq!(
            split_command("mix phx.server").unwrap(),
            ["mix", "phx.server"]
        );
        assert_eq!(
            split_command(r#"mix run -e 'IO.puts("a b")' "x y"  z\ w"#).unwrap(),
            ["mix", "run", "-e", r#"IO.puts("a b")"#, "x y", "z w"]
        );
        assert!(split_command("  ").is_err());
        assert!(split_command("mix 'open").is_err());
    }

    #[test]
    fn a_next_call_prints_as_the_command_that_makes_it() {
        let answer =
            "1. process memory: …\n   next: source {\"name\":\"p\",\"target\":\"A.b/2\"}\n\
                      2. it's fine\n   next: logs {\"name\":\"it's\"}";
        let data = json!({"findings": [
            {"next": {"tool": "source", "arguments": {"target": "A.b/2", "name": "p"}}},
            {"next": {"tool": "logs", "arguments": {"name": "it's"}}},
        ]});
        let printed = runnable_next(answer, &data);
        assert_eq!(
            printed,
            format!(
                "{answer}\n\nnext, from a shell:\n  \
                 os_sup_mcp call source '{{\"name\":\"p\",\"target\":\"A.b/2\"}}'\n  \
                 os_sup_mcp call logs '{{\"name\":\"it'\\''s\"}}'"
            )
        );
        // Split as a shell would, a printed line is the call.
        let line = printed.lines().nth_back(1).unwrap();
        let words = split_command(line).unwrap();
        assert_eq!(
            words,
            [
                "os_sup_mcp",
                "call",
                "source",
                r#"{"name":"p","target":"A.b/2"}"#
            ]
        );
        let last = split_command(printed.lines().last().unwrap()).unwrap();
        assert_eq!(last, ["os_sup_mcp", "call", "logs", r#"{"name":"it's"}"#]);
        // The text is not read: an answer without next calls in its data prints as it is.
        assert_eq!(runnable_next(answer, &Value::Null), answer);
        // A cluster's calls, each once.
        let cluster = json!({"cluster_findings": [
            {"next": {"tool": "callers", "arguments": {"name": "c-2"}}},
            {"next": {"tool": "callers", "arguments": {"name": "c-2"}}},
        ]});
        assert_eq!(
            runnable_next("x", &cluster),
            "x\n\nnext, from a shell:\n  os_sup_mcp call callers '{\"name\":\"c-2\"}'"
        );
    }

    #[test]
    fn verbs_are_found_by_their_tools_name() {
        assert_eq!(verb_of("trace_results").as_deref(), Some("trace-results"));
        assert_eq!(verb_of("waits").as_deref(), Some("waits"));
        assert_eq!(verb_of("get_state"), None);
        assert_eq!(verb_of("call"), None);
    }
}
