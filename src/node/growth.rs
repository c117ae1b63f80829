//! The health model over a node's vital-signs history, for `diagnose`.
//!
//! A rate is the trend that is still going on, so each meter is read as its level: at each
//! sample, the lowest value it has from then on (what stayed, not what came and went). The
//! level climbs where the meter rose for good, by a quantum at least (a quarter of the meter's
//! growth floor, or more where the meter is noisier); climbs that come before the last one has
//! been quiet for [`PATIENCE`] times its pace are one rise (a ramp, a burst, a leak). Growth
//! goes on while the last rise keeps its pace, while two alike come close together (a heap
//! that grows by jumps), or while four or more keep coming at a cadence with lows that climb
//! from each fifth of their stretch to the next (a rise in steps, which the last minute alone
//! may not see). Its rate is the least-squares slope over the last [`TREND_WINDOW`] of it when
//! steady, else the level's climb over its time (or the steps' lows'); growth beyond the floor
//! of its kind gets its time to the meter's limit (or, for memory, to what the host has left).
//! Growth that has ended (a jump, a ramp that stopped) is a past [`Step`]: how much, how fast,
//! how long ago, with no rate and no time to a limit.

use super::vitals::{Meter, Sample, Unit};
use std::time::Duration;

/// The stretch of history a rate is measured over.
pub const TREND_WINDOW: Duration = Duration::from_secs(60);
/// The least history a rate is trusted from.
pub const TREND_MIN_SPAN: Duration = Duration::from_secs(15);
/// The stretch of history read for the rises of each meter.
pub const STEPS_WINDOW: Duration = Duration::from_secs(600);
/// A count at this share of its limit is reported whatever its rate.
pub const NEAR_LIMIT: f64 = 0.8;
/// A rise goes on while it has gone no longer without a climb than this many times the longest
/// it went without one before; rises come at a cadence while each gap between them is within
/// this factor of the next.
pub const PATIENCE: f64 = 3.0;

/// A meter's course: its rate while it grows, else the step it last rose by.
#[derive(Debug, Clone, PartialEq)]
pub struct Trend {
    pub meter: Meter,
    /// Per second, while it grows (0 when it does not).
    pub rate: f64,
    pub current: u64,
    pub limit: Option<u64>,
    /// Seconds until `limit` at `rate` (`None`: no limit, or not growing).
    pub to_limit: Option<f64>,
    /// Growing beyond noise, and still.
    pub growing: bool,
    /// The rise it last made, when nothing goes on (at least the meter's floor).
    pub step: Option<Step>,
}

/// A rise that has ended: the meter has been flat (within its noise) since.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// How much it rose.
    pub by: f64,
    /// Seconds it took, from the last sample before it.
    pub took: f64,
    /// Seconds since it ended.
    pub ago: f64,
}

/// What the history says: the meters that grow or near their limit, soonest exhaustion first;
/// the other meters' past steps; and how much history was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    pub concerns: Vec<Trend>,
    /// Meters that rose by a step that has ended and are no concern, the largest rise for its
    /// meter first.
    pub steps: Vec<Trend>,
    pub history: Duration,
    pub samples: usize,
    /// The node did not answer its last samples (its OS figures still came).
    pub unanswered: usize,
}

