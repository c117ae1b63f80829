//! What the members of a cluster see of each other: every member's `nodes()` (and the
//! members it blocks while a partition lasts), asked of all at once, as a matrix with any
//! split named with its sides.

use crate::helper::ToolCall;
use crate::node::node_status::NodeState;
use crate::node::{NodeError, Registry};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// What one member answered about its connections.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MemberView {
    pub member: String,
    pub node: String,
    pub state: NodeState,
    /// `ok`, or why the member could not say (`timeout`, `not running`, the error).
    pub status: String,
    /// The other members it is connected to.
    pub sees: Vec<String>,
    /// The members it refuses while a partition lasts.
    pub blocks: Vec<String>,
    /// Connected nodes that are not members (another cluster, a remote shell).
    pub others: Vec<String>,
}

impl MemberView {
    /// Fills in a member's `cluster_view` answer: the nodes it is connected to (`nodes`), as
    /// members where `node_of` (Erlang node name → member) knows them, and the members it
    /// refuses (`blocked`).
    fn read_answer(&mut self, data: &serde_json::Value, node_of: &BTreeMap<String, String>) {
        for node in node_list(data, "nodes") {
            match node_of.get(&node) {
                Some(m) => self.sees.push(m.clone()),
                None => self.others.push(node),
            }
        }
        self.blocks = node_list(data, "blocked")
            .iter()
            .filter_map(|n| node_of.get(n).cloned())
            .collect();
        self.sees.sort();
        self.blocks.sort();
    }
}

/// The whole picture: each member's view and, when the members that answered fall into more
/// than one group connected both ways, the groups.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ClusterView {
    pub cluster: String,
    pub members: Vec<MemberView>,
    pub split: Option<Vec<Vec<String>>>,
    pub fully_connected: bool,
}

impl ClusterView {
    pub fn new(cluster: &str, members: Vec<MemberView>) -> Self {
        let answered: Vec<&MemberView> = members.iter().filter(|m| m.status == "ok").collect();
        let names: BTreeSet<&str> = answered.iter().map(|m| m.member.as_str()).collect();
        let sees: BTreeMap<&str, BTreeSet<&str>> = answered
            .iter()
            .map(|m| {
                let seen = m.sees.iter().map(String::as_str);
                (m.member.as_str(), seen.collect())
            })
            .collect();
        let linked = |a: &str, b: &str| sees[a].contains(b) && sees[b].contains(a);
        // Groups connected both ways (a split leaves each side connected within itself).
        let mut groups: Vec<Vec<String>> = Vec::new();
        let mut placed = BTreeSet::new();
        for &start in &names {
            if !placed.insert(start) {
                continue;
            }
            let mut group = vec![start];
            let mut i = 0;
            while i < group.len() {
                for &other in &names {
                    if !placed.contains(other) && linked(group[i], other) {
                        placed.insert(other);
                        group.push(other);
                    }
                }
                i += 1;
            }
            group.sort();
            groups.push(group.into_iter().map(String::from).collect());
        }
        let fully_connected = members.iter().all(|m| m.status == "ok")
            && answered
                .iter()
                .all(|m| m.sees.len() + 1 == members.len() && m.blocks.is_empty());
        Self {
            cluster: cluster.to_string(),
            split: (groups.len() > 1).then_some(groups),
            members,
            fully_connected,
        }
    }

    /// The matrix as text: a header line, then one row per member (`✓` connected, `·` not,
    /// `x` blocked by a partition, `?` no answer).
    pub fn text(&self) -> String {
        let n = self.members.len();
        let answered = self.members.iter().filter(|m| m.status == "ok").count();
        let mut out = format!("cluster {}: {n} members, {answered} answered", self.cluster);
        match &self.split {
            Some(groups) => {
                let sides: Vec<String> = groups.iter().map(|g| g.join(", ")).collect();
                out += &format!(
                    "; SPLIT into {} sides: [{}]",
                    groups.len(),
                    sides.join("] | [")
                );
            }
            None if self.fully_connected => out += "; fully connected",
            None => out += "; not fully connected",
        }
        let width = self
            .members
            .iter()
            .map(|m| m.member.len())
            .max()
            .unwrap_or(0);
        out += &format!("\n{:width$}  ", "");
        for (i, _) in self.members.iter().enumerate() {
            out += &format!("{:>3}", i + 1);
        }
        for (i, row) in self.members.iter().enumerate() {
            out += &format!("\n{:width$} {}", row.member, i + 1);
            for col in &self.members {
                let mark = if row.status != "ok" {
                    "?"
                } else if col.member == row.member {
                    "-"
                } else if row.blocks.contains(&col.member) {
                    "x"
                } else if row.sees.contains(&col.member) {
                    "✓"
                } else {
                    "·"
                };
                out += &format!("{mark:>3}");
            }
            if row.status != "ok" {
                out += &format!("  ({}, {})", row.state, row.status);
            } else if !row.others.is_empty() {
                out += &format!("  (also: {})", row.others.join(", "));
            }
        }
        out
    }
}

