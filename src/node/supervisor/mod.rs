//! One supervised child: its lifecycle (start, stop, restart) and what happens when it dies.
//!
//! Modelled on an OTP `transient` child: an abnormal exit (non-zero status, a signal) restarts
//! it with the same config, with backoff, at most `max_restarts` times in `period`, after which
//! it is `failed`; a clean exit (status 0) leaves it `stopped`. All lifecycle operations on one
//! child take its `lifecycle` lock, so they never interleave; a stop request first cancels a
//! start or a restart backoff in progress so that it never waits behind a long boot.
//!
//! Why locks and not one task owning the state (messages in, gen_statem style): the state
//! (`Inner`) sits behind a plain mutex held only for short synchronous sections, never across
//! an await, so a `status` read (the dashboard polls every node) costs a lock, not a round
//! trip to a task. The other pieces would stay in an actor too: the watcher tasks' events of
//! an older incarnation still arrive and must be told apart (the `generation` check), and a
//! stop must still interrupt a start or backoff that runs meanwhile (the `stop_requested`
//! token, which an actor would need for its start sub-task as well). The one ordering rule
//! that matters, that start, stop and restart never interleave, is the `lifecycle` lock.
//!
//! This file is the lifecycle and the state; what runs beside an incarnation, or waits on it,
//! lives in its own file: [`ready`] (waiting for the node to be ready), [`wait_running`] (a
//! call waiting for a node that boots), [`stop`] (ending the OS process by steps),
//! [`watch_exit`] (the crash-restart policy), [`watch_apps`] (application exits),
//! [`watch_logs`] (forwarding logger events) and [`watch_vitals`] (sampling vitals).

mod ready;
mod stop;
mod wait_running;
mod watch_apps;
mod watch_exit;
mod watch_logs;
mod watch_vitals;

