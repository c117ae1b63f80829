//! Starting one child OS process with the helper injected.
//!
//! The child runs in its own process group (a Ctrl-C to the server must not reach it), with
//! stdin/stdout/stderr piped and one end of a "control socket" (a Unix socketpair) on fd 3.
//! The helper announces itself on it (`up NODE`) once it answers, and stops the node when it
//! reaches EOF, which is how children die with the server even on SIGKILL. The cookie travels
//! in the environment, never on a command line.

use super::child_config::NodeConfig;
use super::logs::{LogBuffer, Source};
use super::NodeError;
use crate::helper::HelperCode;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;
use tokio::process::{ChildStdin, Command};
use tokio::sync::watch;

/// The file descriptor the helper watches in the child.
const CONTROL_FD: i32 = 3;
/// Longest line the helper writes on the control socket.
const MAX_CONTROL_LINE: u64 = 1024;

/// How a child process ended.
#[derive(Debug, Clone)]
pub struct ExitInfo {
    /// `exit status 0`, `exit status 1`, `killed by signal 9 (SIGKILL)`.
    pub description: String,
    /// Exit status 0: the node stopped on purpose, so a `transient` child is not restarted.
    pub clean: bool,
}

impl From<ExitStatus> for ExitInfo {
    fn from(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        let description = match (status.code(), status.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(signal)) => format!("killed by signal {signal} ({})", signal_name(signal)),
            _ => "unknown exit".to_string(),
        };
        Self {
            description,
            clean: status.success(),
        }
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

/// A running child OS process. Dropping it closes the control socket, which makes the helper
/// stop the node; the process itself is reaped by its waiter task.
pub struct ChildProcess {
    pub pid: u32,
    exit: ExitHandle,
    control: Option<UnixStream>,
    /// What the helper said on the control socket.
    announced: watch::Receiver<Announced>,
    _stdin: Option<ChildStdin>,
}

impl ChildProcess {
    pub fn exit_handle(&self) -> ExitHandle {
        self.exit.clone()
    }

    /// Resolves once the helper has announced itself with its node name (`Ok`), or said the
    /// node refused it (`Err(Some(why))`); `Err(None)`: the socket closed first.
    pub fn helper_up(
        &self,
    ) -> impl std::future::Future<Output = Result<String, Option<String>>> + 'static {
        let mut announced = self.announced.clone();
        async move {
            let seen = announced
                .wait_for(|a| a.node.is_some() || a.refused.is_some())
                .await
                .map_err(|_| None)?;
            match (&seen.node, &seen.refused) {
                (_, Some(why)) => Err(Some(why.clone())),
                (Some(node), None) => Ok(node.clone()),
                (None, None) => Err(None),
            }
        }
    }

    /// What the helper has said so far.
    pub fn announced(&self) -> Announced {
        self.announced.borrow().clone()
    }

