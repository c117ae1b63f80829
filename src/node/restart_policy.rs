//! The restart arithmetic of a supervised child, as OTP's supervisor keeps it: at most
//! `max_restarts` automatic restarts within a sliding `period`, each after a backoff that
//! doubles with every restart still inside the window, up to `max_backoff`. Pure: the caller
//! passes the clock in, so it is tested without waiting.

use super::child_config::RestartLimits;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// What to do about one crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Restart after this delay.
    Restart { backoff: Duration },
    /// Too many restarts: `recent` of them happened within the period already.
    GiveUp { recent: u32 },
}

/// Restart times inside the current window.
#[derive(Debug, Default)]
pub struct Intensity {
    recent: VecDeque<Instant>,
}

impl Intensity {
    /// Records a crash at `now` and decides; a restart counts from `now`.
    pub fn on_crash(&mut self, now: Instant, limits: &RestartLimits) -> Decision {
        self.recent
            .retain(|t| now.saturating_duration_since(*t) < limits.period);
        let recent = self.recent.len() as u32;
        if recent >= limits.max_restarts {
            return Decision::GiveUp { recent };
        }
        self.recent.push_back(now);
        let backoff = limits
            .backoff
            .saturating_mul(1 << recent.min(16))
            .min(limits.max_backoff);
        Decision::Restart { backoff }
    }

    /// A manual start or restart begins a new count.
    pub fn reset(&mut self) {
        self.recent.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_restarts: u32) -> RestartLimits {
        RestartLimits {
            max_restarts,
            period: Duration::from_secs(60),
            backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(1),
            ..RestartLimits::default()
        }
    }

    #[test]
    fn backoff_doubles_up_to_its_cap_then_the_limit_gives_up() {
        let limits = limits(4);
        let mut intensity = Intensity::default();
        let t0 = Instant::now();
        let backoffs: Vec<Decision> = (0..5)
            .map(|i| intensity.on_crash(t0 + Duration::from_secs(i), &limits))
            .collect();
        let ms = |ms| Decision::Restart {
            backoff: Duration::from_millis(ms),
        };
        assert_eq!(
            backoffs,
            [
                ms(250),
                ms(500),
                ms(1000),
                ms(1000),
                Decision::GiveUp { recent: 4 }
            ]
        );
    }

    #[test]
    fn restarts_older_than_the_period_no_longer_count() {
        let limits = limits(2);
        let mut intensity = Intensity::default();
        let t0 = Instant::now();
        assert!(matches!(
            intensity.on_crash(t0, &limits),
            Decision::Restart { .. }
        ));
        assert!(matches!(
            intensity.on_crash(t0 + Duration::from_secs(30), &limits),
            Decision::Restart { .. }
        ));
        assert_eq!(
            intensity.on_crash(t0 + Duration::from_secs(59), &limits),
            Decision::GiveUp { recent: 2 }
        );
        // At t0 + 61 s the first restart has left the window: one recent, backoff doubled once.
        assert_eq!(
            intensity.on_crash(t0 + Duration::from_secs(61), &limits),
            Decision::Restart {
                backoff: Duration::from_millis(500)
            }
        );
    }

    #[test]
    fn zero_max_restarts_never_restarts_and_reset_starts_over() {
        let mut intensity = Intensity::default();
        let now = Instant::now();
        assert_eq!(
            intensity.on_crash(now, &limits(0)),
            Decision::GiveUp { recent: 0 }
        );
        let limits = limits(1);
        assert!(matches!(
            intensity.on_crash(now, &limits),
            Decision::Restart { .. }
        ));
        assert!(matches!(
            intensity.on_crash(now, &limits),
            Decision::GiveUp { .. }
        ));
        intensity.reset();
        assert!(matches!(
            intensity.on_crash(now, &limits),
            Decision::Restart { .. }
        ));
    }
}
