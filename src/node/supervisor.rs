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

use super::config::NodeConfig;
use super::logs::{Level, LogBuffer, LogLimits, Source};
use super::readiness::Readiness;
use super::restart::{Decision, Intensity};
use super::spawn::{ChildProcess, ExitInfo, Launch};
use super::state_file::StateFile;
use super::status::{AppHealth, NodeState, NodeStatus};
use super::vitals::{self, Vitals};
use super::{NodeError, FAILURE_TAIL_LINES};
use crate::helper::{self, HelperCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How long a start waits on output that ends in a question before it fails: a program that
/// asks has stopped until it is answered, and nothing will answer.
const PROMPT_IDLE: Duration = Duration::from_secs(2);
const PROMPT_POLL: Duration = Duration::from_millis(250);
/// Log lines quoted under a `wait_ready` that was not met.
const READY_TAIL_LINES: usize = 8;

/// How often `start` asks the helper whether the node is ready when nothing says so sooner
/// (the helper announces `ready` itself for the default readiness).
const READY_POLL: Duration = Duration::from_millis(50);
/// The longest pause between two readiness checks (a few checks a second at most once the
/// condition has been missed a few times).
const READY_POLL_MAX: Duration = Duration::from_millis(800);
const ANNOUNCED_READY_POLL: Duration = Duration::from_millis(500);
/// Time a spawned command gets to boot a BEAM whose helper announces itself: the helper
/// loads before Mix compiles or starts anything, so only a command that is not a BEAM (or
/// drops our ERL_AFLAGS) takes this long.
const HELPER_UP_LIMIT: Duration = Duration::from_secs(10);
/// Bound on waiting for a process to go after SIGKILL (a zombie never does).
const KILL_WAIT: Duration = Duration::from_secs(5);
/// Time the helper gets for a graceful `init:stop` before it halts the node itself.
const GRACEFUL_STOP: Duration = Duration::from_secs(5);
/// Time we wait for the process to exit after each step of a stop.
const STOP_STEP: Duration = Duration::from_secs(6);
const TERM_STEP: Duration = Duration::from_secs(3);

/// An application exit seen on the current incarnation.
#[derive(Debug, Clone)]
struct AppExit {
    apps: Vec<String>,
    at: std::time::SystemTime,
    reason: Option<String>,
}

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
    exit_error: Option<String>,
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
        log_limits: LogLimits,
        call_limits: helper::Limits,
    ) -> Self {
        let node_name = node_name(&config.name, node_suffix);
        let cookie = config.cookie.clone().unwrap_or_else(random_cookie);
        Self {
            name: config.name.clone(),
            client: Arc::new(helper::Client::with_limits(
                node_name.clone(),
                cookie.clone(),
                call_limits,
            )),
            node_name,
            cookie,
            logs: Arc::new(LogBuffer::new(log_limits)),
            vitals: Arc::default(),
            helper_code,
            state_file,
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
        }
    }

    pub fn state(&self) -> NodeState {
        self.inner().state
    }

    pub fn status(&self) -> NodeStatus {
        let inner = self.inner();
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
            // While it starts or runs, the newest error of this run; the one of the run that
            // ended with `last_exit` only until this run logs one, and said to be that run's.
            last_error: match inner.state {
                NodeState::Running | NodeState::Starting => {
                    self.logs.newest_error(inner.run_from).or_else(|| {
                        inner
                            .exit_error
                            .as_ref()
                            .map(|e| format!("{e} (logged by the run before this one)"))
                    })
                }
                _ => inner.exit_error.clone(),
            },
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
        }
    }

    fn app_health(&self, inner: &Inner) -> Vec<AppHealth> {
        let announced = inner.process.as_ref().map(ChildProcess::announced);
        let mut apps: Vec<AppHealth> = announced
            .map(|a| a.apps)
            .unwrap_or_default()
            .into_iter()
            .map(|name| AppHealth {
                name,
                state: "running",
                exited_at: None,
                reason: None,
            })
            .collect();
        if let Some(exit) = &inner.app_exit {
            for name in &exit.apps {
                let exited = AppHealth {
                    name: name.clone(),
                    state: "exited",
                    exited_at: Some(humantime::format_rfc3339_millis(exit.at).to_string()),
                    // Its report may have come after the exit was seen.
                    reason: exit.reason.clone().or_else(|| {
                        self.app_exit_logged_since(std::slice::from_ref(name), inner.run_from)
                    }),
                };
                match apps.iter_mut().find(|a| &a.name == name) {
                    Some(app) => *app = exited,
                    None => apps.push(exited),
                }
            }
        }
        apps
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

    /// Waits while the child is starting or restarting (at most `limit`), so a call made
    /// while it boots runs once it is up; fails at once with the reason when it is not
    /// running and not coming up, or when it failed meanwhile.
    pub async fn wait_running(&self, limit: Duration) -> Result<(), NodeError> {
        let coming_up =
            |state: &NodeState| matches!(state, NodeState::Starting | NodeState::Restarting);
        let mut states = self.state_changes.subscribe();
        let state = *states.borrow_and_update();
        if !coming_up(&state) {
            return self.ensure_running();
        }
        let next_restart = self.inner().next_restart;
        if next_restart.is_some_and(|at| at > Instant::now() + limit) {
            // A long backoff: nothing will happen within the wait.
            return self.ensure_running();
        }
        let began = Instant::now();
        // `is_ok` drops the borrow `wait_for` returns: holding it while the state lock is
        // taken would deadlock with the publishing in `InnerGuard::drop`.
        let settled = tokio::time::timeout(limit, states.wait_for(|s| !coming_up(s)))
            .await
            .is_ok_and(|changed| changed.is_ok());
        match self.state() {
            NodeState::Running => Ok(()),
            NodeState::Failed if settled => Err(NodeError::StartFailed {
                name: self.name.clone(),
                reason: self.inner().failure.clone().unwrap_or_default(),
                output: self.logs.tail_text(FAILURE_TAIL_LINES),
            }),
            state if coming_up(&state) => Err(NodeError::StillStarting {
                name: self.name.clone(),
                state,
                waited_s: began.elapsed().as_secs(),
            }),
            _ => self.ensure_running(),
        }
    }

    /// Fails unless the child is running, so callers get a clear error instead of a timeout.
    pub fn ensure_running(&self) -> Result<(), NodeError> {
        match self.state() {
            NodeState::Running => Ok(()),
            state => Err(NodeError::NotRunning {
                name: self.name.clone(),
                state,
                hint: state.hint(),
            }),
        }
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
            ready = self.wait_ready(&config.readiness, config.start_timeout, config.start_timeout) => ready.err(),
            exit = self.exit_of_current() => Some(format!("the process exited during boot ({})", exit.description)),
            question = self.unanswered_prompt() => Some(format!(
                "the command waits for an answer on its standard input: `{question}`; nodes \
                 started by os_sup_mcp have no terminal. Answer it once in a shell in the \
                 project (Mix's `Shall I install Hex?`: `mix local.hex --force`; rebar: `mix \
                 local.rebar --force`), or change the command so that it does not ask"
            )),
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
            Some(reason) => {
                let exit = self.kill_process().await;
                let reason = match exit {
                    Some(exit) if !reason.contains("exited") => {
                        format!("{reason}; then {}", exit.description)
                    }
                    _ => reason,
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

    /// Waits for the helper to announce itself under the expected node name, then polls it
    /// until `readiness` holds, for `limit` (what is left of the `given` timeout, which is the
    /// one an error names).
    async fn wait_ready(
        &self,
        readiness: &Readiness,
        limit: Duration,
        given: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        let up_limit = limit.min(HELPER_UP_LIMIT);
        let mut announced = self.helper_announced(up_limit).await;
        if matches!(announced, Err(None)) && up_limit < limit && self.runs_a_beam() {
            // A loaded machine can take this long to boot a VM: one that exists is given the
            // whole start timeout.
            announced = self.helper_announced(limit - up_limit).await;
        }
        match announced {
            Ok(()) => {}
            Err(None) if up_limit == limit || self.runs_a_beam() => {
                return Err(format!(
                    "not ready within {} ms (the helper had not come up yet); raise the timeout",
                    given.as_millis()
                ))
            }
            Err(None) => {
                return Err(format!(
                    "no BEAM with the os_sup_mcp helper came up within {} s: is the command an \
                     erl, elixir, mix or release command, and does it keep the ERL_AFLAGS it \
                     is given?",
                    up_limit.as_secs()
                ))
            }
            Err(Some(why)) => return Err(why),
        }
        let mut last_problem = String::from("the helper never answered");
        let mut booting = true;
        let mut announced_ready = false;
        // Checks back off (a probe may cost the app a request and a log line each).
        let mut pause = READY_POLL;
        while Instant::now() < deadline {
            match self.client.status(Duration::from_secs(2)).await {
                Ok(info) => {
                    let probe = readiness.probe(&self.logs, info.ready).await;
                    if probe.met {
                        return Ok(());
                    }
                    booting = !info.ready;
                    last_problem = match (&info.app, readiness, info.ready) {
                        (Some(app), Readiness::App, _) => {
                            format!("application `{app}` not started yet")
                        }
                        (None, Readiness::App, _) => "still booting".into(),
                        (_, _, false) => format!("still booting; last check: {}", probe.saw),
                        (_, _, true) => probe.saw,
                    }
                }
                Err(e) => last_problem = e.to_string(),
            }
            let announced = self.inner().process.as_ref().map(|p| p.ready_announced());
            match (readiness, announced) {
                // Wake as soon as the helper says ready; once it has, poll as usual.
                (Readiness::App, Some(announced)) if !announced_ready => {
                    announced_ready = tokio::time::timeout(ANNOUNCED_READY_POLL, announced)
                        .await
                        .is_ok();
                }
                _ => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    tokio::time::sleep(pause.min(left)).await;
                    pause = (pause * 2).min(READY_POLL_MAX);
                }
            }
        }
        let hint = if booting {
            "; raise the timeout if the first compile is slow"
        } else {
            "; the node is up: check the readiness condition"
        };
        Err(format!(
            "not ready within {} ms: {last_problem}{hint}",
            given.as_millis()
        ))
    }

    /// Waits until the helper of the incarnation being started has announced itself (so
    /// its cookie is set; a start spawns the process first); `false` if not within `limit`.
    pub async fn helper_up(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let up = self.inner().process.as_ref().map(ChildProcess::helper_up);
            if let Some(up) = up {
                let node = tokio::time::timeout_at(deadline.into(), up).await;
                return node.ok().flatten().as_deref() == Some(self.node_name.as_str());
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Whether a BEAM runs in the current process's group (the command got as far as starting
    /// the VM).
    fn runs_a_beam(&self) -> bool {
        let handle = self.inner().process.as_ref().map(ChildProcess::exit_handle);
        handle.is_some_and(|h| h.group_runs_beam())
    }

    /// Waits until the helper of the current process says it is up, and checks it runs under
    /// the node name we will connect to. `Err(None)`: it did not say so within `limit`.
    async fn helper_announced(&self, limit: Duration) -> Result<(), Option<String>> {
        let up = self.inner().process.as_ref().map(|p| p.helper_up());
        let Some(up) = up else {
            return Err(Some("the process is gone".into()));
        };
        match tokio::time::timeout(limit, up).await {
            Ok(Some(node)) if node == self.node_name => Ok(()),
            Ok(Some(node)) if node == "nonode@nohost" => Err(Some(format!(
                "the command started a BEAM without distribution (node name `nonode@nohost`): \
                 it turns distribution off (e.g. RELEASE_DISTRIBUTION=none or -sname undefined); \
                 os_sup_mcp needs the node to run as `{}`",
                self.node_name
            ))),
            Ok(Some(node)) => Err(Some(format!(
                "the command started a node named `{node}`, not `{}`: it sets its own node name \
                 (-name/-sname in its arguments, vm.args, or RELEASE_NODE). Remove that so \
                 os_sup_mcp can name it, or run it yourself and use `attach`",
                self.node_name
            ))),
            Ok(None) => Err(Some(
                "the control socket closed before the helper came up".into(),
            )),
            Err(_) => Err(None),
        }
    }

    /// Waits until a running node meets `readiness`, failing fast if it exits meanwhile; `limit`
    /// covers both waits (for the node to run, then for it to be ready) together.
    pub async fn wait_until(
        &self,
        readiness: &Readiness,
        limit: Duration,
    ) -> Result<(), NodeError> {
        let deadline = Instant::now() + limit;
        // What the node prints from now on is this wait's; older lines (an earlier probe's
        // requests) are not quoted under its failure.
        let from = self.logs.next_seq();
        self.wait_running(limit).await?;
        let left = deadline.saturating_duration_since(Instant::now());
        let failure = tokio::select! {
            ready = self.wait_ready(readiness, left, limit) => ready.err(),
            exit = self.exit_of_current() => Some(format!("the node exited while waiting ({})", exit.description)),
        };
        match failure {
            None => Ok(()),
            Some(reason) => Err(NodeError::NotReady {
                name: self.name.clone(),
                reason,
                // The reason says what was seen last; a few lines of context are enough (the
                // newest are often the probe's own requests) and `logs` has the rest.
                output: self.logs.tail_text_since(from, READY_TAIL_LINES),
            }),
        }
    }

    /// Resolves with the program's question once its output has ended in one, unanswered, for
    /// [`PROMPT_IDLE`]: it waits on a standard input that never answers.
    async fn unanswered_prompt(&self) -> String {
        loop {
            if let Some(question) = self.logs.unanswered_prompt(PROMPT_IDLE) {
                return question;
            }
            tokio::time::sleep(PROMPT_POLL).await;
        }
    }

    /// Resolves when the current process exits; never if there is none.
    async fn exit_of_current(&self) -> ExitInfo {
        let process = self.inner().process.as_ref().map(|p| p.exit_handle());
        match process {
            Some(handle) => handle.exited().await,
            None => std::future::pending().await,
        }
    }

    /// Copies the node's OTP logger events into its log for as long as this incarnation lives,
    /// subscribing again after a lost connection.
    fn forward_logger_events(self: &Arc<Self>, generation: u64) {
        let this = self.clone();
        let up = self.inner().process.as_ref().map(|p| p.helper_up());
        tokio::spawn(async move {
            // Not before the helper says it answers: a request to a name not registered yet
            // is dropped, and a handshake before the cookie is set is refused (and logged by
            // the node). The helper keeps the events logged meanwhile.
            if let Some(up) = up {
                if up.await.is_none() {
                    return;
                }
            }
            loop {
                let alive = {
                    let inner = this.inner();
                    inner.generation == generation
                        && matches!(inner.state, NodeState::Starting | NodeState::Running)
                };
                if !alive {
                    return;
                }
                match this.client.subscribe_logs().await {
                    Ok(mut events) => {
                        while let Some(event) = events.next().await {
                            let level = Level::parse(&event.level);
                            this.logs
                                .push(Source::Logger, level, &event.text, event.eval);
                        }
                    }
                    Err(e) => tracing::trace!(name = %this.name, "log subscription: {e}"),
                }
                tokio::time::sleep(READY_POLL * 4).await;
            }
        });
    }

    /// Watches a Mix project's applications on one incarnation: `mix run --no-halt` keeps the
    /// VM up after they exit, which is a crash all the same. With `on_app_exit` and a policy
    /// that restarts after a crash, the node is killed so that `watch_exit` restarts it;
    /// otherwise it is only marked.
    fn watch_apps(self: &Arc<Self>, generation: u64) {
        let Some(exited) = self.inner().process.as_ref().map(|p| p.apps_exited()) else {
            return;
        };
        let this = self.clone();
        tokio::spawn(async move {
            let apps = exited.await;
            let reason = this.logged_app_exit(&apps);
            let mut inner = this.inner();
            if inner.generation != generation || inner.state != NodeState::Running {
                return; // stopping, or another incarnation: nothing to decide
            }
            let what = format!(
                "application `{}` exited{}",
                apps.join("`, `"),
                reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            );
            inner.app_exit = Some(AppExit {
                apps,
                at: std::time::SystemTime::now(),
                reason,
            });
            let limits = inner.config.restart;
            if limits.on_app_exit && limits.policy.restarts_after(false) {
                tracing::warn!(name = %this.name, "{what}; the node counts as crashed");
                inner.exit_override = Some(format!("{what}; os_sup_mcp ended the node"));
                if let Some(process) = &inner.process {
                    process.exit_handle().signal_group(libc::SIGKILL);
                }
            } else {
                tracing::warn!(name = %this.name, "{what}; the VM keeps running (restart_on_app_exit is off or the policy is temporary)");
            }
        });
    }

    /// The reason in the node's own `Application X exited: REASON` report of this run, if it
    /// logged one.
    pub(crate) fn logged_app_exit(&self, apps: &[String]) -> Option<String> {
        let run_from = self.inner().run_from;
        self.app_exit_logged_since(apps, run_from)
    }

    /// [`Self::logged_app_exit`] of the run whose lines start at `run_from`.
    fn app_exit_logged_since(&self, apps: &[String], run_from: u64) -> Option<String> {
        let names = apps
            .iter()
            .map(|a| regex::escape(a))
            .collect::<Vec<_>>()
            .join("|");
        let grep = regex::Regex::new(&format!(r"Application ({names}) exited: (.*)")).ok()?;
        let page = self.logs.query(&super::Query {
            tail: 1,
            grep: Some(grep.clone()),
            since: Some(super::Since::Seq(run_from)),
            ..super::Query::default()
        });
        let line = page.lines.last()?;
        let reason = grep.captures(&line.text)?.get(2)?.as_str().trim();
        Some(reason.chars().take(200).collect())
    }

    /// Samples one incarnation's vital signs every [`vitals::SAMPLE_EVERY`] until it is gone
    /// (the node is not asked before it runs; `/proc` is read from its spawn on).
    fn sample_vitals(self: &Arc<Self>, generation: u64, os_pid: u32) {
        let this = Arc::downgrade(self);
        tokio::spawn(async move {
            // The BEAM's own pid, once the node reports it (a command may start it under a
            // shell); this server spawned it, so the pid it reports is trusted.
            let mut beam_pid = Some(os_pid);
            loop {
                tokio::time::sleep(vitals::SAMPLE_EVERY).await;
                let Some(this) = this.upgrade() else { return };
                let running = {
                    let inner = this.inner();
                    if inner.generation != generation || inner.process.is_none() {
                        return;
                    }
                    inner.state == NodeState::Running
                };
                let sample = vitals::take(&this.client, running, &mut beam_pid, |_| true).await;
                this.vitals.record(sample);
            }
        });
    }

    /// Watches one incarnation; if it dies on its own, restarts it per the restart limits.
    fn watch_exit(self: &Arc<Self>, generation: u64) {
        let this = self.clone();
        let handle = self.inner().process.as_ref().map(|p| p.exit_handle());
        let Some(handle) = handle else { return };
        tokio::spawn(async move {
            let mut exit = handle.exited().await;
            let _guard = this.lifecycle.lock().await;
            {
                let mut inner = this.inner();
                if let Some(description) = inner.exit_override.take() {
                    exit = ExitInfo {
                        description,
                        clean: false,
                    };
                }
                // Stops, restarts and failed starts handle their own exits.
                if inner.generation != generation || inner.state != NodeState::Running {
                    return;
                }
                this.process_gone(&mut inner);
                inner.last_exit = Some(exit.description.clone());
                inner.exit_error = this
                    .logs
                    .error_of_exit(inner.run_from, std::time::SystemTime::now());
                let policy = inner.config.restart.policy;
                if !policy.restarts_after(exit.clean) {
                    tracing::info!(name = %this.name, exit = %exit.description, ?policy, "node exited; not restarting");
                    if exit.clean {
                        inner.state = NodeState::Stopped;
                    } else {
                        inner.state = NodeState::Failed;
                        inner.failure = Some(format!(
                            "exited ({}); restart policy `temporary` does not restart it",
                            exit.description
                        ));
                    }
                    return;
                }
                // Restarting from this moment: a status read before the restart loop runs
                // must not say `running` with no OS process.
                inner.state = NodeState::Restarting;
            }
            tracing::warn!(name = %this.name, exit = %exit.description, "node crashed");
            this.client.disconnect().await;
            this.restart_after_crash(exit.description).await;
        });
    }

    /// The OTP part: restart with backoff until it sticks or the intensity is exceeded.
    async fn restart_after_crash(self: &Arc<Self>, mut last_exit: String) {
        loop {
            let (backoff, stop_requested) = {
                let mut inner = self.inner();
                let limits = inner.config.restart;
                let now = Instant::now();
                let backoff = match inner.intensity.on_crash(now, &limits) {
                    Decision::Restart { backoff } => backoff,
                    Decision::GiveUp { recent } => {
                        inner.state = NodeState::Failed;
                        inner.failure = Some(format!(
                            "restart limit reached: {recent} restarts within {} s; last exit: {last_exit}",
                            limits.period.as_secs()
                        ));
                        tracing::error!(name = %self.name, "restart limit reached; node failed");
                        return;
                    }
                };
                inner.restarts += 1;
                inner.state = NodeState::Restarting;
                inner.next_restart = Some(now + backoff);
                (backoff, inner.stop_requested.clone())
            };
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = stop_requested.cancelled() => {
                    let mut inner = self.inner();
                    inner.state = NodeState::Stopped;
                    inner.next_restart = None;
                    return;
                }
            }
            self.inner().next_restart = None;
            match self.start_process(Some(&last_exit)).await {
                Ok(()) => return,
                Err(NodeError::StartCancelled { .. }) => return,
                Err(e) => last_exit = e.to_string().lines().next().unwrap_or_default().to_string(),
            }
        }
    }

    /// Graceful stop through the helper, then SIGTERM, then SIGKILL of the process group.
    /// Caller holds `lifecycle`.
    async fn stop_process(&self) {
        let Some(handle) = self.inner().process.as_ref().map(|p| p.exit_handle()) else {
            let mut inner = self.inner();
            if inner.state != NodeState::Failed {
                inner.state = NodeState::Stopped;
            }
            return;
        };
        self.inner().state = NodeState::Stopping;
        let asked = self
            .client
            .stop(GRACEFUL_STOP, Duration::from_secs(2))
            .await;
        if asked.is_err() {
            // No helper to ask: closing the control pipe tells it just the same, if it lives.
            if let Some(process) = self.inner().process.as_mut() {
                process.close_control_pipe();
            }
        }
        let exit = match handle.exited_within(STOP_STEP).await {
            Some(exit) => exit,
            None => {
                tracing::warn!(name = %self.name, "graceful stop timed out; sending SIGTERM");
                handle.signal_group(libc::SIGTERM);
                match handle.exited_within(TERM_STEP).await {
                    Some(exit) => exit,
                    None => {
                        tracing::warn!(name = %self.name, "SIGTERM ignored; sending SIGKILL");
                        handle.signal_group(libc::SIGKILL);
                        handle
                            .exited_within(KILL_WAIT)
                            .await
                            .unwrap_or_else(|| ExitInfo {
                                description: "did not exit after SIGKILL (unkillable or a zombie)"
                                    .into(),
                                clean: false,
                            })
                    }
                }
            }
        };
        // Anything the node left behind in its group goes with it.
        handle.signal_group(libc::SIGKILL);
        self.client.disconnect().await;
        let mut inner = self.inner();
        self.process_gone(&mut inner);
        inner.state = NodeState::Stopped;
        inner.started_at = None;
        inner.last_exit = Some(exit.description);
        // A stop asked for is no error's doing.
        inner.exit_error = None;
    }

    /// SIGKILLs the current process group and waits (bounded) for the exit.
    async fn kill_process(&self) -> Option<ExitInfo> {
        let handle = self.inner().process.as_ref().map(|p| p.exit_handle())?;
        handle.signal_group(libc::SIGKILL);
        let exit = handle.exited_within(KILL_WAIT).await;
        let mut inner = self.inner();
        self.process_gone(&mut inner);
        if let Some(exit) = &exit {
            inner.last_exit = Some(exit.description.clone());
            inner.exit_error = self
                .logs
                .error_of_exit(inner.run_from, std::time::SystemTime::now());
        }
        exit
    }
}

/// The node's state under its lock; publishes a changed `state` when released, so every
/// transition reaches [`Supervised::wait_running`] without each site having to say so.
struct InnerGuard<'a> {
    inner: std::sync::MutexGuard<'a, Inner>,
    state_changes: &'a tokio::sync::watch::Sender<NodeState>,
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
