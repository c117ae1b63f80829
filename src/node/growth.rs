//! The health model over a node's vital-signs history, for `diagnose`.
//!
//! It finds each meter's rate over
//! the last [`TREND_WINDOW`] (a least-squares slope, so one noisy sample does not make a
//! trend), which meters grow beyond noise (a rise over the floor of their kind, and steady, or
//! a rise in steps over [`STEPS_WINDOW`]), and how long until each meter with a limit (or
//! memory, against what the host has left) reaches it.

use super::vitals::{Meter, Sample, Unit};
use std::time::Duration;

/// The stretch of history a rate is measured over.
pub const TREND_WINDOW: Duration = Duration::from_secs(60);
/// The least history a rate is trusted from.
pub const TREND_MIN_SPAN: Duration = Duration::from_secs(15);
/// The longer stretch read for a rise in steps (see `staircase`), and the least of it
/// that is trusted.
pub const STEPS_WINDOW: Duration = Duration::from_secs(600);
const STEPS_MIN_SPAN: Duration = Duration::from_secs(180);
/// A count at this share of its limit is reported whatever its rate.
pub const NEAR_LIMIT: f64 = 0.8;

/// A meter's course over the trend window.
#[derive(Debug, Clone, PartialEq)]
pub struct Trend {
    pub meter: Meter,
    /// Per second (least squares).
    pub rate: f64,
    pub current: u64,
    pub limit: Option<u64>,
    /// Seconds until `limit` at `rate` (`None`: no limit, or not growing).
    pub to_limit: Option<f64>,
    /// Growing beyond noise.
    pub growing: bool,
}

/// What the history says: the meters that grow or near their limit, soonest exhaustion first,
/// and how much history was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    pub concerns: Vec<Trend>,
    pub history: Duration,
    pub samples: usize,
    /// The node did not answer its last samples (its OS figures still came).
    pub unanswered: usize,
}

/// Reads `samples` (oldest first, the last [`STEPS_WINDOW`] or less); `memory_room` is what
/// the host has left (MemAvailable) to time memory growth against.
pub fn assess(samples: &[Sample], memory_room: Option<u64>) -> Assessment {
    let newest = samples.last().map(|s| s.at_ms).unwrap_or(0);
    let last = |span: Duration| -> Vec<&Sample> {
        samples
            .iter()
            .filter(|s| s.at_ms + span.as_millis() as u64 >= newest)
            .collect()
    };
    let (window, long) = (last(TREND_WINDOW), last(STEPS_WINDOW));
    let history = match (samples.first(), samples.last()) {
        (Some(a), Some(b)) => Duration::from_millis(b.at_ms.saturating_sub(a.at_ms)),
        _ => Duration::ZERO,
    };
    let unanswered = samples.iter().rev().take_while(|s| !s.answered()).count();
    let mut concerns: Vec<Trend> = Meter::ALL
        .iter()
        .filter_map(|&meter| trend(&window, &long, meter, memory_room))
        .filter(|t| t.growing || near_limit(t))
        .collect();
    concerns.sort_by(|a, b| {
        let key = |t: &Trend| t.to_limit.unwrap_or(f64::INFINITY);
        key(a).total_cmp(&key(b))
    });
    Assessment {
        concerns,
        history,
        samples: samples.len(),
        unanswered,
    }
}

fn near_limit(t: &Trend) -> bool {
    match t.limit {
        Some(limit) if limit > 0 && t.meter.limit().is_some() => {
            t.current as f64 >= limit as f64 * NEAR_LIMIT
        }
        _ => false,
    }
}