/// Reads `samples` (oldest first, the last [`STEPS_WINDOW`] or less); `memory_room` is what
/// the host has left (MemAvailable) to time memory growth against.
pub fn assess(samples: &[Sample], memory_room: Option<u64>) -> Assessment {
    let newest = samples.last().map(|s| s.at_ms).unwrap_or(0);
    let long: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.at_ms + STEPS_WINDOW.as_millis() as u64 >= newest)
        .collect();
    let history = match (samples.first(), samples.last()) {
        (Some(a), Some(b)) => Duration::from_millis(b.at_ms.saturating_sub(a.at_ms)),
        _ => Duration::ZERO,
    };
    let unanswered = samples.iter().rev().take_while(|s| !s.answered()).count();
    let (mut concerns, mut steps): (Vec<Trend>, Vec<Trend>) = Meter::ALL
        .iter()
        .filter_map(|&meter| trend(&long, meter, memory_room))
        .filter(|t| t.growing || near_limit(t) || t.step.is_some())
        .partition(|t| t.growing || near_limit(t));
    concerns.sort_by(|a, b| {
        let key = |t: &Trend| t.to_limit.unwrap_or(f64::INFINITY);
        key(a).total_cmp(&key(b))
    });
    let share = |t: &Trend| t.step.map_or(0.0, |s| s.by / t.current.max(1) as f64);
    steps.sort_by(|a, b| share(b).total_cmp(&share(a)));
    Assessment {
        concerns,
        steps,
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

/// The meter's growth over `samples` (the last [`STEPS_WINDOW`]) if it goes on, with its rate
/// and time to the limit; else the step it last rose by. `None` when it was not read.
fn trend(samples: &[&Sample], meter: Meter, memory_room: Option<u64>) -> Option<Trend> {
    let floor = meter.growth_floor()?;
    let points: Vec<(f64, f64)> = samples
        .iter()
        .filter_map(|s| s.get(meter).map(|v| (s.at_ms as f64 / 1000.0, v as f64)))
        .collect();
    let current = samples.iter().rev().find_map(|s| s.get(meter))?;
    let limit = meter
        .limit()
        .and_then(|l| samples.iter().rev().find_map(|s| s.get(l)));
    let per_window = |rate: f64| rate * TREND_WINDOW.as_secs_f64() >= floor;
    let level = Level::of(&points, floor);
    let rate = level
        .going()
        .into_iter()
        .find_map(|going| going.rate(&points, level.quantum))
        .filter(|&rate| rate > 0.0 && per_window(rate));
    let growing = rate.is_some();
    let rate = rate.unwrap_or(0.0);
    let room = match (limit, meter.unit()) {
        (Some(limit), _) => Some(limit.saturating_sub(current) as f64),
        (None, Unit::Bytes) => memory_room.map(|r| r as f64),
        (None, Unit::Count) => None,
    };
    let to_limit = room.filter(|_| growing).map(|room| room / rate);
    let step = (!growing)
        .then(|| level.past_step())
        .flatten()
        .filter(|step| step.by >= floor);
    Some(Trend {
        meter,
        rate,
        current,
        limit,
        to_limit,
        growing,
        step,
    })
}

/// A meter's level over a stretch of samples: at each, the lowest value from there on, once
/// each value that stands above both its neighbours alone is taken down to the higher of them
/// (a spike of one sample); and the rises it made.
struct Level {
    /// Its rises, oldest first.
    rises: Vec<Rise>,
    /// The first and the newest sample's time.
    first: f64,
    now: f64,
    /// The least climb that counts: a quarter of the meter's floor, or more where the meter
    /// falls back by more (its noise).
    quantum: f64,
}

/// One rise of the level: climbs (by a quantum each), each begun before the rise had ended.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rise {
    /// The last sample at the level it left, where a slope of it is read from.
    left: f64,
    /// When it began: the last sample nearer the level it left than the one it first reached.
    began: f64,
    /// Its last climb.
    ended: f64,
    from: f64,
    to: f64,
    /// The longest it went without a climb: between two of its climbs, or its first climb's
    /// own time (one sample for a jump).
    pace: f64,
}

/// What may go on, and how its rate is read.
enum Going {
    /// A rise, or two alike, since `since`: the least-squares slope of the last
    /// [`TREND_WINDOW`] of it when steady, else (when `average` is given) the level's climb
    /// over its time.
    Rising { since: f64, average: Option<f64> },
    /// Rises at a cadence since `since`: a rise in steps, if it is one (see `staircase`).
    Steps { since: f64 },
}

impl Going {
    /// Its rate over `points` (x: seconds, y: value), if it is growth at all.
    fn rate(&self, points: &[(f64, f64)], quantum: f64) -> Option<f64> {
        match *self {
            Going::Rising { since, average } => {
                let now = points.last()?.0;
                let from = since.max(now - TREND_WINDOW.as_secs_f64());
                let read: Vec<(f64, f64)> =
                    points.iter().copied().filter(|p| p.0 >= from).collect();
                let span = read.last()?.0 - read.first()?.0;
                if read.len() < 4 || span < TREND_MIN_SPAN.as_secs_f64() {
                    return None;
                }
                match slope(&read) {
                    (rate, true) => Some(rate),
                    _ => average,
                }
            }
            Going::Steps { since } => {
                let read: Vec<(f64, f64)> =
                    points.iter().copied().filter(|p| p.0 >= since).collect();
                staircase(&read, quantum)
            }
        }
    }
}

