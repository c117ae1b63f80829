//! The one connection to a node that its callers share: opened on first use, opened again on
//! the next use after it was lost, with at most one connect in flight.
//!
//! No lock is held across a connect: the first caller that finds no live connection starts
//! the connect as a [`Flight`], and every caller (the first included) waits for its result,
//! each with its own deadline. A caller that gives up does not cancel the connect; a failed
//! connect is reported to everyone waiting for it, and the next caller starts a new one.

use super::{ConnectOptions, Connection, DistError};
use crate::single_flight::{Flight, Unfinished};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A shared, self-healing connection to one node. Clones share the connection.
#[derive(Clone)]
pub struct Link {
    node: Arc<str>,
    cookie: Arc<str>,
    options: Arc<ConnectOptions>,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    slot: Slot,
    /// Bumped by [`Link::disconnect`]; a connect started before that does not install its
    /// connection.
    generation: u64,
}

#[derive(Default)]
enum Slot {
    #[default]
    Idle,
    Connecting(Flight<Result<Connection, DistError>>),
    Open(Connection),
}

impl Link {
    pub fn new(
        node: impl Into<String>,
        cookie: impl Into<String>,
        options: ConnectOptions,
    ) -> Self {
        Self {
            node: Arc::from(node.into()),
            cookie: Arc::from(cookie.into()),
            options: Arc::new(options),
            state: Arc::default(),
        }
    }

    /// The same node and cookie with other options, and no connection yet.
    pub fn with_options(&self, options: ConnectOptions) -> Self {
        Self {
            node: self.node.clone(),
            cookie: self.cookie.clone(),
            options: Arc::new(options),
            state: Arc::default(),
        }
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    pub fn options(&self) -> &ConnectOptions {
        &self.options
    }

    /// The live connection, or the one being opened (starting a connect if none is), waiting
    /// at most `limit` for it. The connect itself is bounded by the options' connect timeout.
    pub async fn connection(&self, limit: Duration) -> Result<Connection, DistError> {
        let connect = {
            let mut state = self.state();
            match &state.slot {
                Slot::Open(conn) if !conn.is_closed() => return Ok(conn.clone()),
                Slot::Connecting(connect) => connect.clone(),
                _ => self.start_connect(&mut state),
            }
        };
        match connect.wait(limit).await {
            Ok(result) => result,
            Err(Unfinished::Abandoned) => Err(DistError::ConnectionLost {
                node: self.node.to_string(),
                reason: "the connect was abandoned".into(),
            }),
            Err(Unfinished::TimedOut) => Err(DistError::Timeout {
                node: self.node.to_string(),
                timeout: limit,
            }),
        }
    }

    /// Forgets the current connection (the node was restarted or stopped); the next call
    /// connects anew. Calls already holding the old connection keep it until it closes.
    pub fn disconnect(&self) {
        let mut state = self.state();
        state.generation += 1;
        state.slot = Slot::Idle;
    }

    /// Changes whenever [`disconnect`](Self::disconnect) is called.
    pub fn generation(&self) -> u64 {
        self.state().generation
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("link state lock")
    }

    fn start_connect(&self, state: &mut State) -> Flight<Result<Connection, DistError>> {
        let generation = state.generation;
        let link = self.clone();
        let connect = Flight::spawn(async move {
            let result = Connection::open_with(&link.node, &link.cookie, &link.options).await;
            // Installed for the next call even when nobody waits any more.
            let mut state = link.state();
            if state.generation == generation {
                state.slot = match &result {
                    Ok(conn) => Slot::Open(conn.clone()),
                    Err(_) => Slot::Idle,
                };
            }
            result
        });
        state.slot = Slot::Connecting(connect.clone());
        connect
    }
}
