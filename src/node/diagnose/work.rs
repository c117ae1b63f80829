//! Work that grows: the registered processes whose reductions per second keep rising over the
//! history while the node's input (bytes read from ports: sockets, files) is flat. Something
//! that accumulates (intervals nobody cancels, a list walked on every tick) makes the node do
//! more each second for the same traffic; no meter of memory or counts may show it yet.
//!
//! The node sends the cumulative reductions of its busiest registered processes with each
//! vitals sample (`os_sup_node_vitals`: at most 100, one `process_info` each, no walk of the
//! processes); [`WorkHistory`] keeps them (`node::work_readings`), and
//! [`assess`] reads each process's rate between readings. Processes that are not registered
//! are not followed.

use super::finding::{Arg, Finding, Kind, Next};
use super::history::Rising;
use super::holder_text::{in_function, label, made_line};
use super::holders::Holders;
use super::text::{bytes, duration_text, rate_text};
use crate::node::work_readings::{Reading, WorkHistory};
use std::time::Duration;

/// The least stretch of rates a rise is trusted from.
pub const MIN_SPAN: Duration = Duration::from_secs(60);
/// Work below this many reductions a second now is no finding, however it rose.
pub const MIN_RATE: f64 = 2000.0;
/// The least rise of the rate, in reductions a second per minute.
pub const FLOOR_PER_MINUTE: f64 = 1000.0;
/// Input that rose by this factor explains the work it feeds.
const INPUT_RISE: f64 = 1.5;
/// Input below this (bytes a second) is no traffic to speak of.
const INPUT_BYTES: f64 = 1024.0;

// Made here, where a rise is read; the record is `history`'s, whose assessment holds it.
impl Rising {
    /// `name`'s rise (`then`, `now`, `over`, `per_minute`, from [`rise`]), beside the node's
    /// input at both ends.
    fn of(
        name: String,
        (then, now, over, per_minute): (f64, f64, f64, f64),
        input: &[(f64, f64)],
    ) -> Self {
        Rising {
            name,
            then,
            now,
            over,
            per_minute,
            input_then: edge(input, true),
            input_now: edge(input, false),
        }
    }
}

/// The node's own work (all its reductions), when it rose steadily while the input stayed
/// flat: named `the node`.
pub fn assess_node(history: &WorkHistory) -> Option<Rising> {
    let points: Vec<&(u64, Reading)> = history.points.iter().collect();
    let input = rates(&points, |r| r.io_in);
    let series = rates(&points, |r| r.total);
    let rising = Rising::of(String::new(), rise(&series)?, &input);
    (!input_rose(&rising)).then_some(rising)
}

/// The reductions a second of each registered process both vitals samples read (`work`, the
/// busiest by their total), between them: the window's, busiest first.
pub fn over_window(start: &serde_json::Value, end: &serde_json::Value) -> Vec<(String, f64)> {
    let (Some(t0), Some(t1)) = (start["at_ms"].as_u64(), end["at_ms"].as_u64()) else {
        return Vec::new();
    };
    let secs = t1.saturating_sub(t0) as f64 / 1000.0;
    let (Some(before), Some(after)) = (start["work"].as_object(), end["work"].as_object()) else {
        return Vec::new();
    };
    let mut rates: Vec<(String, f64)> = after
        .iter()
        .filter(|_| secs > 0.0)
        .filter_map(|(name, r1)| {
            let (r0, r1) = (before.get(name)?.as_u64()?, r1.as_u64()?);
            (r1 >= r0).then(|| (name.clone(), (r1 - r0) as f64 / secs))
        })
        .collect();
    rates.sort_by(|a, b| b.1.total_cmp(&a.1));
    rates
}

