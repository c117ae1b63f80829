//! One finding about a cluster as a whole: the record that `cluster_compare` and
//! `cluster_code` both make and `cluster_diagnose` prints, kept below all three.

/// One cluster-wide finding: its line and the next call (tool and arguments, the member's
/// name included).
pub(super) struct ClusterFinding {
    pub line: String,
    pub next: String,
}
