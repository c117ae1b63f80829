//! One finding about a cluster as a whole (`cluster_compare` finds who does not see whom and
//! what a member lacks, `cluster_code` the code that differs): its line and the call to make
//! next, typed until `cluster_diagnose` writes it out (as text, and as `{tool, arguments}` in
//! the data).

use crate::node::diagnose::{Arg, Next};
use serde_json::Value;

/// One cluster-wide finding: its line and the next call, addressed to a member or to the
/// cluster (`name`, written first among the call's arguments).
pub(super) struct ClusterFinding {
    pub line: String,
    pub name: String,
    pub next: Next,
}

impl ClusterFinding {
    /// A finding whose next call is `tool` on `name` with text arguments `args`.
    pub fn new(line: String, name: &str, tool: &str, args: Vec<(&str, String)>) -> Self {
        ClusterFinding {
            line,
            name: name.to_string(),
            next: Next::new(
                tool,
                args.into_iter().map(|(k, v)| (k, Arg::Text(v))).collect(),
            ),
        }
    }

    /// `callers {"name":"c-2","target":":pg.join"}`. No argument is a pid, so the syntax does
    /// not matter.
    pub fn next_text(&self) -> String {
        self.next.call_text(&self.name, false)
    }

    /// `{"tool": "callers", "arguments": {"name": "c-2", "target": ":pg.join"}}`.
    pub fn next_json(&self) -> Value {
        self.next.call_json(&self.name, false)
    }
}
