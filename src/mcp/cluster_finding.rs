//! One finding about a cluster as a whole (`cluster_compare` finds who does not see whom and
//! what a member lacks, `cluster_code` the code that differs): the same record as a node's
//! finding ([`Finding`], kind `cluster`), with the member or cluster its next call addresses;
//! `cluster_diagnose` writes it out as a node's findings are (text and data).

use crate::node::diagnose::{Arg, Finding, Kind, Next};

/// One cluster-wide finding and the name its next call addresses (a member or the cluster,
/// written first among the call's arguments).
pub(super) struct ClusterFinding {
    pub finding: Finding,
    pub name: String,
}

impl ClusterFinding {
    /// A finding of `line` whose next call is `tool` on `name` with text arguments `args`.
    pub fn new(line: String, name: &str, tool: &str, args: Vec<(&str, String)>) -> Self {
        let next = Next::new(
            tool,
            args.into_iter().map(|(k, v)| (k, Arg::Text(v))).collect(),
        );
        ClusterFinding {
            finding: Finding::new(Kind::Cluster, line, String::new(), next),
            name: name.to_string(),
        }
    }

    /// The finding with its number `name` (the unit in the name, as a node's facts).
    pub fn fact(mut self, name: &str, value: usize) -> Self {
        self.finding.facts.insert(name.to_string(), value as f64);
        self
    }

    /// Its line, as the report writes it.
    pub fn line(&self) -> String {
        super::finding_text::line(&self.finding)
    }

    /// `callers {"name":"c-2","target":":pg.join"}`. No argument is a pid, so the syntax does
    /// not matter.
    pub fn next_text(&self) -> String {
        self.finding.next.call_text(&self.name, false)
    }
}
