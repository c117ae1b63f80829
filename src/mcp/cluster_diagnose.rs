//! `diagnose` given a cluster's name: every member's typed [`Diagnosis`] at once, under one
//! deadline, and what is wrong with the cluster as a whole (`cluster_compare`: who does not
//! see whom, what a member lacks or holds differently; `cluster_load`: the same process's work
//! side by side), merged into one report. The members' findings are ranked by the node layer
//! and written here from their types; the cluster is healthy only when every member is,
//! nothing differs between them and no member bears the load that made another's finding.

use super::cluster_compare;
use super::cluster_finding::ClusterFinding;
use super::fanout::Status;
use super::tools::diagnose::{finding_data, text as member_text};
use super::McpServer;
use crate::node::diagnose::{Diagnosis, Focus, Verdict};
use crate::node::Lang;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{json, Value};
use std::time::Duration;

/// How long the members have, beyond the window they sample over.
const DEADLINE: Duration = Duration::from_secs(15);
/// How long a member of an attached cluster may take to be attached.
const ATTACH_LIMIT: Duration = Duration::from_secs(5);
/// The merged text, at most.
const TEXT_BYTES: usize = 4000;

/// What became of one member's diagnosis.
enum Outcome {
    Done(Box<Diagnosis>),
    /// Why not: an error, the member not running, not connected, no answer in time.
    Failed(Status),
}

impl McpServer {
    /// Diagnoses every member of `cluster` and the cluster as a whole, explaining `focus` on
    /// the members where it names something.
    pub(super) async fn diagnose_cluster(
        &self,
        cluster: &str,
        window: Duration,
        format: Lang,
        focus: Option<&str>,
    ) -> CallToolResult {
        let focus = focus.map(|text| Focus {
            text,
            anywhere: true,
        });
        let unattached = self.registry.attach_pending(cluster, ATTACH_LIMIT).await;
        let members: Vec<String> = self
            .registry
            .members(cluster)
            .unwrap_or_default()
            .into_iter()
            .filter(|m| !unattached.iter().any(|(u, _)| u == m))
            .collect();
        let deadline = DEADLINE + window;
        let diagnoses = members.iter().map(|member| async move {
            let outcome = match tokio::time::timeout(
                deadline,
                self.registry.diagnose(member, window, format, focus),
            )
            .await
            {
                Err(_) => Outcome::Failed(Status::Timeout(deadline.as_secs())),
                Ok(Err(e)) => Outcome::Failed(self.failed_status(member, e.to_string())),
                Ok(Ok(d)) => Outcome::Done(Box::new(d)),
            };
            (member.clone(), outcome)
        });
        // A cluster's health is also who sees whom: read while the members answer.
        let view = self
            .registry
            .cluster_view(cluster, crate::node::cluster::VIEW_LIMIT);
        let (mut outcomes, view) = tokio::join!(futures::future::join_all(diagnoses), view);
        outcomes.extend(
            unattached
                .into_iter()
                .map(|(member, why)| (member, Outcome::Failed(Status::NotConnected(why)))),
        );
        let facts: Vec<(String, Value)> = outcomes
            .iter()
            .filter_map(|(m, o)| match o {
                Outcome::Done(d) if d.cluster_facts.is_object() => {
                    Some((m.clone(), d.cluster_facts.clone()))
                }
                _ => None,
            })
            .collect();
        let whole = cluster_compare::findings(cluster, view.ok().as_ref(), &facts);
        report(cluster, &outcomes, &whole)
    }
}

/// Healthy: every member answered and is healthy, and nothing differs between them.
fn healthy(outcomes: &[(String, Outcome)], whole: &[&ClusterFinding]) -> bool {
    whole.is_empty()
        && outcomes
            .iter()
            .all(|(_, o)| matches!(o, Outcome::Done(d) if d.healthy()))
}

fn report(
    cluster: &str,
    outcomes: &[(String, Outcome)],
    whole: &[ClusterFinding],
) -> CallToolResult {
    let answered: Vec<(&str, &Diagnosis)> = outcomes
        .iter()
        .filter_map(|(m, o)| match o {
            Outcome::Done(d) => Some((m.as_str(), d.as_ref())),
            Outcome::Failed(_) => None,
        })
        .collect();
    let (load, held) = super::cluster_load::compare(&answered);
    let whole: Vec<&ClusterFinding> = whole.iter().chain(&load).collect();
    let failed: Vec<String> = outcomes
        .iter()
        .filter_map(|(m, o)| match o {
            Outcome::Failed(why) => Some(format!("{m} {why}")),
            Outcome::Done(_) => None,
        })
        .collect();
    // How many answered, apart from any verdict (below).
    let mut text = format!(
        "diagnose on cluster {cluster}: {} members, {} answered{}\n",
        outcomes.len(),
        answered.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(" ({})", failed.join("; "))
        }
    );
    // The cluster as a whole first: a split or a member that lacks what its peers hold; then
    // every member's findings, the first of each member first.
    let mut n = 0;
    for f in &whole {
        n += 1;
        text += &format!("{n}. {}\n   next: {}\n", f.line(), f.next_text());
    }
    let depth = answered
        .iter()
        .map(|(_, d)| d.findings.len())
        .max()
        .unwrap_or(0);
    for rank in 0..depth {
        for (member, d) in &answered {
            if let Some(f) = d.findings.get(rank) {
                n += 1;
                text += &format!(
                    "{n}. {member}: {}\n   next: {}\n",
                    super::finding_text::line(f),
                    f.next.call_text(member, d.elixir)
                );
            }
        }
    }
    // Members with no finding that could not be checked say why.
    for (member, d) in &answered {
        if let Verdict::Unchecked(_) = d.verdict {
            text += &format!("{member}: {}\n", member_text(member, d));
        }
    }
    let fine: Vec<&str> = answered
        .iter()
        .filter(|(m, d)| d.healthy() && !held.iter().any(|h| h == m))
        .map(|(m, _)| *m)
        .collect();
    let is_healthy = healthy(outcomes, &whole);
    if is_healthy {
        text += &format!("healthy: all {} members\n", fine.len());
    } else if fine.len() == outcomes.len() {
        text += &format!(
            "each of the {} members is healthy on its own; the cluster is not (above)\n",
            fine.len()
        );
    } else if !fine.is_empty() {
        text += &format!("healthy: {}\n", fine.join(", "));
    }
    super::fanout::cut_merged(
        &mut text,
        TEXT_BYTES,
        "diagnose one member by its name for all of its answer",
    );
    let members: Vec<Value> = outcomes
        .iter()
        .map(|(member, o)| match o {
            Outcome::Done(d) => json!({"member": member, "status": "ok",
                "healthy": d.healthy(),
                "findings": d.findings.iter().map(|f| finding_data(member, f, d.elixir)).collect::<Vec<_>>()}),
            Outcome::Failed(why) => json!({"member": member, "status": why.to_string()}),
        })
        .collect();
    let data = json!({
        "cluster": cluster,
        "tool": "diagnose",
        "answered": answered.len(),
        "members": members,
        "cluster_findings": whole.iter().map(|f| finding_data(&f.name, &f.finding, false)).collect::<Vec<_>>(),
        "healthy": is_healthy,
    });
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(data);
    if answered.is_empty() {
        result.is_error = Some(true);
    }
    result
}
