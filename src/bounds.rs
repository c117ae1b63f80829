//! Every number a caller passes (how many, how long, how deep) and the range it is held to: the
//! one place where out-of-range values are decided.
//!
//! The rule: **a tuning bound is clamped** into its range (asking for 500 processes lists the
//! 100 allowed; a timeout of 0 ms becomes 1 ms; `u64::MAX` ms becomes the longest allowed), so
//! a caller never has to retry for a number that was only too generous. **A required safety
//! bound is refused** out of range: a trace session's `max_events` is the caller's own promise
//! of how much a session may collect, so `0` or a huge value is an error naming the range, not
//! silently something else. Values that identify rather than bound (an arity, a sequence
//! number to read from) are passed as given and checked where they are used.
//!
//! The tools' documentation states the same ranges (`default 10, max 100`). The helper on the
//! node holds what it is sent to the same ranges again (a request built elsewhere is bounded
//! too), read from `erlang/os_sup_bounds.hrl`, which is generated from [`ON_THE_NODE`] and
//! [`DEFAULTS_ON_THE_NODE`] by `build.rs` (any cargo build after a change here writes it;
//! `scripts/build_helper.sh` then compiles it into `priv/`).
//!
//! Each bound's doc starts with the tools it bounds (`` `ets`: … ``; `tests/tool_homes.rs`
//! counts this file among their homes). A bound stays here even when one tool uses it: the
//! node applies most of them again, and its header is generated from the one list
//! [`ON_THE_NODE`]; the others are applied below the MCP layer (`node`, `helper`), which
//! cannot reach into a tool's slice.

use std::time::Duration;

/// An inclusive range a number is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub min: u64,
    pub max: u64,
}

impl Bound {
    const fn new(min: u64, max: u64) -> Self {
        Self { min, max }
    }

    /// `value` held to the range (the clamping rule).
    pub fn clamp(self, value: u64) -> u64 {
        value.clamp(self.min, self.max)
    }