use super::child_config::NodeConfig;
use super::logs::{DiskLog, ExitError, Level, LogBuffer, LogLimits, Source};
use super::node_status::{NodeState, NodeStatus};
use super::persist::NodeStore;
use super::restart_policy::Intensity;
use super::spawn::{ChildProcess, Launch};
use super::state_file::StateFile;
use super::vitals::{self, Vitals};
use super::{NodeError, FAILURE_TAIL_LINES};
use crate::helper::{self, HelperCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio_util::sync::CancellationToken;
use watch_apps::AppExit;

/// One named child and everything needed to (re)start it.
pub struct Supervised {
    pub name: String,
    pub node_name: String,
    cookie: String,
    pub client: Arc<helper::Client>,
    pub logs: Arc<LogBuffer>,
    /// Its vital signs, sampled while it runs (kept across restarts: a crash loop is history).
    pub vitals: Arc<Vitals>,
    helper_code: Arc<HelperCode>,
    /// Where running OS processes are recorded for crash recovery.
    state_file: Option<Arc<StateFile>>,
    /// Where its spec, state and log are kept for the next server (`--state-dir`).
    store: Option<Arc<NodeStore>>,
    lifecycle: tokio::sync::Mutex<()>,
    inner: Mutex<Inner>,
    /// `inner.state`, published whenever it changes (see [`InnerGuard`]), for callers that
    /// wait for a booting node.
    state_changes: tokio::sync::watch::Sender<NodeState>,
    /// Set while its whole cluster starts at once: its helper then leaves connecting to the
    /// server, which introduces the members once all have their cookies (a peer asked while
    /// still booting refuses, and logs the refused handshake).
    introduced: AtomicBool,
}

struct Inner {
    config: NodeConfig,
    /// The command line of the last spawn.
    command: Vec<String>,
    state: NodeState,
    process: Option<ChildProcess>,
    /// Incremented per OS process, so an exit is only acted on by its own incarnation.
    generation: u64,
    started_at: Option<Instant>,
    /// The sequence number of the current run's first log line.
    run_from: u64,
    /// The error logged by the run that ended with `last_exit` (`Logs::error_of_exit`).
    exit_error: Option<ExitError>,
    restarts: u32,
    intensity: Intensity,
    /// When the pending automatic restart is due.
    next_restart: Option<Instant>,
    last_exit: Option<String>,
    failure: Option<String>,
    app_exit: Option<AppExit>,
    /// Why the current process was ended by us on a crash (an application exit): what its
    /// exit is reported as.
    exit_override: Option<String>,
    /// Cancelled by `stop` to abort a start or restart in progress.
    stop_requested: CancellationToken,
}

impl Supervised {
    pub fn new(
        config: NodeConfig,
        helper_code: Arc<HelperCode>,
        node_suffix: &str,
        state_file: Option<Arc<StateFile>>,
        store: Option<Arc<NodeStore>>,
        log_limits: LogLimits,
        call_limits: helper::Limits,
    ) -> Self {
        let node_name = node_name(&config.name, node_suffix);
        let cookie = config.cookie.clone().unwrap_or_else(random_cookie);
        let logs = Arc::new(LogBuffer::new(log_limits));
        if let Some(store) = &store {
            // What a server before kept of this node's log comes back first.
            match DiskLog::open(&store.log_dir(), &config.name, log_limits) {
                Ok((disk, kept)) => {
                    logs.restore(kept);
                    logs.keep_on_disk(disk);
                }
                Err(e) => {
                    tracing::warn!(name = %config.name, "cannot keep the log on disk: {e}")
                }
            }
        }
        Self {
            name: config.name.clone(),
            client: Arc::new(helper::Client::with_limits(
                node_name.clone(),
                cookie.clone(),
                call_limits,
            )),
            node_name,
            cookie,
            logs,
            vitals: Arc::default(),
            helper_code,
            state_file,
            store,
            lifecycle: tokio::sync::Mutex::new(()),
            state_changes: tokio::sync::watch::Sender::new(NodeState::Starting),
            introduced: AtomicBool::new(false),
            inner: Mutex::new(Inner {
                config,
                command: Vec::new(),
                // Made by a start that is about to run (see `Registry::start_node`): calls
                // that come meanwhile wait for it rather than find a stopped node.
                state: NodeState::Starting,
                process: None,
                generation: 0,
                started_at: None,
                run_from: 0,
                exit_error: None,
                restarts: 0,
                intensity: Intensity::default(),
                next_restart: None,
                last_exit: None,
                failure: None,
                app_exit: None,
                exit_override: None,
                stop_requested: CancellationToken::new(),
            }),
        }
    }

    /// Whether the next incarnations wait to be introduced to their cluster's peers
    /// ([`Registry`](super::Registry) sets it around a start of the whole cluster).
    pub fn set_introduced(&self, introduced: bool) {
        self.introduced.store(introduced, Ordering::Relaxed);
    }

    fn inner(&self) -> InnerGuard<'_> {
        InnerGuard {
            inner: self.inner.lock().expect("node state lock"),
            state_changes: &self.state_changes,
            store: self.store.as_deref(),
        }
    }

    /// A node a server before ran, known again as stopped: `why` says how that server ended.
    pub fn restored(&self, why: String) {
        if self.logs.next_seq() > 0 {
            let marker = format!("--- os_sup_mcp: {why}; the lines above were kept on disk ---");
            self.logs
                .push(Source::Stderr, Some(Level::Notice), &marker, false);
        }
        let mut inner = self.inner();
        inner.state = NodeState::Stopped;
        inner.last_exit = Some(why);
    }

    pub fn state(&self) -> NodeState {
        self.inner().state
    }

    pub fn status(&self) -> NodeStatus {
        let inner = self.inner();
        let running = matches!(inner.state, NodeState::Running | NodeState::Starting);
        let this_run_error = running
            .then(|| self.logs.newest_error(inner.run_from))
            .flatten();
        NodeStatus {
            name: self.name.clone(),
            node: self.node_name.clone(),
            state: inner.state,
            os_pid: inner.process.as_ref().map(|p| p.pid),
            uptime_ms: inner
                .started_at
                .filter(|_| inner.state == NodeState::Running)
                .map(|t| t.elapsed().as_millis() as u64),
            restarts: inner.restarts,
            restart_policy: inner.config.restart.policy,
            next_restart_in_ms: inner
                .next_restart
                .map(|t| t.saturating_duration_since(Instant::now()).as_millis() as u64),
            last_exit: inner.last_exit.clone(),
            // While it starts or runs, the newest error of this run, with the one of the run
            // that ended with `last_exit` beside it; until this run logs one, that one, said
            // to be that run's while it runs.
            last_error: this_run_error.clone().or_else(|| {
                inner.exit_error.as_ref().map(|e| match running {
                    true => format!("{} (logged by the run before this one)", e.text),
                    false => e.text.clone(),
                })
            }),
            exit_error: this_run_error
                .and(inner.exit_error.as_ref())
                .map(|e| e.text.clone()),
            last_error_seq: inner.exit_error.as_ref().map(|e| e.seq),
            warnings: inner
                .process
                .as_ref()
                .filter(|_| inner.state == NodeState::Running)
                .map(|p| p.announced().notes)
                .unwrap_or_default()
                .into_iter()
                // Its application exited and the node is being ended to be started again:
                // still `running` for a moment, which alone would read as healthy.
                .chain(
                    inner
                        .exit_override
                        .as_ref()
                        .map(|why| format!("being restarted: {why}")),
                )
                .collect(),
            failure: inner.failure.clone(),
            apps: self.app_health(&inner),
            path: inner.config.path.as_ref().map(|p| p.display().to_string()),
            command: inner.command.clone(),
            app_restarts: None,
            not_answering: None,
        }
    }

    /// Starts the child, optionally with a new config; fails if it is already up.
    pub async fn start(
        self: &Arc<Self>,
        config: Option<NodeConfig>,
    ) -> Result<NodeStatus, NodeError> {
        let _guard = self.lifecycle.lock().await;
        {
            let mut inner = self.inner();
            if inner.process.is_some() {
                return Err(NodeError::AlreadyRunning {
                    name: self.name.clone(),
                    state: inner.state,
                });
            }
            if let Some(config) = config {
                inner.config = config;
            }
            inner.restarts = 0;
            inner.intensity.reset();
        }
        self.start_process(None).await?;
        Ok(self.status())
    }

    /// Stops the child (graceful, then SIGTERM, then SIGKILL); a stopped child stays stopped.
    pub async fn stop(self: &Arc<Self>) -> NodeStatus {
        let _guard = self.interrupt_and_lock().await;
        self.stop_process().await;
        self.status()
    }

    /// Stop, then start with the same config.
    pub async fn restart(self: &Arc<Self>) -> Result<NodeStatus, NodeError> {
        let _guard = self.interrupt_and_lock().await;
        self.stop_process().await;
        {
            let mut inner = self.inner();
            inner.restarts = 0;
            inner.intensity.reset();
        }
        self.start_process(None).await?;
        Ok(self.status())
    }

    /// Cancels a start or restart backoff in progress, then takes the lifecycle lock. The
    /// fresh token set under the lock is what later starts may be cancelled by.
    async fn interrupt_and_lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.inner().stop_requested.cancel();
        let guard = self.lifecycle.lock().await;
        self.inner().stop_requested = CancellationToken::new();
        guard
    }

    /// Spawns the process and waits until the node is ready. Caller holds `lifecycle`.
    /// `after_crash` (the last exit) marks an automatic restart, which keeps the log.
    async fn start_process(self: &Arc<Self>, after_crash: Option<&str>) -> Result<(), NodeError> {
        let config = self.inner().config.clone();
        // Before any change of state: a refused start leaves the node as it was.
        config.validate()?;
        let stop_requested = {
            let mut inner = self.inner();
            inner.state = NodeState::Starting;
            // This run's lines start here: the run before's errors are no longer its own.
            inner.run_from = self.logs.next_seq();
            inner.failure = None;
            inner.app_exit = None;
            inner.stop_requested.clone()
        };
        // A new run keeps the log of the one before (its crash, its last lines), marked.
        let marker = match &after_crash {
            Some(exit) => Some(format!(
                "--- os_sup_mcp: restarting after the node exited ({exit}) ---"
            )),
            None if self.logs.next_seq() > 0 => Some(
                "--- os_sup_mcp: a new run starts; the lines above are the run before ---".into(),
            ),
            None => None,
        };
        if let Some(marker) = marker {
            self.logs
                .push(Source::Stderr, Some(Level::Notice), &marker, false);
        }
        self.client.disconnect().await;
        let launch = Launch {
            config: &config,
            node_name: &self.node_name,
            cookie: &self.cookie,
            helper: &self.helper_code,
            logs: self.logs.clone(),
            introduced: self.introduced.load(Ordering::Relaxed),
        };
        let run_from = self.logs.next_seq();
        let process = match launch.argv().and_then(|argv| {
            self.inner().command = argv.clone();
            launch.spawn(argv)
        }) {
            Ok(process) => process,
            Err(e) => {
                self.set_failed(e.to_string());
                return Err(e);
            }
        };
        let pid = process.pid;
        let generation = {
            let mut inner = self.inner();
            inner.generation += 1;
            inner.process = Some(process);
            // Uptime counts from the OS process's start (a boot that compiles for a minute is
            // part of it), in the `start` answer too.
            inner.started_at = Some(Instant::now());
            // Again, after the old connection is gone: lines it still forwarded are the run
            // before's.
            inner.run_from = run_from;
            inner.generation
        };
        if let Some(state) = &self.state_file {
            state.record(&self.name, pid, &self.node_name);
        }
        tracing::info!(name = %self.name, pid, "spawned node");
        self.watch_exit(generation);
        self.watch_apps(generation);
        if vitals::sampling_on() {
            self.sample_vitals(generation, pid);
        }
        self.forward_logger_events(generation);
        // If this future is dropped before the node is up (a caller's timeout), the process
        // must not live on in `starting`.
        let abandoned = AbandonedStart {
            node: self,
            generation,
            armed: true,
        };

        let failure = tokio::select! {
            ready = self.wait_ready(&config.readiness, config.start_timeout, config.start_timeout) => ready.err().map(BootFailure::Stuck),
            exit = self.exit_of_current() => Some(BootFailure::Exited(format!("the process exited during boot ({})", exit.description))),
            question = self.unanswered_prompt() => Some(BootFailure::Stuck(format!(
                "the command waits for an answer on its standard input: `{question}`; nodes \
                 started by os_sup_mcp have no terminal. Answer it once in a shell in the \
                 project (Mix's `Shall I install Hex?`: `mix local.hex --force`; rebar: `mix \
                 local.rebar --force`), or change the command so that it does not ask"
            ))),
            _ = stop_requested.cancelled() => {
                abandoned.disarm();
                self.kill_process().await;
                self.inner().state = NodeState::Stopped;
                return Err(NodeError::StartCancelled { name: self.name.clone() });
            }
        };
        abandoned.disarm();
        match failure {
            None => {
                let mut inner = self.inner();
                inner.state = NodeState::Running;
                tracing::info!(name = %self.name, pid, "node ready");
                Ok(())
            }
            Some(failure) => {
                let exit = self.kill_process().await;
                let reason = match (failure, exit) {
                    // Still running when it failed: how the kill ended it is part of the story.
                    (BootFailure::Stuck(reason), Some(exit)) => {
                        format!("{reason}; then {}", exit.description)
                    }
                    (BootFailure::Stuck(reason) | BootFailure::Exited(reason), _) => reason,
                };
                self.set_failed(reason.clone());
                Err(NodeError::StartFailed {
                    name: self.name.clone(),
                    reason,
                    output: self.logs.tail_text(FAILURE_TAIL_LINES),
                })
            }
        }
    }

    /// The current OS process has exited (or was killed): forget it.
    fn process_gone(&self, inner: &mut Inner) {
        inner.process = None;
        if let Some(state) = &self.state_file {
            state.forget(&self.name);
        }
    }

    fn set_failed(&self, reason: String) {
        let mut inner = self.inner();
        inner.state = NodeState::Failed;
        inner.failure = Some(reason);
    }
}

