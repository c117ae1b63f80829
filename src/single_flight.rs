//! One piece of work shared by everyone who needs it meanwhile: the first caller starts it in a
//! task of its own, every caller (the first included) waits for its outcome with its own
//! deadline. A caller that gives up does not cancel the work; the outcome is kept for anyone
//! still holding the [`Flight`], and whoever comes after it finished starts a new one.
//!
//! Used for opening a node's connection (`dist::Link`) and restarting a node's helper
//! (`helper::Client`): both must happen once however many calls find them needed, and no lock
//! may be held while they run.

use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;

/// One run of shared work and, once it finished, its outcome. Clones wait for the same run.
#[derive(Clone)]
pub struct Flight<T> {
    outcome: watch::Receiver<Option<T>>,
}

/// Why [`Flight::wait`] has no outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfinished {
    /// The limit passed first (the work goes on).
    TimedOut,
    /// The work's task ended without an outcome: the runtime is shutting down.
    Abandoned,
}

impl<T: Clone + Send + Sync + 'static> Flight<T> {
    /// Starts `work` in a task of its own.
    pub fn spawn(work: impl Future<Output = T> + Send + 'static) -> Self {
        let (done, outcome) = watch::channel(None);
        tokio::spawn(async move {
            // Nobody may be waiting any more: the outcome is only for whoever still is.
            let _ = done.send(Some(work.await));
        });
        Self { outcome }
    }

    /// True while the work runs (a caller joins it rather than starting another).
    pub fn running(&self) -> bool {
        self.outcome.borrow().is_none()
    }

    /// The outcome, waiting at most `limit` for it.
    pub async fn wait(&self, limit: Duration) -> Result<T, Unfinished> {
        let mut outcome = self.outcome.clone();
        let waited = tokio::time::timeout(limit, async {
            match outcome.wait_for(Option::is_some).await {
                Ok(done) => done.clone(),
                Err(_) => None,
            }
        })
        .await;
        match waited {
            Ok(Some(result)) => Ok(result),
            Ok(None) => Err(Unfinished::Abandoned),
            Err(_) => Err(Unfinished::TimedOut),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn every_waiter_gets_the_one_outcome_and_a_short_wait_does_not_cancel_it() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let flight = Flight::spawn(async move {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            7
        });
        assert!(flight.running());
        assert_eq!(
            flight.wait(Duration::from_millis(1)).await,
            Err(Unfinished::TimedOut)
        );
        let other = flight.clone();
        let (a, b) = tokio::join!(
            flight.wait(Duration::from_secs(5)),
            other.wait(Duration::from_secs(5))
        );
        assert_eq!((a, b), (Ok(7), Ok(7)));
        assert!(!flight.running());
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}