/// The meter's rate over `window` (or, when that shows no growth, a rise in steps over
/// `long`) and its time to the limit; `None` when it was not read often enough over
/// [`TREND_MIN_SPAN`].
fn trend(
    window: &[&Sample],
    long: &[&Sample],
    meter: Meter,
    memory_room: Option<u64>,
) -> Option<Trend> {
    meter.growth_floor()?;
    let points_of = |samples: &[&Sample]| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter_map(|s| s.get(meter).map(|v| (s.at_ms as f64 / 1000.0, v as f64)))
            .collect()
    };
    let points = points_of(window);
    let current = window.iter().rev().find_map(|s| s.get(meter))?;
    let limit = meter
        .limit()
        .and_then(|l| window.iter().rev().find_map(|s| s.get(l)));
    let span = points.last()?.0 - points.first()?.0;
    let (rate, steady) = if points.len() >= 4 && span >= TREND_MIN_SPAN.as_secs_f64() {
        slope(&points)
    } else {
        (0.0, false)
    };
    let floor = meter.growth_floor().unwrap_or(f64::INFINITY);
    let per_window = |rate: f64| rate * TREND_WINDOW.as_secs_f64() >= floor;
    let rising = steady && rate > 0.0 && per_window(rate);
    // The longer stretch is read only when the last minute shows no growth.
    let steps = (!rising)
        .then(|| staircase(&points_of(long)))
        .flatten()
        .filter(|&steps| per_window(steps));
    let (rate, growing) = steps.map_or((rate, rising), |steps| (steps, true));
    let room = match (limit, meter.unit()) {
        (Some(limit), _) => Some(limit.saturating_sub(current) as f64),
        (None, Unit::Bytes) => memory_room.map(|r| r as f64),
        (None, Unit::Count) => None,
    };
    let to_limit = room.filter(|_| growing).map(|room| room / rate);
    Some(Trend {
        meter,
        rate,
        current,
        limit,
        to_limit,
        growing,
    })
}

/// The rate of a rise in steps over `points` (x: seconds, y: value), if it is one: the lowest
/// value of each fifth of them climbs in at least three of the four steps between fifths and
/// never falls. A process's heap grows by half each time it is full, so a leak in one large
/// process shows as jumps a minute or more apart, which the last minute alone may not see;
/// one jump (a cache filled once) or a sawtooth (memory freed again) is not a rise in steps.
fn staircase(points: &[(f64, f64)]) -> Option<f64> {
    let (first, last) = (points.first()?.0, points.last()?.0);
    if last - first < STEPS_MIN_SPAN.as_secs_f64() {
        return None;
    }
    let fifth = (last - first) / 5.0;
    let lows: Vec<(f64, f64)> = (0..5)
        .map(|i| {
            let (from, to) = (first + fifth * i as f64, first + fifth * (i + 1) as f64);
            points
                .iter()
                .filter(|(x, _)| *x >= from && (*x < to || i == 4))
                .copied()
                .min_by(|a, b| a.1.total_cmp(&b.1))
        })
        .collect::<Option<_>>()?;
    let climbs = lows.windows(2).filter(|w| w[1].1 > w[0].1).count();
    let falls = lows.windows(2).any(|w| w[1].1 < w[0].1);
    let (start, end) = (lows[0], lows[4]);
    (climbs >= 3 && !falls && end.0 > start.0).then(|| (end.1 - start.1) / (end.0 - start.0))
}

/// The least-squares slope of `points` (x: seconds, y: value), and whether it is steady (the
/// correlation is strong: a rise, not one jump among flat samples).
fn slope(points: &[(f64, f64)]) -> (f64, bool) {
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (x, y) in points {
        sxy += (x - mean_x) * (y - mean_y);
        sxx += (x - mean_x).powi(2);
        syy += (y - mean_y).powi(2);
    }
    if sxx == 0.0 || syy == 0.0 {
        return (0.0, false);
    }
    let r = sxy / (sxx * syy).sqrt();
    (sxy / sxx, r >= 0.8)
}