    /// Milliseconds held to the range, as a duration.
    pub fn clamp_ms(self, value: Duration) -> Duration {
        let ms = u64::try_from(value.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(self.clamp(ms))
    }

    /// `value` if in range, else an error naming `what` and the range (the refusing rule).
    pub fn check(self, what: &str, value: u64) -> Result<u64, String> {
        if (self.min..=self.max).contains(&value) {
            Ok(value)
        } else {
            Err(format!(
                "{what} must be {}..={}, got {value}",
                self.min, self.max
            ))
        }
    }
}

// Introspection (clamped).
/// `supervision_tree`: levels below the root.
pub const TREE_DEPTH: Bound = Bound::new(1, 20);
/// `supervision_tree`: children listed per supervisor.
pub const TREE_MAX_CHILDREN: Bound = Bound::new(1, 1000);
/// `processes`: processes listed.
pub const PROCESSES_LIMIT: Bound = Bound::new(1, 100);
/// `processes`: the sampling window in ms.
pub const PROCESSES_WINDOW_MS: Bound = Bound::new(1, 10_000);
/// `process_info`: queued messages shown.
pub const PROCESS_MESSAGES: Bound = Bound::new(0, 20);
/// `process_info`: the longest queue read and counted by shape.
pub const PROCESS_MAX_MESSAGES: Bound = Bound::new(1, 100_000);
/// `process_info`: how long its stack is sampled for a profile, in ms (0: none).
pub const PROCESS_PROFILE_MS: Bound = Bound::new(0, 5000);
/// `get_state`: how long the process gets to answer, in ms.
pub const GET_STATE_TIMEOUT_MS: Bound = Bound::new(1, 10_000);
/// `logs`: lines shown (the newest), of those the filters keep.
pub const LOGS_TAIL: Bound = Bound::new(0, 2000);
/// `ets`: tables listed, or rows sampled from one table (the node caps the sample at 100).
pub const ETS_LIMIT: Bound = Bound::new(1, 200);
/// `ports`: ports listed per kind.
pub const PORTS_LIMIT: Bound = Bound::new(1, 50);
/// `ports`: ports listed per kind when the caller gives no limit.
pub const PORTS_LIMIT_DEFAULT: u64 = 5;
/// `waits`: the sampling window in ms (0: none).
pub const WAITS_WINDOW_MS: Bound = Bound::new(0, 5000);
/// `waits`: chains shown.
pub const WAITS_LIMIT: Bound = Bound::new(1, 20);
/// `diagnose`: the sampling window in ms.
pub const DIAGNOSE_WINDOW_MS: Bound = Bound::new(100, 5000);
/// `diagnose`: the sampling window when the caller gives none.
pub const DIAGNOSE_WINDOW_DEFAULT_MS: u64 = 1000;
/// `waits`: the sampling window when the caller gives none.
pub const WAITS_WINDOW_DEFAULT_MS: u64 = 500;
/// `waits`: chains shown when the caller gives no limit.
pub const WAITS_LIMIT_DEFAULT: u64 = 5;
/// `get_state`: how long the process gets to answer when the caller gives no timeout.
pub const GET_STATE_TIMEOUT_DEFAULT_MS: u64 = 2000;
/// `process_info`: the longest queue read when the caller gives none.
pub const PROCESS_MAX_MESSAGES_DEFAULT: u64 = 10_000;
/// `callers`: functions listed when the caller gives no limit.
pub const CALLERS_LIMIT_DEFAULT: u64 = 50;
/// `find`: hits listed when the caller gives no limit.
pub const FIND_LIMIT_DEFAULT: u64 = 30;
/// `recompile`: how long compile, load and watch may take when the caller gives no timeout.
pub const RECOMPILE_TIMEOUT_DEFAULT_MS: u64 = 60_000;
/// `recompile`: how long the applications are watched when the caller gives no time.
pub const RECOMPILE_WATCH_DEFAULT_MS: u64 = 500;
/// `callers`: functions listed.
pub const CALLERS_LIMIT: Bound = Bound::new(1, 500);
/// `find`: hits listed.
pub const FIND_LIMIT: Bound = Bound::new(1, 200);
/// `recompile`: how long the compile may take, in ms.
pub const RECOMPILE_TIMEOUT_MS: Bound = Bound::new(1, 120_000);
/// `recompile`: how long the applications are watched after the load, in ms.
pub const RECOMPILE_WATCH_MS: Bound = Bound::new(0, 10_000);

// Tracing.
/// `trace`, `trace_messages`: a session's calls or events: required, and **refused** out of
/// range.
pub const TRACE_MAX_EVENTS: Bound = Bound::new(1, 10_000);
/// `trace`, `trace_messages`: a session's duration in ms (clamped).
pub const TRACE_DURATION_MS: Bound = Bound::new(1, 60_000);
/// `trace`, `trace_messages`: a session's rate cap, calls or events a second (clamped).
pub const TRACE_RATE: Bound = Bound::new(1, 1_000_000);
/// `trace_results`: calls or events returned (clamped).
pub const TRACE_RESULTS_LIMIT: Bound = Bound::new(1, 1000);
/// `system_monitor`: long GC and long schedule thresholds in ms (clamped).
pub const MONITOR_MS: Bound = Bound::new(1, 3_600_000);
/// `system_monitor`: large heap threshold in words (clamped).
pub const MONITOR_HEAP_WORDS: Bound = Bound::new(1000, 1 << 50);

// Evaluation and lifecycle (clamped).
/// `eval`: how long the code may run, in ms.
pub const EVAL_TIMEOUT_MS: Bound = Bound::new(1, 60_000);
/// `wait_ready`: how long to wait, in ms.
pub const WAIT_READY_MS: Bound = Bound::new(1, 600_000);
/// `start`: how long to wait for the node to be ready, in ms.
pub const START_TIMEOUT_MS: Bound = Bound::new(1, 3_600_000);
/// `start`: the window for `max_restarts`, in ms.
pub const RESTART_PERIOD_MS: Bound = Bound::new(1, u64::MAX);
/// `start`: the first restart delay, in ms.
pub const BACKOFF_MS: Bound = Bound::new(0, 600_000);
/// `start`: the cap on the restart delay, in ms.
pub const MAX_BACKOFF_MS: Bound = Bound::new(0, 3_600_000);
/// `mix`: how long a one-shot task may run, in ms.
pub const MIX_TIMEOUT_MS: Bound = Bound::new(1, 1_800_000);

/// The bounds the helper applies too, by the name `erlang/os_sup_bounds.hrl` gives them
/// (`?NAME_MIN`, `?NAME_MAX`).
pub const ON_THE_NODE: &[(&str, Bound)] = &[
    ("TREE_DEPTH", TREE_DEPTH),
    ("TREE_MAX_CHILDREN", TREE_MAX_CHILDREN),
    ("PROCESSES_LIMIT", PROCESSES_LIMIT),
    ("PROCESSES_WINDOW_MS", PROCESSES_WINDOW_MS),
    ("PROCESS_MESSAGES", PROCESS_MESSAGES),
    ("PROCESS_MAX_MESSAGES", PROCESS_MAX_MESSAGES),
    ("PROCESS_PROFILE_MS", PROCESS_PROFILE_MS),
    ("GET_STATE_TIMEOUT_MS", GET_STATE_TIMEOUT_MS),
    ("ETS_LIMIT", ETS_LIMIT),
    ("PORTS_LIMIT", PORTS_LIMIT),
    ("WAITS_WINDOW_MS", WAITS_WINDOW_MS),
    ("WAITS_LIMIT", WAITS_LIMIT),
    ("DIAGNOSE_WINDOW_MS", DIAGNOSE_WINDOW_MS),
    ("CALLERS_LIMIT", CALLERS_LIMIT),
    ("FIND_LIMIT", FIND_LIMIT),
    ("RECOMPILE_TIMEOUT_MS", RECOMPILE_TIMEOUT_MS),
    ("RECOMPILE_WATCH_MS", RECOMPILE_WATCH_MS),
    ("TRACE_MAX_EVENTS", TRACE_MAX_EVENTS),
    ("TRACE_DURATION_MS", TRACE_DURATION_MS),
    ("TRACE_RATE", TRACE_RATE),
    ("TRACE_RESULTS_LIMIT", TRACE_RESULTS_LIMIT),
    ("MONITOR_MS", MONITOR_MS),
    ("MONITOR_HEAP_WORDS", MONITOR_HEAP_WORDS),
];

/// The defaults the helper applies too, by their name in `erlang/os_sup_bounds.hrl`.
pub const DEFAULTS_ON_THE_NODE: &[(&str, u64)] = &[
    ("DIAGNOSE_WINDOW_DEFAULT_MS", DIAGNOSE_WINDOW_DEFAULT_MS),
    ("WAITS_WINDOW_DEFAULT_MS", WAITS_WINDOW_DEFAULT_MS),
    ("WAITS_LIMIT_DEFAULT", WAITS_LIMIT_DEFAULT),
    ("GET_STATE_TIMEOUT_DEFAULT_MS", GET_STATE_TIMEOUT_DEFAULT_MS),
    ("PROCESS_MAX_MESSAGES_DEFAULT", PROCESS_MAX_MESSAGES_DEFAULT),
    ("CALLERS_LIMIT_DEFAULT", CALLERS_LIMIT_DEFAULT),
    ("FIND_LIMIT_DEFAULT", FIND_LIMIT_DEFAULT),
    ("PORTS_LIMIT_DEFAULT", PORTS_LIMIT_DEFAULT),
    ("RECOMPILE_TIMEOUT_DEFAULT_MS", RECOMPILE_TIMEOUT_DEFAULT_MS),
    ("RECOMPILE_WATCH_DEFAULT_MS", RECOMPILE_WATCH_DEFAULT_MS),
];

/// `erlang/os_sup_bounds.hrl` as [`ON_THE_NODE`] and [`DEFAULTS_ON_THE_NODE`] say: `build.rs`
/// writes it on every build that follows a change to this file.
pub fn erlang_header() -> String {
    let mut out = String::from(
        "%% Generated from src/bounds.rs (ON_THE_NODE, DEFAULTS_ON_THE_NODE) by build.rs:\n\
         %% do not edit; any cargo build after a change there writes it again, then\n\
         %% scripts/build_helper.sh compiles it into priv/.\n",
    );
    for (name, bound) in ON_THE_NODE {
        out += &format!("-define({name}_MIN, {}).\n", bound.min);
        out += &format!("-define({name}_MAX, {}).\n", bound.max);
    }
    for (name, value) in DEFAULTS_ON_THE_NODE {
        out += &format!("-define({name}, {value}).\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helper_applies_the_same_bounds() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/erlang/os_sup_bounds.hrl");
        let found = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            found == erlang_header(),
            "erlang/os_sup_bounds.hrl differs from src/bounds.rs: build.rs writes it (any cargo \
             build), then scripts/build_helper.sh"
        );
    }

    #[test]
    fn clamps_tuning_bounds_and_refuses_required_ones() {
        assert_eq!(PROCESSES_LIMIT.clamp(500), 100);
        assert_eq!(PROCESSES_LIMIT.clamp(0), 1);
        assert_eq!(
            EVAL_TIMEOUT_MS.clamp_ms(Duration::MAX),
            Duration::from_secs(60)
        );
        assert_eq!(
            EVAL_TIMEOUT_MS.clamp_ms(Duration::ZERO),
            Duration::from_millis(1)
        );
        assert_eq!(TRACE_MAX_EVENTS.check("max_events", 5), Ok(5));
        let refused = TRACE_MAX_EVENTS.check("max_events", 0).unwrap_err();
        assert!(
            refused.contains("max_events must be 1..=10000"),
            "{refused}"
        );
    }
}
