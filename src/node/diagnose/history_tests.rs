//! Unit tests of the health model: histories made by hand, read as `diagnose` reads them.

use super::super::text::duration_text;
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