/// `~5.7 h`, `~12 min`, `~40 s`.
pub fn duration_text(seconds: f64) -> String {
    if seconds >= 2.0 * 86400.0 {
        format!("~{:.0} days", seconds / 86400.0)
    } else if seconds >= 2.0 * 3600.0 {
        format!("~{:.1} h", seconds / 3600.0)
    } else if seconds >= 120.0 {
        format!("~{:.0} min", seconds / 60.0)
    } else {
        format!("~{:.0} s", seconds.max(1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(seconds: u64, f: impl Fn(u64) -> u64) -> Vec<Sample> {
        (0..=seconds / 2)
            .map(|i| {
                let mut s = Sample::new(1_000_000 + i * 2000);
                s.set(Meter::MemoryTotal, 50 << 20);
                s.set(Meter::Atoms, f(i * 2));
                s.set(Meter::AtomLimit, 1_048_576);
                s.set(Meter::Processes, 300 + (i % 3));
                s.set(Meter::ProcessLimit, 262_144);
                s
            })
            .collect()
    }

    #[test]
    fn a_steady_rise_has_its_rate_and_time_to_the_limit() {
        let samples = history(60, |t| 21_256 + 50 * t);
        let a = assess(&samples, None);
        assert_eq!(a.concerns.len(), 1, "{a:?}");
        let atoms = &a.concerns[0];
        assert_eq!(atoms.meter, Meter::Atoms);
        assert!((atoms.rate - 50.0).abs() < 0.01, "{atoms:?}");
        let hours = atoms.to_limit.unwrap() / 3600.0;
        assert!((5.6..5.7).contains(&hours), "{hours}");
        assert_eq!(duration_text(atoms.to_limit.unwrap()), "~5.7 h");
    }

    #[test]
    fn noise_and_short_history_are_not_growth() {
        // Flat with jitter (the processes), and one jump among flat samples.
        let jump = history(60, |t| if t == 30 { 30_000 } else { 21_000 });
        assert!(assess(&jump, None).concerns.is_empty());
        let short = history(8, |t| 21_000 + 500 * t);
        assert!(assess(&short, None).concerns.is_empty(), "8 s of history");
    }

    /// Memory over `minutes`, one sample each 2 s, from `f(t)` (t in seconds).
    fn memory(minutes: u64, f: impl Fn(u64) -> u64) -> Vec<Sample> {
        (0..minutes * 30)
            .map(|i| {
                let mut s = Sample::new(1_000_000 + i * 2000);
                s.set(Meter::MemoryProcesses, f(i * 2));
                s
            })
            .collect()
    }

    #[test]
    fn a_rise_in_steps_a_minute_or_more_apart_is_growth() {
        const MB: u64 = 1 << 20;
        // A heap that grows by 30 MB every 90 s: flat over the last minute, rising over ten.
        let steps = memory(10, |t| 40 * MB + 30 * MB * (t / 90));
        let last_minute = &steps[steps.len() - 30..];
        assert!(assess(last_minute, None).concerns.is_empty());
        let a = assess(&steps, Some(1 << 30));
        assert_eq!(a.concerns.len(), 1, "{a:?}");
        let growth = &a.concerns[0];
        assert_eq!(growth.meter, Meter::MemoryProcesses);
        assert!(growth.growing && growth.to_limit.is_some(), "{growth:?}");
        let per_min = growth.rate * 60.0 / MB as f64;
        assert!((15.0..25.0).contains(&per_min), "{per_min} MB/min");
        // One jump (a cache filled once), and a sawtooth (memory freed again), are not.
        let once = memory(10, |t| if t < 300 { 40 * MB } else { 200 * MB });
        assert!(assess(&once, None).concerns.is_empty());
        let saw = memory(10, |t| 40 * MB + 30 * MB * ((t / 90) % 3));
        assert!(assess(&saw, None).concerns.is_empty());
    }

    #[test]
    fn a_count_near_its_limit_is_a_concern_without_growth() {
        let full = history(60, |_| 900_000);
        let a = assess(&full, None);
        assert_eq!(a.concerns[0].meter, Meter::Atoms);
        assert!(!a.concerns[0].growing);
    }

    #[test]
    fn the_slope_is_least_squares_and_steady_only_when_it_fits() {
        let line: Vec<(f64, f64)> = (0..10).map(|x| (x as f64, 3.0 * x as f64 + 7.0)).collect();
        let (rate, steady) = slope(&line);
        assert!((rate - 3.0).abs() < 1e-9 && steady, "{rate} {steady}");
        // Flat, or one point alone: no rate.
        let flat: Vec<(f64, f64)> = (0..10).map(|x| (x as f64, 5.0)).collect();
        assert_eq!(slope(&flat), (0.0, false));
        assert_eq!(slope(&[(1.0, 1.0)]), (0.0, false));
        // One jump among flat samples rises, but not steadily.
        let jump: Vec<(f64, f64)> = (0..30)
            .map(|x| (x as f64, if x == 15 { 100.0 } else { 0.0 }))
            .collect();
        assert!(!slope(&jump).1);
        // A fall is a negative rate.
        let fall: Vec<(f64, f64)> = (0..10).map(|x| (x as f64, 50.0 - 2.0 * x as f64)).collect();
        assert!((slope(&fall).0 + 2.0).abs() < 1e-9);
    }

    #[test]
    fn a_staircase_needs_three_minutes_and_lows_that_climb_and_never_fall() {
        // A step of 10 every 60 s over 5 minutes: its rate is the lows' rise over their span.
        let steps: Vec<(f64, f64)> = (0..=300)
            .step_by(2)
            .map(|t| (t as f64, 10.0 * (t / 60) as f64))
            .collect();
        let rate = staircase(&steps).expect("a rise in steps");
        assert!((rate - 10.0 / 60.0).abs() < 0.02, "{rate}");
        // The same over two minutes is too short to tell.
        let short: Vec<(f64, f64)> = steps.iter().copied().filter(|p| p.0 <= 120.0).collect();
        assert_eq!(staircase(&short), None);
        // Lows that fall once (memory freed) are no staircase.
        let saw: Vec<(f64, f64)> = (0..=300)
            .step_by(2)
            .map(|t| (t as f64, 10.0 * ((t / 60) % 3) as f64))
            .collect();
        assert_eq!(staircase(&saw), None);
        assert_eq!(staircase(&[]), None);
    }

    #[test]
    fn concerns_are_ordered_by_time_to_their_limit() {
        // Atoms full in ~5.7 h, processes in ~1 h, and a count near its limit with no rate
        // (no time to it) last.
        let samples: Vec<Sample> = (0..=30)
            .map(|i| {
                let mut s = Sample::new(1_000_000 + i * 2000);
                let t = i * 2;
                s.set(Meter::Atoms, 21_256 + 50 * t);
                s.set(Meter::AtomLimit, 1_048_576);
                s.set(Meter::Processes, 1000 + 72 * t);
                s.set(Meter::ProcessLimit, 262_144);
                s.set(Meter::Ports, 900);
                s.set(Meter::PortLimit, 1000);
                s
            })
            .collect();
        let a = assess(&samples, None);
        let meters: Vec<Meter> = a.concerns.iter().map(|t| t.meter).collect();
        assert_eq!(
            meters,
            [Meter::Processes, Meter::Atoms, Meter::Ports],
            "{a:?}"
        );
        assert_eq!(a.concerns[2].to_limit, None);
        assert_eq!((a.samples, a.history), (31, Duration::from_secs(60)));
    }

    #[test]
    fn a_growing_memory_is_timed_against_the_hosts_room() {
        const MB: u64 = 1 << 20;
        let samples = memory(1, |t| 100 * MB + MB / 2 * t);
        let a = assess(&samples, Some(600 * MB));
        let growth = &a.concerns[0];
        assert_eq!((growth.meter, growth.limit), (Meter::MemoryProcesses, None));
        let seconds = growth.to_limit.expect("timed against the room");
        assert!((seconds - 1200.0).abs() < 1.0, "{seconds}");
        // No room known: growth without a time.
        assert_eq!(assess(&samples, None).concerns[0].to_limit, None);
    }

    #[test]
    fn durations_read_in_the_unit_that_fits() {
        assert_eq!(duration_text(0.2), "~1 s");
        assert_eq!(duration_text(40.0), "~40 s");
        assert_eq!(duration_text(119.0), "~119 s");
        assert_eq!(duration_text(120.0), "~2 min");
        assert_eq!(duration_text(7199.0), "~120 min");
        assert_eq!(duration_text(7200.0), "~2.0 h");
        assert_eq!(duration_text(2.0 * 86400.0), "~2 days");
    }
}