    /// Resolves with the applications that stopped while the VM lives on, and the reason the
    /// helper saw; never if none do.
    pub fn apps_exited(
        &self,
    ) -> impl std::future::Future<Output = (Vec<String>, Option<String>)> + 'static {
        let mut announced = self.announced.clone();
        async move {
            let exited = announced
                .wait_for(|a| !a.apps_exited.is_empty())
                .await
                .map(|seen| (seen.apps_exited.clone(), seen.app_exit_reason.clone()));
            match exited {
                Ok(apps) => apps,
                Err(_) => std::future::pending().await,
            }
        }
    }

    /// Resolves once the helper has said the node is ready (booted, or the Mix project's
    /// applications started); never if it does not.
    pub fn ready_announced(&self) -> impl std::future::Future<Output = ()> + 'static {
        let mut announced = self.announced.clone();
        async move {
            if announced.wait_for(|a| a.ready).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Closes our side of the control socket: the helper then stops the node (init:stop,
    /// then halt). The reader task's copy does not keep it open: this shuts writing down.
    pub fn close_control_pipe(&mut self) {
        if let Some(control) = self.control.take() {
            let _ = control.shutdown(std::net::Shutdown::Write);
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.close_control_pipe();
    }
}

/// Waits for, and signals, one child process without owning it.
#[derive(Clone)]
pub struct ExitHandle {
    pid: u32,
    exit: watch::Receiver<Option<ExitInfo>>,
}

impl ExitHandle {
    /// Waits until the process has exited.
    pub async fn exited(&self) -> ExitInfo {
        let mut exit = self.exit.clone();
        let result = match exit.wait_for(Option::is_some).await {
            Ok(info) => info.clone().expect("waited for Some"),
            Err(_) => ExitInfo {
                description: "unknown exit (waiter gone)".into(),
                clean: false,
            },
        };
        result
    }

    /// Like [`exited`](Self::exited) with a limit.
    pub async fn exited_within(&self, limit: Duration) -> Option<ExitInfo> {
        tokio::time::timeout(limit, self.exited()).await.ok()
    }

    /// Whether a process of the child's group is a BEAM (`beam.smp` or `beam`).
    pub fn group_runs_beam(&self) -> bool {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return false;
        };
        entries.flatten().any(|entry| {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                return false;
            };
            let command = &stat[open + 1..close];
            // After the command: state, ppid, pgrp.
            let pgrp = stat[close + 1..].split_whitespace().nth(2);
            command.starts_with("beam") && pgrp == Some(self.pid.to_string().as_str())
        })
    }

    /// Every process the child started, and theirs (read from `/proc`, before it is ended):
    /// a port's program runs in a session of its own, out of reach of the group's signal.
    pub fn descendants(&self) -> Vec<(u32, u64)> {
        crate::node::proc_fs::descendants(self.pid)
    }

    /// Sends `signal` to the child's whole process group, unless it is known to be gone.
    pub fn signal_group(&self, signal: i32) {
        let Ok(pgid) = libc::pid_t::try_from(self.pid) else {
            return;
        };
        if pgid <= 1 {
            return;
        }
        // SAFETY: plain syscall; ESRCH (group already gone) is fine.
        unsafe {
            libc::killpg(pgid, signal);
        }
    }
}

/// Everything needed to launch one incarnation of a child.
pub struct Launch<'a> {
    pub config: &'a NodeConfig,
    pub node_name: &'a str,
    pub cookie: &'a str,
    pub helper: &'a HelperCode,
    pub logs: Arc<LogBuffer>,
    /// A cluster member the server introduces to its peers: its helper does not connect.
    pub introduced: bool,
}