impl Registry {
    /// What each member of cluster `name` sees: its `nodes()` (asked of all members at
    /// once, each within `limit`), as a matrix with any split named.
    pub async fn cluster_view(
        &self,
        name: &str,
        limit: Duration,
    ) -> Result<ClusterView, NodeError> {
        self.attach_pending(name, limit).await;
        let members = self.cluster_members(name)?;
        let nodes: Vec<String> = members.iter().map(|m| self.member_node(m)).collect();
        let node_of: BTreeMap<String, String> =
            nodes.iter().cloned().zip(members.clone()).collect();
        let views = members.iter().zip(nodes).map(|(member, node)| {
            let node_of = &node_of;
            async move {
                let state = self
                    .node_status(member)
                    .map_or(NodeState::Stopped, |s| s.state);
                let mut view = MemberView {
                    member: member.clone(),
                    node,
                    state,
                    status: "ok".into(),
                    sees: Vec::new(),
                    blocks: Vec::new(),
                    others: Vec::new(),
                };
                if !matches!(state, NodeState::Running | NodeState::Attached) {
                    view.status = "not running".into();
                    return view;
                }
                let call = ToolCall::new("cluster_view").with_timeout(limit);
                match tokio::time::timeout(limit, self.call_tool(member, &call)).await {
                    Err(_) => {
                        view.status = format!("timeout: no answer in {} ms", limit.as_millis())
                    }
                    Ok(Err(e)) => view.status = e.to_string(),
                    Ok(Ok(reply)) => view.read_answer(&reply.data, node_of),
                }
                view
            }
        });
        let views = futures::future::join_all(views).await;
        Ok(ClusterView::new(name, views))
    }
}

/// The node names listed under `key` in a helper's answer (none when it lists none).
pub(super) fn node_list(data: &serde_json::Value, key: &str) -> Vec<String> {
    data[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, sees: &[&str], blocks: &[&str]) -> MemberView {
        MemberView {
            member: name.into(),
            node: format!("{name}@h"),
            state: NodeState::Running,
            status: "ok".into(),
            sees: sees.iter().map(|s| s.to_string()).collect(),
            blocks: blocks.iter().map(|s| s.to_string()).collect(),
            others: Vec::new(),
        }
    }

    #[test]
    fn a_split_is_named_with_its_sides() {
        let whole = ClusterView::new(
            "c",
            vec![
                member("c-1", &["c-2", "c-3"], &[]),
                member("c-2", &["c-1", "c-3"], &[]),
                member("c-3", &["c-1", "c-2"], &[]),
            ],
        );
        assert!(whole.fully_connected && whole.split.is_none());
        let split = ClusterView::new(
            "c",
            vec![
                member("c-1", &[], &["c-2", "c-3"]),
                member("c-2", &["c-3"], &["c-1"]),
                member("c-3", &["c-2"], &["c-1"]),
            ],
        );
        assert_eq!(
            split.split,
            Some(vec![
                vec!["c-1".to_string()],
                vec!["c-2".into(), "c-3".into()]
            ])
        );
        let text = split.text();
        assert!(
            text.contains("SPLIT into 2 sides: [c-1] | [c-2, c-3]"),
            "{text}"
        );
        assert!(text.contains("c-1 1  -  x  x"), "{text}");
    }

    #[test]
    fn an_answer_names_members_and_leaves_other_nodes_apart() {
        let node_of: BTreeMap<String, String> = [
            ("a@h", "c-1"),
            ("b@h", "c-2"),
            ("c@h", "c-3"),
            ("d@h", "c-4"),
            ("e@h", "c-5"),
        ]
        .into_iter()
        .map(|(n, m)| (n.to_string(), m.to_string()))
        .collect();
        let mut view = member("c-1", &[], &[]);
        let answer = serde_json::json!({
            "nodes": ["c@h", "shell@h", "b@h", 7],
            "blocked": ["stranger@h", "e@h", "d@h"],
        });
        view.read_answer(&answer, &node_of);
        assert_eq!(view.sees, ["c-2", "c-3"]);
        assert_eq!(view.others, ["shell@h"]);
        assert_eq!(view.blocks, ["c-4", "c-5"]);
        assert!(node_list(&serde_json::json!({}), "nodes").is_empty());
    }

    #[test]
    fn a_member_without_an_answer_leaves_the_cluster_not_fully_connected() {
        let mut silent = member("c-3", &[], &[]);
        silent.status = "timeout: no answer in 3000 ms".into();
        silent.state = NodeState::Running;
        let view = ClusterView::new(
            "c",
            vec![
                member("c-1", &["c-2"], &[]),
                member("c-2", &["c-1"], &[]),
                silent,
            ],
        );
        // The two that answered see each other: no split among them.
        assert_eq!(view.split, None);
        assert!(!view.fully_connected);
        let text = view.text();
        assert!(
            text.starts_with("cluster c: 3 members, 2 answered; not fully connected"),
            "{text}"
        );
        assert!(
            text.contains("c-3 3  ?  ?  ?  (running, timeout: no answer in 3000 ms)"),
            "{text}"
        );
    }

    #[test]
    fn one_way_connections_are_no_group() {
        // c-1 says it sees c-2, c-2 does not see c-1: each is a side of its own.
        let view = ClusterView::new(
            "c",
            vec![member("c-1", &["c-2"], &[]), member("c-2", &[], &[])],
        );
        assert_eq!(
            view.split,
            Some(vec![vec!["c-1".to_string()], vec!["c-2".to_string()]])
        );
        assert!(!view.fully_connected);
        let text = view.text();
        assert!(text.contains("c-1 1  -  ✓"), "{text}");
        assert!(text.contains("c-2 2  ·  -"), "{text}");
    }

    #[test]
    fn nodes_outside_the_cluster_are_named_in_the_row() {
        let mut a = member("c-1", &["c-2"], &[]);
        a.others = vec!["shell@h".into()];
        let view = ClusterView::new("c", vec![a, member("c-2", &["c-1"], &[])]);
        assert!(view.fully_connected);
        let text = view.text();
        assert!(text.contains("; fully connected"), "{text}");
        assert!(text.contains("(also: shell@h)"), "{text}");
    }
}
