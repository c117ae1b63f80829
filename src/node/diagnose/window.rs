//! The window's correction of the history: a rise the history still calls growing that the
//! node's own two samples of the window saw flat has ended, and is a past step.

use super::history::{self, Assessment, Trend};
use crate::node::vitals::{Meter, Sample, Unit};

/// A rate of the history is checked against the window when it would have added this much
/// in it.
const WINDOW_EXPECTS: f64 = 20.0;
/// ... and, for memory, this many bytes.
const WINDOW_EXPECTS_BYTES: f64 = 64.0 * 1024.0 * 1024.0;

/// Rises the history still calls growing that the window, a second or more of the node's
/// own samples, saw flat (less than a tenth of what the rate would have added): they ended
/// between the last sample and now, and are past steps, with no rate and no time to a limit.
/// A count that stays near its limit stays a concern, as a level.
pub(super) fn ended_in_window(assessment: &mut Assessment, start: &Sample, end: &Sample) {
    let secs = end.at_ms.saturating_sub(start.at_ms) as f64 / 1000.0;
    if secs < 0.5 {
        return;
    }
    for trend in assessment.concerns.iter_mut().filter(|t| t.growing) {
        let expected = trend.rate * secs;
        // The node does not read its OS memory: what the VM holds is what it follows.
        let meter = match trend.meter {
            Meter::Rss => Meter::MemoryTotal,
            meter => meter,
        };
        let (Some(a), Some(b)) = (start.get(meter), end.get(meter)) else {
            continue;
        };
        // Memory moves by what a collection frees and by the walks' own reads (hundreds of
        // MB on a node of a million processes): only a large rise is judged, against half.
        let (least, share) = match trend.meter.unit() {
            Unit::Bytes => (WINDOW_EXPECTS_BYTES, 2.0),
            Unit::Count => (WINDOW_EXPECTS, 10.0),
        };
        if expected >= least && (b as f64 - a as f64) < expected / share {
            trend.growing = false;
            trend.rate = 0.0;
            trend.to_limit = None;
            if meter == trend.meter {
                trend.current = b;
            }
            // The rise so far is the step it made; it ended a window ago at least.
            if let Some(step) = trend.step.as_mut() {
                step.ago += secs;
            }
        }
    }
    let (concerns, ended): (Vec<Trend>, Vec<Trend>) = std::mem::take(&mut assessment.concerns)
        .into_iter()
        .partition(|t| t.growing || history::near_limit(t));
    assessment.concerns = concerns;
    assessment
        .steps
        .extend(ended.into_iter().filter(|t| t.step.is_some()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::diagnose::history::Step;
    use crate::node::diagnose::verdict::past_steps;
    use std::time::Duration;

    #[test]
    fn a_rate_the_window_saw_flat_has_ended_and_gives_no_time_to_a_limit() {
        let rising = |current| Trend {
            meter: Meter::Processes,
            rate: 58_962.0,
            current,
            limit: Some(2_000_000),
            to_limit: Some(19.0),
            growing: true,
            step: None,
        };
        let sample = |at_ms, processes| {
            let mut s = Sample::new(at_ms);
            s.set(Meter::Processes, processes);
            s
        };
        let mut flat = Assessment {
            concerns: vec![rising(1_000_051)],
            steps: vec![],
            history: Duration::from_secs(60),
            samples: 30,
            unanswered: 0,
            work: vec![],
            work_node: None,
            processes_rise: None,
        };
        ended_in_window(&mut flat, &sample(0, 1_000_051), &sample(1000, 1_000_051));
        assert!(flat.concerns.is_empty(), "{:?}", flat.concerns);
        // The rise so far is told as the step it made, ended at least a window ago.
        let mut spawned = Assessment {
            concerns: vec![Trend {
                step: Some(Step {
                    by: 1_000_000.0,
                    took: 17.0,
                    ago: 0.5,
                }),
                ..rising(1_000_051)
            }],
            ..flat.clone()
        };
        ended_in_window(
            &mut spawned,
            &sample(0, 1_000_051),
            &sample(1000, 1_000_051),
        );
        assert!(spawned.concerns.is_empty());
        let step = spawned.steps[0].step.unwrap();
        assert_eq!((step.by, step.ago), (1_000_000.0, 1.5));
        assert_eq!(
            past_steps(&spawned.steps).next().unwrap().1,
            "rose by 1000000 in 17 s, 2 s ago; flat since"
        );
        // Still rising in the window: the rate stands.
        let mut still = Assessment {
            concerns: vec![rising(1_000_051)],
            ..flat.clone()
        };
        ended_in_window(&mut still, &sample(0, 1_000_051), &sample(1000, 1_050_000));
        assert_eq!(still.concerns[0].to_limit, Some(19.0));
        // Near its limit, a level that stopped is still said, with no time to the limit.
        let mut near = Assessment {
            concerns: vec![rising(1_900_000)],
            ..flat.clone()
        };
        ended_in_window(&mut near, &sample(0, 1_900_000), &sample(1000, 1_900_000));
        assert_eq!(near.concerns[0].to_limit, None);
        assert!(!near.concerns[0].growing);
        // OS memory that rose with the VM's (1 M processes spawned) ended when the VM's did.
        let mut rss = Assessment {
            concerns: vec![Trend {
                meter: Meter::Rss,
                rate: 196.8e6,
                current: 2_800_000_000,
                limit: None,
                to_limit: Some(104.0),
                growing: true,
                step: None,
            }],
            ..flat.clone()
        };
        let vm = |at_ms, bytes| {
            let mut s = Sample::new(at_ms);
            s.set(Meter::MemoryTotal, bytes);
            s
        };
        ended_in_window(&mut rss, &vm(0, 2_818_000_000), &vm(1000, 2_818_100_000));
        assert!(rss.concerns.is_empty(), "{:?}", rss.concerns);
    }
}
