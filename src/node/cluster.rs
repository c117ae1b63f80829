//! Clusters: `start` with `nodes: N` makes members `NAME-1 … NAME-N` of one project,
//! sharing a cookie, each told its index (`OS_SUP_NODE_INDEX`, and `{index}` or
//! `{4000+index}` in the values of `env`, so that `PORT` differs without a change to the
//! project) and, unless the project connects its members itself, its peers (`OS_SUP_CLUSTER`,
//! which the helper's `os_sup_cluster` connects to at boot); `attach` to a node connected to others makes
//! cluster `NAME*` of it and its peers. This module owns the member names and what the
//! members see of each other: every member's `nodes()` as a matrix, and a split named with
//! its sides.

use super::config::NodeConfig;
use super::status::NodeState;
use super::Readiness;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Most members one `start` makes.
pub const MAX_MEMBERS: usize = 32;

/// How long each member of a cluster may take to say whom it sees (all are asked at once).
pub const VIEW_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);

/// The member names of cluster `name` with `count` members.
pub fn member_names(name: &str, count: usize) -> Vec<String> {
    (1..=count).map(|i| format!("{name}-{i}")).collect()
}

/// Each member's configuration: `base` renamed, with the shared `cookie`, its index and
/// (when `connect`) its peers' node names in its environment.
pub fn member_configs(
    base: &NodeConfig,
    members: &[(String, String)],
    cookie: &str,
    connect: bool,
) -> Vec<NodeConfig> {
    let peers: Vec<&str> = members.iter().map(|(_, node)| node.as_str()).collect();
    members
        .iter()
        .enumerate()
        .map(|(i, (member, _))| {
            let mut config = base.clone();
            config.name = member.clone();
            config.cookie = Some(cookie.to_string());
            for value in config.env.values_mut() {
                *value = with_index(value, i + 1);
            }
            if let Readiness::Http(url) = &config.readiness {
                config.readiness = Readiness::Http(with_index(url, i + 1));
            }
            config
                .env
                .insert("OS_SUP_NODE_INDEX".into(), (i + 1).to_string());
            if connect {
                config.env.insert("OS_SUP_CLUSTER".into(), peers.join(","));
            }
            config
        })
        .collect()
}

/// Why `readiness` cannot tell when each member of a cluster is ready, if it cannot: a port
/// or a URL without `{index}` is the same for every member, so the first member up would
/// make all of them look ready.
pub fn check_readiness(readiness: &Readiness) -> Result<(), String> {
    let same_for_all = match readiness {
        Readiness::Port(port) => Some(format!("port {port}")),
        Readiness::Http(url) if !url.contains("index}") => Some(format!("`{url}`")),
        _ => None,
    };
    match same_for_all {
        Some(what) => Err(format!(
            "`ready` would wait on {what} for every member, which the first member up answers \
             for all: give each its own with `{{index}}` or `{{4000+index}}` in a URL (`ready: \
             {{\"url\": \"http://127.0.0.1:{{4000+index}}/\"}}`, with `env: {{\"PORT\": \
             \"{{4000+index}}\"}}`), or use `app` or a `log` line"
        )),
        None => Ok(()),
    }
}

/// `value` with `{index}` replaced by `index` and `{N+index}` by N + `index`
/// (`"PORT": "{4000+index}"` gives member 2 port 4002); anything else is left as it is.
fn with_index(value: &str, index: usize) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(open) = rest.find('{') {
        out += &rest[..open];
        let after = &rest[open..];
        let Some(close) = after.find('}') else {
            out += after;
            rest = "";
            break;
        };
        let inner = after[1..close].trim();
        let base = match inner.strip_suffix("index") {
            Some("") => Some(0),
            Some(base) => base
                .trim_end()
                .strip_suffix('+')
                .and_then(|n| n.trim().parse::<usize>().ok()),
            None => None,
        };
        match base.and_then(|base| base.checked_add(index)) {
            Some(n) => out += &n.to_string(),
            None => out += &after[..=close],
        }
        rest = &after[close + 1..];
    }
    out + rest
}

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

#[cfg(test)]
mod tests {
    #[test]
    fn env_values_name_the_member_index() {
        use super::with_index;
        assert_eq!(with_index("{4000+index}", 2), "4002");
        assert_eq!(with_index("node{index}.log", 3), "node3.log");
        assert_eq!(with_index("{ 100 + index}", 1), "101");
        assert_eq!(with_index("{other} {index", 1), "{other} {index");
        assert_eq!(with_index("a{}b{x+index}c", 1), "a{}b{x+index}c");
        assert_eq!(with_index("plain", 1), "plain");
        let huge = format!("{{{}+index}}", usize::MAX);
        assert_eq!(with_index(&huge, 1), huge);
    }

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
}
