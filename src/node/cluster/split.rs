//! Splitting a cluster this server started in two on purpose (`partition`), to test what its
//! application does on a netsplit, and healing it: each side refuses the other's connections
//! until every member is asked to connect to all again.

use super::ClusterView;
use crate::helper::ToolCall;
use crate::node::supervisor;
use crate::node::{NodeError, Registry};
use std::time::Duration;

/// How long `partition` keeps each side connected within itself before it answers.
const PARTITION_SETTLE: Duration = Duration::from_secs(5);

impl Registry {
    /// Splits cluster `name` in two: the members in `side` against the others. Each side
    /// refuses the other's connections until [`heal`](Self::heal); every member is asked at
    /// once, each within `limit`. The view afterwards.
    pub async fn partition(
        &self,
        name: &str,
        side: &[String],
        limit: Duration,
    ) -> Result<ClusterView, NodeError> {
        let members = self.cluster_members(name)?;
        if members.iter().any(|m| self.child(m).is_err()) {
            return Err(NodeError::BadConfig(format!(
                "`{name}` was found by `attach`: `partition` splits only clusters this server \
                 started (`start` with `nodes`)"
            )));
        }
        let split = Split::new(name, &members, side, |m| {
            supervisor::node_name(m, &self.node_suffix)
        })?;
        // Block the other side, then keep each side whole: `global` may cut a node from its
        // own side while the partition spreads; asked again until each side is connected.
        let deadline = tokio::time::Instant::now() + PARTITION_SETTLE;
        loop {
            let calls =
                split.orders.iter().map(|order| {
                    let call = ToolCall::new("partition")
                        .text("block", order.block.as_str())
                        .text("peers", order.peers.as_str())
                        .with_timeout(limit);
                    async move {
                        tokio::time::timeout(limit, self.call_tool(&order.member, &call)).await
                    }
                });
            futures::future::join_all(calls).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let view = self.cluster_view(name, limit).await?;
            if split.is_seen_in(&view) || tokio::time::Instant::now() >= deadline {
                return Ok(view);
            }
        }
    }

    /// Ends a partition of cluster `name`: every member unblocks the others and connects to
    /// them again. The view afterwards (connections may take a moment to show everywhere).
    pub async fn heal(&self, name: &str, limit: Duration) -> Result<ClusterView, NodeError> {
        let members = self.cluster_members(name)?;
        // Every member unblocks the others and connects to them, all at once: one that asks
        // a peer the peer still blocks is refused. Once all have unblocked, a second round
        // connects what the first could not (it connects only what is missing).
        self.connect_members(&members, limit).await;
        self.connect_members(&members, limit).await;
        self.cluster_view(name, limit).await
    }
}

/// A partition of a cluster's members in two, checked: what each member is told, and the
/// sides the cluster's view should show once it holds.
#[derive(Debug)]
struct Split {
    /// One per member, in the members' order.
    orders: Vec<Order>,
    /// Both sides, each sorted, in order (as [`ClusterView::split`] names them).
    sides: Vec<Vec<String>>,
}

/// What one member is told: the Erlang nodes to refuse (the other side's), and those to
/// stay connected to (its own side's, itself included); each a comma-separated list.
#[derive(Debug, PartialEq)]
struct Order {
    member: String,
    block: String,
    peers: String,
}

impl Split {
    /// `members` of cluster `name` split into those in `side` and the others; `node` gives
    /// a member's Erlang node name. Refused unless `side` names some members but not all,
    /// and no one else.
    fn new(
        name: &str,
        members: &[String],
        side: &[String],
        node: impl Fn(&str) -> String,
    ) -> Result<Self, NodeError> {
        if let Some(stranger) = side.iter().find(|m| !members.contains(m)) {
            return Err(NodeError::BadConfig(format!(
                "`{stranger}` is not a member of `{name}` (members: {})",
                members.join(", ")
            )));
        }
        if side.is_empty() || side.len() >= members.len() {
            return Err(NodeError::BadConfig(format!(
                "`side` must name some members of `{name}` but not all (members: {})",
                members.join(", ")
            )));
        }
        let (inside, outside): (Vec<&String>, Vec<&String>) =
            members.iter().partition(|m| side.contains(m));
        let list = |group: &[&String]| group.iter().map(|m| node(m)).collect::<Vec<_>>().join(",");
        let (outside_nodes, inside_nodes) = (list(&outside), list(&inside));
        let orders = members
            .iter()
            .map(|m| {
                let (block, peers) = if side.contains(m) {
                    (&outside_nodes, &inside_nodes)
                } else {
                    (&inside_nodes, &outside_nodes)
                };
                Order {
                    member: m.clone(),
                    block: block.clone(),
                    peers: peers.clone(),
                }
            })
            .collect();
        let mut sides: Vec<Vec<String>> = [inside, outside]
            .into_iter()
            .map(|g| g.into_iter().cloned().collect())
            .collect();
        sides.iter_mut().for_each(|g| g.sort());
        sides.sort();
        Ok(Self { orders, sides })
    }

    /// Whether `view` shows the cluster split into exactly these sides.
    fn is_seen_in(&self, view: &ClusterView) -> bool {
        view.split.as_ref() == Some(&self.sides)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::cluster::MemberView;

    fn members(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn node(member: &str) -> String {
        format!("{member}@h")
    }

    #[test]
    fn each_side_blocks_the_other_and_keeps_its_own() {
        let all = members(&["c-1", "c-2", "c-3"]);
        let split = Split::new("c", &all, &members(&["c-3", "c-1"]), node).unwrap();
        let order = |member: &str, block: &str, peers: &str| Order {
            member: member.into(),
            block: block.into(),
            peers: peers.into(),
        };
        assert_eq!(
            split.orders,
            [
                order("c-1", "c-2@h", "c-1@h,c-3@h"),
                order("c-2", "c-1@h,c-3@h", "c-2@h"),
                order("c-3", "c-2@h", "c-1@h,c-3@h"),
            ]
        );
        assert_eq!(split.sides, [members(&["c-1", "c-3"]), members(&["c-2"])]);
    }

    #[test]
    fn a_side_must_be_some_members_but_not_all() {
        let all = members(&["c-1", "c-2", "c-3"]);
        for side in [vec![], all.clone()] {
            let err = Split::new("c", &all, &side, node).unwrap_err();
            assert!(
                err.to_string()
                    .contains("must name some members of `c` but not all (members: c-1, c-2, c-3)"),
                "{err}"
            );
        }
        let err = Split::new("c", &all, &members(&["c-1", "d-1"]), node).unwrap_err();
        assert!(
            err.to_string().contains("`d-1` is not a member of `c`"),
            "{err}"
        );
    }

    #[test]
    fn the_split_holds_when_the_view_shows_exactly_its_sides() {
        let all = members(&["c-1", "c-2", "c-3"]);
        let split = Split::new("c", &all, &members(&["c-2"]), node).unwrap();
        let view = |groups: Option<Vec<Vec<String>>>| ClusterView {
            cluster: "c".into(),
            members: Vec::<MemberView>::new(),
            split: groups,
            fully_connected: false,
        };
        let seen = view(Some(vec![members(&["c-1", "c-3"]), members(&["c-2"])]));
        assert!(split.is_seen_in(&seen));
        assert!(!split.is_seen_in(&view(None)));
        let three = view(Some(vec![
            members(&["c-1"]),
            members(&["c-2"]),
            members(&["c-3"]),
        ]));
        assert!(!split.is_seen_in(&three));
    }
}