impl Launch<'_> {
    /// The program and its arguments.
    pub fn argv(&self) -> Result<Vec<String>, NodeError> {
        if let Some(command) = &self.config.command {
            return Ok(command.clone());
        }
        let elixir = which::which("elixir").map_err(|_| NodeError::Spawn {
            program: "elixir".into(),
            reason: "not found on PATH; install Elixir (e.g. `apt-get install elixir`)".into(),
        })?;
        let mut argv = vec![elixir.display().to_string()];
        argv.extend(["-S", "mix", "run", "--no-halt"].map(String::from));
        argv.extend(self.config.args.iter().cloned());
        Ok(argv)
    }

    /// Spawns `argv` (from [`argv`](Self::argv)).
    pub fn spawn(&self, argv: Vec<String>) -> Result<ChildProcess, NodeError> {
        let program = argv[0].clone();
        let spawn_error = |e: std::io::Error| NodeError::Spawn {
            program: program.clone(),
            reason: e.to_string(),
        };
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(if needs_open_stdin(&argv) {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(path) = &self.config.path {
            cmd.current_dir(path);
        }
        self.set_env(
            &mut cmd,
            release_root(&program, self.config.path.as_deref()).is_some(),
        );

        let (ours, theirs) = UnixStream::pair().map_err(spawn_error)?;
        let theirs = OwnedFd::from(theirs);
        let child_fd = theirs.as_raw_fd();
        // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if child_fd == CONTROL_FD {
                    // dup2 onto itself keeps close-on-exec: clear it instead.
                    if libc::fcntl(child_fd, libc::F_SETFD, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                } else if libc::dup2(child_fd, CONTROL_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(spawn_error)?;
        drop(theirs);
        let pid = child.id().unwrap_or(0);
        let announced = read_announcements(ours.try_clone().map_err(spawn_error)?);

        if let Some(stdout) = child.stdout.take() {
            let logs = self.logs.clone();
            tokio::spawn(async move { logs.collect(Source::Stdout, stdout).await });
        }
        if let Some(stderr) = child.stderr.take() {
            let logs = self.logs.clone();
            tokio::spawn(async move { logs.collect(Source::Stderr, stderr).await });
        }
        let stdin = child.stdin.take();
        let (exit_tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            let info = match child.wait().await {
                Ok(status) => ExitInfo::from(status),
                Err(e) => ExitInfo {
                    description: format!("cannot wait for the process: {e}"),
                    clean: false,
                },
            };
            let _ = exit_tx.send(Some(info));
        });
        Ok(ChildProcess {
            pid,
            exit: ExitHandle { pid, exit },
            control: Some(ours),
            announced,
            _stdin: stdin,
        })
    }

    /// The child's environment: the helper injection, its cookie and control socket. A
    /// release names its node from `RELEASE_*` (an injected `-name` would fight its own), so
    /// it is told the name through those instead.
    fn set_env(&self, cmd: &mut Command, release: bool) {
        let config = self.config;
        cmd.envs(&config.env);
        let user_aflags = config
            .env
            .get("ERL_AFLAGS")
            .cloned()
            .or_else(|| std::env::var("ERL_AFLAGS").ok());
        match &user_aflags {
            Some(flags) => cmd.env("OS_SUP_USER_ERL_AFLAGS", flags),
            None => cmd.env_remove("OS_SUP_USER_ERL_AFLAGS"),
        };
        // Distribution on loopback only, long names on 127.0.0.1 so an unresolvable hostname
        // does not matter. `-nocookie` keeps the node away from ~/.erlang.cookie (never read,
        // never created); the helper sets the child's own cookie at boot.
        let naming = if release {
            // The release script passes `--name $RELEASE_NODE --cookie <releases/COOKIE>`;
            // the helper replaces that cookie with ours at boot, before it announces itself.
            cmd.env("RELEASE_DISTRIBUTION", "name")
                .env("RELEASE_NODE", self.node_name);
            String::new()
        } else {
            format!("-name {} -nocookie ", self.node_name)
        };
        let injected = format!(
            "{naming}-kernel inet_dist_use_interface {{127,0,0,1}} {}",
            self.helper.boot_flags()
        );
        let aflags = match user_aflags {
            Some(user) if !user.trim().is_empty() => format!("{user} {injected}"),
            _ => injected,
        };
        cmd.env("ERL_AFLAGS", aflags)
            .env("OS_SUP_COOKIE", self.cookie)
            .env(
                "OS_SUP_CLUSTER_INTRODUCED",
                if self.introduced { "1" } else { "0" },
            )
            .env("OS_SUP_CONTROL_FD", CONTROL_FD.to_string())
            // `auto`: the helper sees whether the command runs Mix (then it waits for and
            // watches the project's applications, as for a `path` start) or not (a release, an
            // `erl`: booted, and the user's applications watched).
            .env(
                "OS_SUP_READY",
                if config.is_mix() { "mix_app" } else { "auto" },
            );
        if let Some(mix_env) = &config.mix_env {
            cmd.env("MIX_ENV", mix_env);
        }
        if std::env::var_os("ERL_EPMD_ADDRESS").is_none()
            && !config.env.contains_key("ERL_EPMD_ADDRESS")
        {
            // An epmd started by this child listens on loopback only.
            cmd.env("ERL_EPMD_ADDRESS", "127.0.0.1");
        }
    }
}

/// The root of the release `program` starts (`ROOT/bin/NAME` with `ROOT/releases/start_erl.data`
/// beside it, as Mix and relx build them), if it is one. A relative program is resolved from
/// `cwd` as the spawn will.
fn release_root(program: &str, cwd: Option<&std::path::Path>) -> Option<std::path::PathBuf> {
    let program = std::path::Path::new(program);
    if program.components().count() < 2 {
        return None; // a bare name found on PATH: `elixir`, `erl`, `iex`…
    }
    let program = match cwd {
        Some(cwd) if program.is_relative() => cwd.join(program),
        _ => program.to_path_buf(),
    };
    let bin = program.parent()?;
    let root = bin.parent()?;
    (bin.file_name()? == "bin" && root.join("releases/start_erl.data").is_file())
        .then(|| root.to_path_buf())
}

/// Whether the command must get a standard input that stays open (nothing is ever written to
/// it). Mix without IEx gets none at all, so a question it asks (`Shall I install Hex?`)
/// fails at once with its own error, as in a shell without a terminal. A shell (`iex`, `erl`,
/// a release's `start_iex`) ends its node at the end of its input, so those, and commands
/// whose nature cannot be seen, get an open, empty pipe; a question they ask is caught by
/// the start's prompt check instead.
fn needs_open_stdin(argv: &[String]) -> bool {
    let base = |a: &String| {
        std::path::Path::new(a)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let runs_mix = argv.iter().any(|a| base(a) == "mix");
    let shell = argv.iter().any(|a| base(a) == "iex" || a == "+iex");
    !runs_mix || shell
}

/// What the helper has said on the control socket.
#[derive(Debug, Default, Clone)]
pub struct Announced {
    /// `up NODE`: the helper answers, on this node.
    pub node: Option<String>,
    /// `refused TEXT`: the node could not load the helper, and why.
    pub refused: Option<String>,
    /// `ready`: the node meets the readiness the helper was started with.
    pub ready: bool,
    /// `ready APPS` (and `apps APPS` later): the applications the helper watches: the Mix
    /// project's, or on a node without Mix the user's (not OTP's or Elixir's).
    pub apps: Vec<String>,
    /// `app_exited APPS [REASON]`: those of them that stopped while the VM lives on.
    pub apps_exited: Vec<String>,
    /// The reason their application master ended with, when the helper saw it end.
    pub app_exit_reason: Option<String>,
    /// `note TEXT`: what the helper saw wrong at `ready` while the node is up (a Phoenix
    /// endpoint that does not serve HTTP), at most [`MAX_NOTES`].
    pub notes: Vec<String>,
}

/// Notes kept from one run's helper (each is one control line, at most `MAX_CONTROL_LINE`).
const MAX_NOTES: usize = 8;

fn app_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(String::from)
        .collect()
}

/// Reads the helper's lines on the control socket until it closes.
fn read_announcements(control: UnixStream) -> watch::Receiver<Announced> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let (tx, rx) = watch::channel(Announced::default());
    let reader = control
        .set_nonblocking(true)
        .and_then(|()| tokio::net::UnixStream::from_std(control));
    let Ok(reader) = reader else {
        return rx;
    };
    tokio::spawn(async move {
        let mut reader = tokio::io::BufReader::new(reader);
        loop {
            let mut line = String::new();
            match (&mut reader)
                .take(MAX_CONTROL_LINE)
                .read_line(&mut line)
                .await
            {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let line = line.trim();
            if let Some(why) = line.strip_prefix("refused ") {
                // The node could not load the helper (`os_sup_boot`): nothing will answer.
                tx.send_modify(|a| a.refused = Some(why.to_string()));
            } else if let Some(node) = line.strip_prefix("up ") {
                // A helper started again (after it was killed) says `up` anew.
                tx.send_modify(|a| a.node = Some(node.to_string()));
            } else if line == "ready" {
                tx.send_modify(|a| a.ready = true);
            } else if let Some(apps) = line.strip_prefix("ready ") {
                tx.send_modify(|a| {
                    a.ready = true;
                    a.apps = app_list(apps);
                });
            } else if let Some(apps) = line.strip_prefix("apps ") {
                // Applications started after `ready` on a node without Mix, now watched too.
                tx.send_modify(|a| a.apps = app_list(apps));
            } else if let Some(note) = line.strip_prefix("note ") {
                tx.send_modify(|a| {
                    if a.notes.len() < MAX_NOTES {
                        a.notes.push(note.to_string());
                    }
                });
            } else if let Some(exited) = line.strip_prefix("app_exited ") {
                let (apps, reason) = exited.split_once(' ').unwrap_or((exited, ""));
                tx.send_modify(|a| {
                    a.apps_exited = app_list(apps);
                    a.app_exit_reason = Some(reason.trim().to_string()).filter(|r| !r.is_empty());
                });
            }
        }
    });
    rx
}