impl Level {
    /// The level of `points` (x: seconds, y: value) of a meter of growth floor `floor`.
    fn of(points: &[(f64, f64)], floor: f64) -> Self {
        let n = points.len();
        let value = |i: usize| points[i].1;
        // A value above both neighbours is a spike of one sample (the newest, above the one
        // before, is not trusted until the next).
        let clipped: Vec<f64> = (0..n)
            .map(|i| {
                let before = i.checked_sub(1).map(value);
                let after = (i + 1 < n).then(|| value(i + 1));
                let neighbours = match (before, after) {
                    (Some(a), Some(b)) => a.max(b),
                    (Some(a), None) | (None, Some(a)) => a,
                    (None, None) => value(i),
                };
                value(i).min(neighbours)
            })
            .collect();
        let mut level = clipped.clone();
        for i in (0..n.saturating_sub(1)).rev() {
            level[i] = level[i].min(level[i + 1]);
        }
        let noise = clipped
            .iter()
            .zip(&level)
            .map(|(v, l)| v - l)
            .fold(0.0, f64::max);
        let quantum = (floor / 4.0).max(noise);
        let mut rises: Vec<Rise> = Vec::new();
        let mut base = level.first().copied().unwrap_or(0.0);
        for i in 1..n {
            let (at, to) = (points[i].0, level[i]);
            if to - base < quantum {
                continue;
            }
            // The last sample before this climb where `holds`.
            let last_where = |holds: &dyn Fn(usize) -> bool| {
                (0..i)
                    .rev()
                    .find(|&j| holds(j))
                    .map_or(points[i - 1].0, |j| points[j].0)
            };
            let began = last_where(&|j| level[j] - base <= to - level[j]);
            let left = last_where(&|j| level[j] <= base);
            match rises.last_mut() {
                // The rise had not ended when this climb began: it goes on.
                Some(rise) if began - rise.ended <= PATIENCE * rise.pace => {
                    rise.pace = rise.pace.max(at - rise.ended);
                    (rise.ended, rise.to) = (at, to);
                }
                _ => rises.push(Rise {
                    left,
                    began,
                    ended: at,
                    from: base,
                    to,
                    pace: at - began,
                }),
            }
            base = to;
        }
        Self {
            rises,
            first: points.first().map_or(0.0, |p| p.0),
            now: points.last().map_or(0.0, |p| p.0),
            quantum,
        }
    }

    /// What of its growth may go on, the latest first (empty: nothing goes on).
    ///
    /// Its last rise goes on while it has gone no longer without a climb than [`PATIENCE`]
    /// times the longest it went without one before (a jump from flat took one sample, and is
    /// over once the next few are flat). When it is as large as the rise before, or nearly,
    /// and came after it within [`PATIENCE`] times as long as it has lasted, the two may be
    /// one growth (a heap that grows by jumps). Rises go on in steps while they
    /// come at a cadence: four or more, each gap within [`PATIENCE`] times the next, and the
    /// last no further from now than [`PATIENCE`] times the longest of them (three rises
    /// may be three unrelated events: a start, a deploy, a cache filled).
    fn going(&self) -> Vec<Going> {
        let quiet = |rise: &Rise| self.now - rise.ended;
        let size = |rise: &Rise| rise.to - rise.from;
        // The end of the rise before the `n`th last, or the first sample: flat before it.
        let flat_before = |n: usize| {
            let i = self.rises.len().checked_sub(n + 1);
            i.map_or(self.first, |i| self.rises[i].ended)
        };
        let mut going = Vec::new();
        if let [.., last] = self.rises[..] {
            let lasted = self.now - last.began;
            if quiet(&last) <= PATIENCE * last.pace {
                // The level's climb over its time, once that is long enough to tell.
                let average =
                    (lasted >= TREND_MIN_SPAN.as_secs_f64()).then(|| size(&last) / lasted);
                going.push(Going::Rising {
                    since: last.left,
                    average,
                });
                if let [.., before, _] = self.rises[..] {
                    let alike = size(&last) * PATIENCE >= size(&before);
                    if alike && last.began - before.ended <= PATIENCE * lasted {
                        going.push(Going::Rising {
                            since: flat_before(2),
                            average: None,
                        });
                    }
                }
            }
        }
        // The last gaps between rises that are in step, each within PATIENCE times the next.
        let gaps: Vec<f64> = (self.rises.windows(2))
            .map(|w| w[1].ended - w[0].ended)
            .collect();
        let in_step = (gaps.windows(2).rev())
            .take_while(|w| w[0] <= PATIENCE * w[1] && w[1] <= PATIENCE * w[0])
            .count();
        let cadence = &gaps[gaps.len().saturating_sub(in_step + 1)..];
        let longest = cadence.iter().copied().fold(0.0, f64::max);
        if let (3.., Some(last)) = (cadence.len(), self.rises.last()) {
            if quiet(last) <= PATIENCE * longest {
                going.push(Going::Steps {
                    since: flat_before(cadence.len() + 1),
                });
            }
        }
        going
    }

