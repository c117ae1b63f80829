//! Watching a Mix project's applications beside its node: `mix run --no-halt` keeps the VM up
//! after they exit, which is a crash all the same. An exit is marked (what `status` shows of
//! each application, with the reason the node logged) and, when the restart settings say so,
//! the node is killed so that its exit watcher restarts it.

use super::{Inner, Supervised};
use crate::node::logs::{LogBuffer, Query, Since};
use crate::node::node_status::{AppHealth, NodeState};
use crate::node::spawn::ChildProcess;
use std::sync::Arc;

/// After an application exit, the node's crash reports are waited for until none came for
/// this long (the helper names what died first 150 ms after a cascade's last report)...
const REPORTS_QUIET: std::time::Duration = std::time::Duration::from_millis(400);
/// ... and at most this long.
const REPORTS_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// An application exit seen on the current incarnation.
#[derive(Debug, Clone)]
pub(super) struct AppExit {
    apps: Vec<String>,
    at: std::time::SystemTime,
    reason: Option<String>,
}

impl Supervised {
    /// Watches a Mix project's applications on one incarnation: `mix run --no-halt` keeps the
    /// VM up after they exit, which is a crash all the same. With `on_app_exit` and a policy
    /// that restarts after a crash, the node is killed so that `watch_exit` restarts it;
    /// otherwise it is only marked.
    pub(super) fn watch_apps(self: &Arc<Self>, generation: u64) {
        let Some(exited) = self.inner().process.as_ref().map(|p| p.apps_exited()) else {
            return;
        };
        let this = self.clone();
        tokio::spawn(async move {
            let (apps, seen) = exited.await;
            // The crash reports of the exit are on their way: the node is not killed before
            // they have arrived (no new error line for a moment), so that its log keeps them.
            let mut errors = this.logs.errors();
            let settle = async {
                while tokio::time::timeout(REPORTS_QUIET, errors.changed())
                    .await
                    .is_ok_and(|changed| changed.is_ok())
                {}
            };
            let _ = tokio::time::timeout(REPORTS_WAIT, settle).await;
            // The helper saw the application master end; the node's own report of it may
            // come later (or not at all, when its logger is busy or off).
            let reason = seen.or_else(|| this.logged_app_exit(&apps));
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
        app_exit_logged(&self.logs, apps, run_from)
    }

    pub(super) fn app_health(&self, inner: &Inner) -> Vec<AppHealth> {
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
                        app_exit_logged(&self.logs, std::slice::from_ref(name), inner.run_from)
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
}

/// [`Supervised::logged_app_exit`] of the run whose lines start at `run_from`.
fn app_exit_logged(logs: &LogBuffer, apps: &[String], run_from: u64) -> Option<String> {
    let names = apps
        .iter()
        .map(|a| regex::escape(a))
        .collect::<Vec<_>>()
        .join("|");
    let grep = regex::Regex::new(&format!(r"Application ({names}) exited: (.*)")).ok()?;
    let page = logs.query(&Query {
        tail: 1,
        grep: Some(grep.clone()),
        since: Some(Since::Seq(run_from)),
        ..Query::default()
    });
    let line = page.lines.last()?;
    let reason = grep.captures(&line.text)?.get(2)?.as_str().trim();
    Some(reason.chars().take(200).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::logs::{Level, Source};

    #[test]
    fn the_reason_is_the_newest_report_of_this_run_for_one_of_the_apps() {
        let logs = LogBuffer::default();
        logs.push(
            Source::Logger,
            Some(Level::Notice),
            "Application kv exited: shutdown",
            false,
        );
        let run_from = logs.next_seq();
        let kv = ["kv".to_string()];
        assert_eq!(app_exit_logged(&logs, &kv, run_from), None, "another run's");
        logs.push(
            Source::Logger,
            Some(Level::Notice),
            "Application kv_web exited: killed",
            false,
        );
        assert_eq!(app_exit_logged(&logs, &kv, run_from), None, "another app's");
        logs.push(
            Source::Stdout,
            None,
            "12:00:00.000 [notice] Application kv exited: {bad, reason}  ",
            false,
        );
        assert_eq!(
            app_exit_logged(&logs, &kv, run_from).as_deref(),
            Some("{bad, reason}")
        );
        let both = ["kv".to_string(), "kv_web".to_string()];
        logs.push(
            Source::Logger,
            Some(Level::Notice),
            &format!("Application kv_web exited: {}", "x".repeat(300)),
            false,
        );
        let long = app_exit_logged(&logs, &both, run_from).unwrap();
        assert_eq!(long.chars().count(), 200, "cut to 200 characters");
    }

    #[test]
    fn application_names_are_matched_literally() {
        let logs = LogBuffer::default();
        logs.push(
            Source::Logger,
            Some(Level::Notice),
            "Application kvXweb exited: killed",
            false,
        );
        assert_eq!(app_exit_logged(&logs, &["kv.web".to_string()], 0), None);
    }
}