/// Why a boot ended before the node was ready.
enum BootFailure {
    /// The process exited on its own; the reason says how.
    Exited(String),
    /// It was still running (not ready in time, a question nobody answers…): it is killed.
    Stuck(String),
}

/// The node's state under its lock; publishes a changed `state` when released, so every
/// transition reaches [`Supervised::wait_running`] and the node's record in the state dir
/// without each site having to say so.
struct InnerGuard<'a> {
    inner: std::sync::MutexGuard<'a, Inner>,
    state_changes: &'a tokio::sync::watch::Sender<NodeState>,
    store: Option<&'a NodeStore>,
}

impl std::ops::Deref for InnerGuard<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl std::ops::DerefMut for InnerGuard<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.inner
    }
}

impl Drop for InnerGuard<'_> {
    fn drop(&mut self) {
        let state = self.inner.state;
        if *self.state_changes.borrow() == state {
            return;
        }
        if let Some(store) = self.store {
            let up = matches!(
                state,
                NodeState::Running | NodeState::Starting | NodeState::Restarting
            );
            store.node_changed(&self.inner.config, up);
        }
        self.state_changes.send_if_modified(|published| {
            let changed = *published != state;
            *published = state;
            changed
        });
    }
}

/// Ends a start whose future was dropped before the node was up: kills what was spawned and
/// marks the node failed, so nothing lingers in `starting`.
struct AbandonedStart<'a> {
    node: &'a Supervised,
    generation: u64,
    armed: bool,
}

impl AbandonedStart<'_> {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for AbandonedStart<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut inner = self.node.inner();
        if inner.generation != self.generation {
            return;
        }
        if let Some(process) = &inner.process {
            process.exit_handle().signal_group(libc::SIGKILL);
        }
        // The waiter task reaps the process; the exit watcher ignores a non-running node.
        self.node.process_gone(&mut inner);
        inner.state = NodeState::Failed;
        inner.failure = Some(
            "the start was abandoned by its caller before the node was ready; it was killed".into(),
        );
        tracing::warn!(name = %self.node.name, "start abandoned; node killed");
    }
}

/// The Erlang node name of the child `name` (unique per server with `node_suffix`).
pub fn node_name(name: &str, node_suffix: &str) -> String {
    format!("{name}_{node_suffix}@127.0.0.1")
}

pub fn random_cookie() -> String {
    use rand::distributions::{Alphanumeric, DistString};
    Alphanumeric.sample_string(&mut rand::thread_rng(), 32)
}
