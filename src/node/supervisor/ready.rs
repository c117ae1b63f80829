//! Waiting for an incarnation to be ready.
//!
//! Ready means its helper announcing itself under the expected node
//! name, then the node's [`Readiness`] condition polled (backing off) until it holds or the
//! timeout passes; and the two things that end a boot early, an exit and a question the
//! program asks on a standard input nobody answers.

use super::Supervised;
use crate::helper::ToolCall;
use crate::node::logs::{Query, Since};
use crate::node::readiness::Readiness;
use crate::node::spawn::{ChildProcess, ExitInfo};
use crate::node::NodeError;
use regex::Regex;
use std::time::{Duration, Instant};

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
/// How long a start whose `status` already says ready waits for the helper's own `ready`
/// line: it names the applications to watch and comes after the notes of the boot (modules
/// the node refused), which the start reply must carry. It follows within moments (the
/// helper loads the rest of its modules first); a helper that never says it (reloaded, its
/// watcher gone) costs the start this much once.
const ANNOUNCED_READY_GRACE: Duration = Duration::from_secs(5);
/// Time a spawned command gets to boot a BEAM whose helper announces itself: the helper
/// loads before Mix compiles or starts anything, so only a command that is not a BEAM (or
/// drops our ERL_AFLAGS) takes this long.
const HELPER_UP_LIMIT: Duration = Duration::from_secs(10);
/// How long a start that timed out asks the node where its boot waits before it is killed.
const BOOT_WAITS_LIMIT: Duration = Duration::from_secs(4);

/// Where a boot that is not ready waits, as the node's helper says.
struct BootWaits {
    /// One line per application whose start has not returned.
    lines: Vec<String>,
    /// Elixir's or Mix's compilers run in the node.
    compiling: bool,
}

impl Supervised {
    /// Waits for the helper to announce itself under the expected node name, then polls it
    /// until `readiness` holds, for `limit` (what is left of the `given` timeout, which is the
    /// one an error names).
    pub(super) async fn wait_ready(
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
            let announced = self.inner().process.as_ref().map(|p| p.ready_announced());
            match self.client.status(Duration::from_secs(2)).await {
                Ok(info) => {
                    let probe = readiness.probe(&self.logs, info.ready).await;
                    if probe.met {
                        if let (Readiness::App, Some(announced)) = (readiness, announced) {
                            let left = deadline.saturating_duration_since(Instant::now());
                            let grace = ANNOUNCED_READY_GRACE.min(left);
                            let _ = tokio::time::timeout(grace, announced).await;
                        }
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
        // Where the boot waits, read now: the caller kills the node next. Each stuck start
        // says which application is not started, which is then all the problem says.
        let waits = self.boot_waits().await;
        let compiling = waits
            .as_ref()
            .map_or_else(|| self.compiled_in_this_run(), |w| w.compiling);
        let slow_compile = "raise the timeout if the first compile is slow";
        let reason = match waits.map(|w| w.lines).unwrap_or_default() {
            lines if !lines.is_empty() => {
                let stuck = lines.join("; and ");
                let stuck = if compiling {
                    format!("{stuck}; {slow_compile}")
                } else {
                    stuck
                };
                match readiness {
                    Readiness::App => stuck,
                    _ => format!("{last_problem}; {stuck}"),
                }
            }
            _ if booting && compiling => format!("{last_problem}; {slow_compile}"),
            _ if booting => format!("{last_problem}; nothing was being compiled: see `logs`"),
            _ => format!("{last_problem}; the node is up: check the readiness condition"),
        };
        Err(format!(
            "not ready within {} ms: {reason}",
            given.as_millis()
        ))
    }

    /// Where the node's boot waits (the helper's `boot_waits`: each application whose start
    /// has not returned, from its master down to the function its `init` waits in), and
    /// whether it compiles; `None` when the helper does not answer in time.
    async fn boot_waits(&self) -> Option<BootWaits> {
        let call = ToolCall::new("boot_waits").with_timeout(BOOT_WAITS_LIMIT);
        let reply = tokio::time::timeout(
            BOOT_WAITS_LIMIT + Duration::from_secs(1),
            self.client.run_tool(&call),
        )
        .await
        .ok()?
        .ok()?;
        let lines = reply.data["stuck"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["line"].as_str())
            .map(|l| l.trim_start_matches("not_started: ").to_string())
            .collect();
        Some(BootWaits {
            lines,
            compiling: reply.data["compiling"].as_bool().unwrap_or(false),
        })
    }

    /// Whether Mix said it compiled in this run (`Compiling 3 files (.ex)`), for a node whose
    /// helper could not say.
    fn compiled_in_this_run(&self) -> bool {
        let from = self.inner().run_from;
        let query = Query {
            tail: 1,
            since: Some(Since::Seq(from)),
            grep: Regex::new(r"^\s*Compiling \d+ files?\b").ok(),
            ..Query::default()
        };
        self.logs.query(&query).matched > 0
    }

    /// Waits until the helper of the incarnation being started has announced itself (so
    /// its cookie is set; a start spawns the process first); `false` if not within `limit`.
    pub async fn helper_up(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let up = self.inner().process.as_ref().map(ChildProcess::helper_up);
            if let Some(up) = up {
                let node = tokio::time::timeout_at(deadline.into(), up).await;
                return node.ok().and_then(Result::ok).as_deref() == Some(self.node_name.as_str());
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
            Ok(Ok(node)) if node == self.node_name => Ok(()),
            Ok(Err(Some(refused))) => Err(Some(format!(
                "the node could not load the os_sup_mcp helper, so no tool can reach it: \
                 {refused}"
            ))),
            Ok(Ok(node)) if node == "nonode@nohost" => Err(Some(format!(
                "the command started a BEAM without distribution (node name `nonode@nohost`): \
                 it turns distribution off (e.g. RELEASE_DISTRIBUTION=none or -sname undefined); \
                 os_sup_mcp needs the node to run as `{}`",
                self.node_name
            ))),
            Ok(Ok(node)) => Err(Some(format!(
                "the command started a node named `{node}`, not `{}`: it sets its own node name \
                 (-name/-sname in its arguments, vm.args, or RELEASE_NODE). Remove that so \
                 os_sup_mcp can name it, or run it yourself and use `attach`",
                self.node_name
            ))),
            Ok(Err(None)) => Err(Some(
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
    pub(super) async fn unanswered_prompt(&self) -> String {
        loop {
            if let Some(question) = self.logs.unanswered_prompt(PROMPT_IDLE) {
                return question;
            }
            tokio::time::sleep(PROMPT_POLL).await;
        }
    }

    /// Resolves when the current process exits; never if there is none.
    pub(super) async fn exit_of_current(&self) -> ExitInfo {
        let process = self.inner().process.as_ref().map(|p| p.exit_handle());
        match process {
            Some(handle) => handle.exited().await,
            None => std::future::pending().await,
        }
    }
}