    /// Its last rise, when nothing goes on, as a past step.
    fn past_step(&self) -> Option<Step> {
        if !self.going().is_empty() {
            return None;
        }
        let rise = self.rises.last()?;
        Some(Step {
            by: rise.to - rise.from,
            took: rise.ended - rise.began,
            ago: self.now - rise.ended,
        })
    }
}

/// The rate of a rise in steps over `points` (x: seconds, y: value), if it is one: the lowest
/// value of each fifth of them climbs by at least `quantum` (the meter's least climb, over its
/// noise) in at least three of the four steps between fifths and never falls. A process's heap
/// grows by half each time it is full, so a leak in one large process shows as jumps a minute
/// or more apart, which the last minute alone may not see; one jump (a cache filled once) or a
/// sawtooth (memory freed again) is not a rise in steps.
fn staircase(points: &[(f64, f64)], quantum: f64) -> Option<f64> {
    let (first, last) = (points.first()?.0, points.last()?.0);
    if last - first < TREND_MIN_SPAN.as_secs_f64() {
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
    let climbs = lows
        .windows(2)
        .filter(|w| w[1].1 - w[0].1 >= quantum)
        .count();
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
    fn a_staircase_has_lows_that_climb_by_a_quantum_and_never_fall() {
        // A step of 10 every 60 s over 5 minutes: its rate is the lows' rise over their span.
        let steps: Vec<(f64, f64)> = (0..=300)
            .step_by(2)
            .map(|t| (t as f64, 10.0 * (t / 60) as f64))
            .collect();
        let rate = staircase(&steps, 1.0).expect("a rise in steps");
        assert!((rate - 10.0 / 60.0).abs() < 0.02, "{rate}");
        // Over its first two minutes, the lows of the fifths climb once only.
        let short: Vec<(f64, f64)> = steps.iter().copied().filter(|p| p.0 <= 120.0).collect();
        assert_eq!(staircase(&short, 1.0), None);
        // Climbs smaller than the quantum (noise) are no steps.
        assert_eq!(staircase(&steps, 11.0), None);
        // Lows that fall once (memory freed) are no staircase.
        let saw: Vec<(f64, f64)> = (0..=300)
            .step_by(2)
            .map(|t| (t as f64, 10.0 * ((t / 60) % 3) as f64))
            .collect();
        assert_eq!(staircase(&saw, 1.0), None);
        assert_eq!(staircase(&[], 1.0), None);
    }

    /// Processes over `seconds`, one sample each 2 s, from `f(t)` (t in seconds), against a
    /// limit of 2,097,152.
    fn processes(seconds: u64, f: impl Fn(u64) -> u64) -> Vec<Sample> {
        (0..=seconds / 2)
            .map(|i| {
                let mut s = Sample::new(1_000_000 + i * 2000);
                s.set(Meter::Processes, f(i * 2));
                s.set(Meter::ProcessLimit, 2_097_152);
                s
            })
            .collect()
    }

    /// The processes' course in `samples`.
    fn course(samples: &[Sample]) -> (Option<Trend>, Option<Step>) {
        let a = assess(samples, None);
        let concern = a.concerns.into_iter().find(|t| t.meter == Meter::Processes);
        let step = a.steps.iter().find(|t| t.meter == Meter::Processes);
        (concern, step.and_then(|t| t.step))
    }

    #[test]
    fn a_single_step_then_flat_is_a_past_step_not_a_trend() {
        // 50,000 processes spawned at once at 20 s and kept: a least-squares slope over the
        // last minute alone calls 19 to 41 s after it a steady rise.
        for now in [30, 40, 60, 80] {
            let samples = processes(now, |t| if t < 20 { 300 } else { 50_300 });
            let (concern, step) = course(&samples);
            assert_eq!(concern, None, "{now} s");
            let step = step.expect("the past step");
            assert_eq!(step.by, 50_000.0);
            assert!((step.took - 2.0).abs() < 0.01, "{step:?}");
            assert!((step.ago - (now - 20) as f64).abs() < 0.01, "{step:?}");
        }
        // The same with churn: ±1000 processes that come and go, after the jump and before.
        let churn = |t: u64| [0, 700, 1400, 300, 1900, 1000][(t / 2 % 6) as usize];
        let samples = processes(90, |t| if t < 20 { 300 } else { 50_300 } + churn(t));
        let (concern, step) = course(&samples);
        assert_eq!(concern, None);
        assert!(step.is_some_and(|s| s.by > 45_000.0), "{step:?}");
    }

    #[test]
    fn steady_growth_is_a_trend_with_its_rate() {
        let samples = processes(60, |t| 300 + 72 * t);
        let (concern, step) = course(&samples);
        let trend = concern.expect("a trend");
        assert!(trend.growing && step.is_none());
        assert!((trend.rate - 72.0).abs() < 0.01, "{trend:?}");
        let left = (2_097_152.0 - trend.current as f64) / 72.0;
        assert!((trend.to_limit.unwrap() - left).abs() < 1.0, "{trend:?}");
        // With churn of its own: still the same rate, near enough.
        let churn = |t: u64| [0, 40, 10, 30][(t / 2 % 4) as usize];
        let (concern, _) = course(&processes(60, |t| 300 + 72 * t + churn(t)));
        let trend = concern.expect("a trend");
        assert!((trend.rate - 72.0).abs() < 2.0, "{trend:?}");
    }

    #[test]
    fn steps_that_keep_coming_are_a_trend() {
        // A leak in bursts: 500 processes every 20 s, once four have come, read right after
        // a burst and between two.
        for now in [82, 90, 98, 118] {
            let samples = processes(now, |t| 300 + 500 * (t / 20));
            let (concern, _) = course(&samples);
            let trend = concern.unwrap_or_else(|| panic!("{now} s: bursts that go on"));
            assert!((trend.rate - 25.0).abs() < 6.0, "{now} s: {trend:?}");
            assert!(trend.to_limit.is_some());
        }
        // A heap that fills and then grows by half, at 300 KB/s: flat between its jumps.
        const MB: f64 = 1024.0 * 1024.0;
        let heap = |t: u64| {
            let live = 5.0 * MB + 300.0 * 1024.0 * t as f64;
            let mut size = 6.0 * MB;
            while size < live {
                size *= 1.5;
            }
            size as u64
        };
        for minutes in [1, 2, 4, 10] {
            let samples = memory(minutes, heap);
            let a = assess(&samples, Some(1 << 34));
            let growth = a.concerns.first();
            assert!(
                growth.is_some_and(|t| t.meter == Meter::MemoryProcesses && t.growing),
                "{minutes} min: {a:?}"
            );
        }
    }

    #[test]
    fn growth_that_stopped_is_a_past_step_however_long_it_went() {
        // A ramp of 1,000,000 processes over 30 s, then flat with a few more now and then
        // (far below any rate), two minutes later: once read as a rise in steps.
        let ramp = |t: u64| match t {
            0..60 => 300,
            60..90 => 300 + (t - 60) * 33_333,
            _ => 1_000_300 + (t - 90) / 40,
        };
        let samples = processes(210, ramp);
        let (concern, step) = course(&samples);
        assert_eq!(concern, None);
        let step = step.expect("the past step");
        assert!(
            step.by > 900_000.0 && (28.0..=32.0).contains(&step.took),
            "{step:?}"
        );
        assert!((step.ago - 120.0).abs() < 2.0, "{step:?}");
        // A steady rise for three minutes that stopped 40 s ago.
        let samples = processes(220, |t| 300 + 50 * t.min(180));
        let (concern, step) = course(&samples);
        assert_eq!(concern, None);
        assert!(step.is_some_and(|s| (s.ago - 40.0).abs() < 3.0), "{step:?}");
        // A step nine minutes ago, in ten minutes of history: past, and said so.
        let samples = processes(600, |t| if t < 60 { 300 } else { 20_300 });
        let (concern, step) = course(&samples);
        assert_eq!(concern, None);
        assert!(
            step.is_some_and(|s| (s.ago - 540.0).abs() < 2.0),
            "{step:?}"
        );
        // A rise below the floor is not even a step.
        let samples = processes(120, |t| if t < 60 { 300 } else { 340 });
        assert_eq!(course(&samples), (None, None));
    }

    #[test]
    fn a_small_rise_after_a_step_is_not_the_steps_rate() {
        // The step 40 s ago, then 4 MB more in the last two samples (the diagnosis's own
        // work, say): the growth that goes on is that rise alone, too short for a rate.
        const MB: u64 = 1 << 20;
        let samples = memory(2, |t| match t {
            0..78 => 40 * MB,
            78..116 => 170 * MB,
            _ => 174 * MB,
        });
        let a = assess(&samples, Some(1 << 34));
        assert!(a.concerns.is_empty(), "{a:?}");
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