/// The processes whose work rose steadily over the history while the input stayed flat, the
/// steepest first (at most three).
pub fn assess(history: &WorkHistory) -> Vec<Rising> {
    let points: Vec<&(u64, Reading)> = history.points.iter().collect();
    let Some((_, last)) = points.last() else {
        return Vec::new();
    };
    let input = rates(&points, |r| r.io_in);
    let mut rising: Vec<Rising> = last
        .reductions
        .iter()
        .filter_map(|(name, _)| {
            let of = |r: &Reading| r.reductions.iter().find(|(n, _)| n == name).map(|x| x.1);
            let series = rates(&points, of);
            rise(&series).map(|r| Rising::of(name.clone(), r, &input))
        })
        .filter(|r| !input_rose(r))
        .collect();
    rising.sort_by(|a, b| b.per_minute.total_cmp(&a.per_minute));
    rising.truncate(3);
    rising
}

/// The rate of a cumulative counter between consecutive readings (x: seconds, at the second
/// reading), from its last reset (a process restarted under the same name starts over).
fn rates(points: &[&(u64, Reading)], of: impl Fn(&Reading) -> Option<u64>) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for pair in points.windows(2) {
        let ((t0, r0), (t1, r1)) = (pair[0], pair[1]);
        match (of(r0), of(r1)) {
            (Some(a), Some(b)) if b >= a && t1 > t0 => {
                let dt = (t1 - t0) as f64 / 1000.0;
                out.push((*t1 as f64 / 1000.0, (b - a) as f64 / dt));
            }
            _ => out.clear(),
        }
    }
    out
}

/// The mean of the first (or last) two rates.
fn edge(series: &[(f64, f64)], first: bool) -> Option<f64> {
    let two: Vec<f64> = if first {
        series.iter().take(2).map(|p| p.1).collect()
    } else {
        series.iter().rev().take(2).map(|p| p.1).collect()
    };
    (!two.is_empty()).then(|| two.iter().sum::<f64>() / two.len() as f64)
}

/// `(then, now, over, per_minute)` when `series` rises steadily, enough and for long enough.
fn rise(series: &[(f64, f64)]) -> Option<(f64, f64, f64, f64)> {
    let (first, last) = (series.first()?.0, series.last()?.0);
    let over = last - first;
    if series.len() < 6 || over < MIN_SPAN.as_secs_f64() {
        return None;
    }
    let (slope, steady) = super::history::slope(series);
    // Still going on: the later half rises too (a step up that stays is no rise).
    let later = &series[series.len() / 2..];
    let (recent, _) = super::history::slope(later);
    let (then, now) = (edge(series, true)?, edge(series, false)?);
    let per_minute = slope * 60.0;
    let going_on = recent * 60.0 >= FLOOR_PER_MINUTE / 2.0;
    (steady
        && going_on
        && per_minute >= FLOOR_PER_MINUTE
        && now >= MIN_RATE
        && now >= 2.0 * then.max(1.0))
    .then_some((then, now, over, per_minute))
}

/// Traffic that grew is what the work follows: no finding.
fn input_rose(r: &Rising) -> bool {
    match (r.input_then, r.input_now) {
        (Some(then), Some(now)) => now > INPUT_BYTES && now >= INPUT_RISE * then.max(1.0),
        _ => false,
    }
}

