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

use crate::node::vitals::{Meter, Sample, Unit};
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
    /// Its last rise: while it grows, the rise so far (which becomes its past step if the
    /// window sees it end); else the step it last rose by (at least the meter's floor).
    pub step: Option<Step>,
}

impl Trend {
    /// The step it last rose by, when it no longer grows (while it grows, `step` is the rise
    /// so far, no past step).
    pub fn past_step(&self) -> Option<Step> {
        self.step.filter(|_| !self.growing)
    }
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
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Assessment {
    pub concerns: Vec<Trend>,
    /// Meters that rose by a step that has ended and are no concern, the largest rise for its
    /// meter first.
    pub steps: Vec<Trend>,
    pub history: Duration,
    pub samples: usize,
    /// The node did not answer its last samples (its OS figures still came).
    pub unanswered: usize,
    /// Processes whose work keeps rising while the input is flat ([`super::work`]).
    pub work: Vec<Rising>,
    /// The node's own work, when it keeps rising while the input is flat.
    pub work_node: Option<Rising>,
    /// How fast the memory the processes keep rose over the last minutes (bytes a second;
    /// its level, what stayed), whatever its floor: what decides whether a growth of all
    /// memory is in the processes. `None` without two samples a minute apart.
    pub processes_rise: Option<f64>,
}

/// A process whose work keeps rising: its rate then and now (reductions a second), over how
/// long, its steady rise a minute, and the node's input then and now (bytes a second).
#[derive(Debug, Clone, PartialEq)]
pub struct Rising {
    /// Its registered name, as the node wrote it (`Elixir.Ailments.Visits`).
    pub name: String,
    pub then: f64,
    pub now: f64,
    pub over: f64,
    pub per_minute: f64,
    pub input_then: Option<f64>,
    pub input_now: Option<f64>,
}

impl Rising {
    /// Its name as a person reads it (`Ailments.Visits`, `:timer_server`, `the node`).
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            return "the node".to_string();
        }
        match self.name.strip_prefix("Elixir.") {
            Some(module) => module.to_string(),
            None => format!(":{}", self.name),
        }
    }
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
        work: Vec::new(),
        work_node: None,
        processes_rise: rise_per_s(&long, Meter::MemoryProcesses),
    }
}

/// The rise of `meter`'s level (at each sample, the lowest value from then on) from the first
/// of `samples` to the last, a second; `None` over less than [`TREND_MIN_SPAN`].
fn rise_per_s(samples: &[&Sample], meter: Meter) -> Option<f64> {
    let points: Vec<(u64, u64)> = samples
        .iter()
        .filter_map(|s| s.get(meter).map(|v| (s.at_ms, v)))
        .collect();
    let (&(first_ms, _), &(last_ms, last)) = (points.first()?, points.last()?);
    let span = Duration::from_millis(last_ms.saturating_sub(first_ms));
    if span < TREND_MIN_SPAN {
        return None;
    }
    let first_level = points.iter().map(|&(_, v)| v).min()?;
    Some(last.saturating_sub(first_level) as f64 / span.as_secs_f64())
}

pub(super) fn near_limit(t: &Trend) -> bool {
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
    let step = match growing {
        true => level.last_rise(),
        false => level.ended_step().filter(|step| step.by >= floor),
    };
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
    fn ended_step(&self) -> Option<Step> {
        match self.going().is_empty() {
            true => self.last_rise(),
            false => None,
        }
    }

    /// Its last rise, as a step.
    fn last_rise(&self) -> Option<Step> {
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
pub(super) fn slope(points: &[(f64, f64)]) -> (f64, bool) {
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

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
