//! The work of a node's registered processes, as the sampler keeps it: each vitals sample
//! carries their cumulative reductions and the bytes read from ports ([`Reading`]), kept one
//! every [`EVERY`] for [`KEEP`] readings ([`WorkHistory`]). What the readings say (work that
//! keeps rising on flat input) is `diagnose::work`'s.

use std::collections::VecDeque;
use std::time::Duration;

/// A reading is kept at most this often.
pub const EVERY: Duration = Duration::from_secs(10);
/// Readings kept: ten minutes.
pub const KEEP: usize = 61;

/// What the node sent with one sample: each registered process's cumulative reductions (by
/// name) and the bytes read from its ports so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    pub reductions: Vec<(String, u64)>,
    pub io_in: Option<u64>,
    /// All the node's reductions so far.
    pub total: Option<u64>,
}

impl Reading {
    /// From the helper's `vitals` map (`work`, `io_in`); `None` when it sent no `work`.
    pub fn from_node(data: &serde_json::Value) -> Option<Self> {
        let work = data["work"].as_object()?;
        Some(Reading {
            reductions: work
                .iter()
                .filter_map(|(name, r)| Some((name.clone(), r.as_u64()?)))
                .collect(),
            io_in: data["io_in"].as_u64(),
            total: data["reductions"].as_u64(),
        })
    }
}

/// The readings of one node, one every [`EVERY`] at most, the last [`KEEP`].
#[derive(Debug, Clone, Default)]
pub struct WorkHistory {
    pub(crate) points: VecDeque<(u64, Reading)>,
}

impl WorkHistory {
    pub fn add(&mut self, at_ms: u64, reading: Reading) {
        if let Some((last, _)) = self.points.back() {
            if at_ms < last + EVERY.as_millis() as u64 {
                return;
            }
        }
        if self.points.len() == KEEP {
            self.points.pop_front();
        }
        self.points.push_back((at_ms, reading));
    }

    pub fn clear(&mut self) {
        self.points.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_are_kept_once_per_stretch_and_bounded() {
        let mut h = WorkHistory::default();
        for i in 0..2000u64 {
            h.add(i * 2000, Reading::default());
        }
        assert_eq!(h.points.len(), KEEP);
        assert!(h
            .points
            .iter()
            .zip(h.points.iter().skip(1))
            .all(|(a, b)| b.0 - a.0 >= 10_000));
    }
}
