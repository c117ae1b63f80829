//! One-shot Mix tasks (`test`, `compile`, `format --check-formatted`, …) run as their own OS
//! process group in a project directory, with bounded output and a timeout that kills the whole
//! group. `mix test` output is parsed into a summary with each failure.

use super::logs::{LogBuffer, Query, Source};
use super::NodeError;
use regex::Regex;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::process::Command;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Output lines returned with the result (the newest).
const OUTPUT_LINES: usize = 200;

#[derive(Debug, Clone)]
pub struct MixTask {
    pub path: PathBuf,
    pub task: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub mix_env: Option<String>,
    /// Held to 1 ms ..= 30 min ([`crate::bounds::MIX_TIMEOUT_MS`]).
    pub timeout: Duration,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct MixOutcome {
    /// `mix <task> <args>` as run.
    pub command: String,
    /// The exit code; null when killed (timeout) or by a signal.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// The newest output lines (stdout and stderr interleaved as they came).
    pub output: Vec<String>,
    /// Output lines not shown (older than the newest 200, or dropped by the bounded buffer).
    pub omitted_lines: u64,
    /// For `mix test`: the parsed summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestSummary>,
}

#[derive(Debug, Default, Serialize, schemars::JsonSchema)]
pub struct TestSummary {
    pub tests: u64,
    pub failures: u64,
    pub excluded: u64,
    pub failed: Vec<TestFailure>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct TestFailure {
    /// `test adds numbers (MyAppTest)`
    pub name: String,
    /// `test/my_app_test.exs:12`
    pub location: String,
    /// The assertion message (code, left, right…), without the stacktrace.
    pub message: String,
}

/// Runs the task to completion or timeout.
pub async fn run(task: &MixTask) -> Result<MixOutcome, NodeError> {
    validate(task)?;
    let mix = which::which("mix").map_err(|_| NodeError::Spawn {
        program: "mix".into(),
        reason: "not found on PATH; install Elixir (e.g. `apt-get install elixir`)".into(),
    })?;
    let mut cmd = Command::new(mix);
    cmd.arg(&task.task)
        .args(&task.args)
        .current_dir(&task.path)
        .envs(&task.env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(mix_env) = &task.mix_env {
        cmd.env("MIX_ENV", mix_env);
    }
    let command = std::iter::once(format!("mix {}", task.task))
        .chain(task.args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| NodeError::Spawn {
        program: "mix".into(),
        reason: e.to_string(),
    })?;
    let pgid = child.id().unwrap_or(0) as libc::pid_t;
    let output = Arc::new(LogBuffer::default());
    let readers = [
        child.stdout.take().map(|s| {
            let output = output.clone();
            tokio::spawn(async move { output.collect(Source::Stdout, s).await })
        }),
        child.stderr.take().map(|s| {
            let output = output.clone();
            tokio::spawn(async move { output.collect(Source::Stderr, s).await })
        }),
    ];
    let limit = crate::bounds::MIX_TIMEOUT_MS.clamp_ms(task.timeout);
    let (status, timed_out) = match tokio::time::timeout(limit, child.wait()).await {
        Ok(status) => (status.ok(), false),
        Err(_) => {
            if pgid > 1 {
                // SAFETY: plain syscall on the task's own process group.
                unsafe { libc::killpg(pgid, libc::SIGKILL) };
            }
            (child.wait().await.ok(), true)
        }
    };
    if !timed_out && pgid > 1 {
        // Whatever the task left running in its group goes with it.
        // SAFETY: as above; ESRCH when the group is already gone.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
    for reader in readers.into_iter().flatten() {
        let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
    }
    let page = output.query(&Query {
        tail: usize::MAX,
        ..Query::default()
    });
    let all: Vec<String> = page.lines.into_iter().map(|e| e.line.text).collect();
    let tests = (task.task == "test").then(|| parse_test_output(&all));
    let shown = all.len().saturating_sub(OUTPUT_LINES);
    Ok(MixOutcome {
        command,
        exit_code: status.and_then(|s| s.code()),
        timed_out,
        duration_ms: started.elapsed().as_millis() as u64,
        omitted_lines: shown as u64 + page.dropped,
        output: all[shown..].to_vec(),
        tests,
    })
}

fn validate(task: &MixTask) -> Result<(), NodeError> {
    let valid_task = !task.task.is_empty()
        && task
            .task
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !valid_task {
        return Err(NodeError::BadConfig(format!(
            "invalid mix task `{}`: use a task name such as `test`, `compile` or `deps.tree`",
            task.task
        )));
    }
    if !task.path.join("mix.exs").is_file() {
        return Err(NodeError::BadConfig(format!(
            "no mix.exs in `{}`; give a Mix project's directory",
            task.path.display()
        )));
    }
    Ok(())
}

/// Reads ExUnit's report: numbered failure blocks and the totals line (`N tests, M failures`,
/// or since Elixir 1.20 `Result: P/N passed`).
pub fn parse_test_output(lines: &[String]) -> TestSummary {
    static HEADER: OnceLock<Regex> = OnceLock::new();
    static TOTALS: OnceLock<Regex> = OnceLock::new();
    let header = HEADER.get_or_init(|| Regex::new(r"^\s+\d+\) (test .+)$").expect("regex"));
    let totals = TOTALS.get_or_init(|| {
        Regex::new(r"(\d+) tests?, (\d+) failures?(?:.*?(\d+) excluded)?").expect("regex")
    });
    static RESULT: OnceLock<Regex> = OnceLock::new();
    let result =
        RESULT.get_or_init(|| Regex::new(r"^Result: (\d+)(?:/(\d+))? passed(.*)$").expect("regex"));
    let mut summary = TestSummary::default();
    let mut i = 0;
    while i < lines.len() {
        if let Some(name) = header.captures(&lines[i]).map(|c| c[1].to_string()) {
            let location = lines
                .get(i + 1)
                .map(|l| l.trim().to_string())
                .unwrap_or_default();
            let mut message = Vec::new();
            i += 2;
            while i < lines.len() {
                let line = &lines[i];
                if header.is_match(line) || line.trim() == "stacktrace:" {
                    break;
                }
                if !line.trim().is_empty() {
                    message.push(line.trim().to_string());
                }
                i += 1;
            }
            summary.failed.push(TestFailure {
                name,
                location,
                message: message.join("\n"),
            });
            continue;
        }
        if let Some(c) = totals.captures(&lines[i]) {
            summary.tests = c[1].parse().unwrap_or(0);
            summary.failures = c[2].parse().unwrap_or(0);
            summary.excluded = c.get(3).and_then(|m| m.as_str().parse().ok()).unwrap_or(0);
        } else if let Some(c) = result.captures(&lines[i]) {
            // Elixir 1.20: `Result: 1/2 passed, 1 skipped, 1 excluded` counts only the tests
            // that ran after the slash (`Result: 2 passed` when all did); `N tests` above
            // counted every test.
            let passed: u64 = c[1].parse().unwrap_or(0);
            let ran: u64 = c.get(2).map_or(passed, |m| m.as_str().parse().unwrap_or(0));
            // The rest: `, N skipped`, `, N excluded`, each when there are some.
            let count = |what: &str| -> u64 {
                c[3].split(',')
                    .filter_map(|part| part.trim().split_once(' '))
                    .find(|(_, name)| *name == what)
                    .and_then(|(n, _)| n.parse().ok())
                    .unwrap_or(0)
            };
            summary.excluded = count("excluded");
            summary.tests = ran + count("skipped") + summary.excluded;
            summary.failures = ran.saturating_sub(passed);
        }
        i += 1;
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_exunit_failures_and_totals() {
        let report = "\
Running ExUnit with seed: 1, max_cases: 4

  1) test a deliberate failure (DemoAppTest)
     test/demo_app_test.exs:15
     Assertion with == failed
     code:  assert 1 + 1 == 3
     left:  2
     right: 3
     stacktrace:
       test/demo_app_test.exs:16: (test)

.

Finished in 0.01 seconds (0.00s async, 0.01s sync)
3 tests, 1 failure, 1 excluded
";
        let lines: Vec<String> = report.lines().map(String::from).collect();
        let summary = parse_test_output(&lines);
        assert_eq!(
            (summary.tests, summary.failures, summary.excluded),
            (3, 1, 1)
        );
        assert_eq!(summary.failed.len(), 1);
        let failure = &summary.failed[0];
        assert_eq!(failure.name, "test a deliberate failure (DemoAppTest)");
        assert_eq!(failure.location, "test/demo_app_test.exs:15");
        assert!(failure.message.contains("left:  2"), "{}", failure.message);
        assert!(!failure.message.contains("stacktrace"));
    }

    /// Elixir 1.20's totals, as it printed them for 4 tests: one passed, one failed, one
    /// skipped (`@tag :skip`), one excluded.
    #[test]
    fn parses_the_totals_of_elixir_1_20() {
        let lines: Vec<String> = [
            "Result: 1/2 passed, 1 skipped, 1 excluded",
            "Failed: 1 test",
        ]
        .map(String::from)
        .to_vec();
        let summary = parse_test_output(&lines);
        assert_eq!(
            (summary.tests, summary.failures, summary.excluded),
            (4, 1, 1)
        );
        let all = parse_test_output(&["Result: 3/3 passed".to_string()]);
        assert_eq!((all.tests, all.failures, all.excluded), (3, 0, 0));
        // (as 1.20.4 prints it when none failed)
        let passed = parse_test_output(&["Result: 2 passed, 1 excluded".to_string()]);
        assert_eq!((passed.tests, passed.failures, passed.excluded), (3, 0, 1));
    }
}