/// A process whose work keeps rising while the input is flat, with the timers aimed at it
/// when there are.
pub(super) fn finding(r: &Rising, holders: &Holders) -> Finding {
    let input = match r.input_now {
        Some(read) => format!("the node's input flat ({}/s read)", bytes(read)),
        None => "the node's input flat".to_string(),
    };
    let head = format!(
        "work: the reductions of {} rose from {} to {} in {} (+{} a minute), with {input}: it \
         does more each second (more messages, or each costing more)",
        r.label(),
        work_rate(r.then),
        work_rate(r.now),
        duration_text(r.over).trim_start_matches('~'),
        work_rate(r.per_minute),
    );
    let mut line = String::new();
    // The node's own work, which no registered process explains: who was busiest in the
    // window.
    let busiest = r.name.is_empty().then(|| holders.work.first()).flatten();
    if let Some(b) = busiest {
        line.push_str(&format!(
            "; busiest in the window: {}{} at {}",
            label(b),
            in_function(b),
            work_rate(b.reductions_per_s.unwrap_or(0.0))
        ));
    }
    let who = busiest
        .and_then(|b| b.label.clone())
        .unwrap_or_else(|| r.label());
    // What drives it: the messages it received in the window, by shape, and their cost.
    let received = holders
        .work
        .iter()
        .find(|h| h.label.as_deref() == Some(who.as_str()))
        .and_then(|h| h.received.as_ref());
    if let Some(received) = received {
        line.push_str(&format!("; {}", received.text));
    }
    // Its work is its messages: the callback that takes them is the code to read.
    let handler = received.and_then(|r| r.target.clone());
    let timers = holders.timers.as_ref();
    let aimed = timers.and_then(|t| {
        t.targets
            .iter()
            .find(|h| h.label.as_deref() == Some(who.as_str()))
    });
    let mut next = None;
    if let (Some(aimed), Some(timers)) = (aimed, timers) {
        line.push_str(&format!(
            "; {} intervals of :timer message it",
            aimed.count.unwrap_or(0)
        ));
        next = timers
            .made_by
            .as_ref()
            .and_then(|made| made_line(made, false, &mut line));
    }
    let profile = |pid: Arg| {
        Next::new(
            "process_info",
            vec![("pid", pid), ("profile_ms", Arg::Int(1000))],
        )
    };
    let next = next
        .or_else(|| handler.map(|h| Next::new("source", vec![("target", Arg::Text(h))])))
        .unwrap_or_else(|| match busiest.and_then(|b| b.pid.clone()) {
            Some(pid) => profile(Arg::Pid(pid)),
            None if r.name.is_empty() => Next::new(
                "processes",
                vec![
                    ("sort_by", Arg::Text("reductions".into())),
                    ("window_ms", Arg::Int(5000)),
                ],
            ),
            None => profile(Arg::Text(r.label().trim_start_matches(':').into())),
        });
    let mut finding = Finding::new(Kind::Work, head, line, next);
    finding.facts.extend([
        ("reductions_per_s_before".to_string(), r.then),
        ("reductions_per_s".to_string(), r.now),
        ("over_ms".to_string(), r.over * 1000.0),
    ]);
    finding.holder = busiest.and_then(|b| b.pid.clone());
    if !r.name.is_empty() {
        finding.keys.names = vec![r.name.clone()];
    }
    finding
}

fn work_rate(rate: f64) -> String {
    rate_text(rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(rate: impl Fn(u64) -> u64, io: impl Fn(u64) -> u64) -> WorkHistory {
        let mut h = WorkHistory::default();
        let (mut reds, mut bytes) = (0, 0);
        for i in 0..20u64 {
            reds += rate(i) * 10;
            bytes += io(i) * 10;
            h.add(
                i * 10_000,
                Reading {
                    reductions: vec![("Elixir.Visits".into(), reds), ("idle".into(), i)],
                    io_in: Some(bytes),
                    total: Some(reds + 100 * i),
                },
            );
        }
        h
    }

    #[test]
    fn work_that_keeps_rising_on_flat_input_is_found_and_traffic_explains_its_own() {
        let found = assess(&history(|i| 500 + 300 * i, |_| 5000));
        assert_eq!(found.len(), 1, "{found:?}");
        let r = &found[0];
        assert_eq!(r.label(), "Visits");
        assert!(r.now > 5000.0 && r.then < 1000.0, "{r:?}");
        assert!((r.per_minute - 1800.0).abs() < 100.0, "{r:?}");
        let node = assess_node(&history(|i| 500 + 300 * i, |_| 5000)).unwrap();
        assert_eq!(node.label(), "the node");
        // The same work fed by traffic that rose with it.
        assert!(assess(&history(|i| 500 + 300 * i, |i| 5000 + 2000 * i)).is_empty());
        // Flat work, or a jump that stays, is no rise.
        assert!(assess(&history(|_| 9000, |_| 0)).is_empty());
        assert!(assess(&history(|i| if i < 10 { 100 } else { 9000 }, |_| 0)).is_empty());
    }
}
