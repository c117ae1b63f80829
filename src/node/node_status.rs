//! What `status` shows of a node: its lifecycle state and a snapshot of it, including the
//! health of a Mix project's applications. Plain data, shared by children and attached nodes.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    Starting,
    Running,
    Stopping,
    Stopped,
    Restarting,
    Failed,
    /// A node this server did not start (see `attach`); it is not supervised.
    Attached,
    /// A node the server before attached to (its record in the state dir); not attached now.
    Detached,
}

impl NodeState {
    /// What an agent should do when it needs a running node and finds this state.
    pub fn hint(self) -> &'static str {
        match self {
            Self::Starting | Self::Restarting => "it is coming up: retry shortly or check `status`",
            Self::Stopping => "it is being stopped: `start` it again afterwards",
            Self::Running | Self::Attached => "retry",
            Self::Detached => {
                "the server before attached it: `attach` it again (its cookie is never kept), \
                 or `remove` it"
            }
            Self::Stopped => "start it with `start` (see `status` for why it stopped)",
            // A crash loop started again crashes again: the post-mortem first.
            Self::Failed => {
                "its restarts ran out: `logs` with min_level \"error\" shows why (its logs are \
                 kept), `status` its last exit; `start` with restart_on_app_exit false keeps its \
                 VM up for `diagnose` after its application exits"
            }
        }
    }
}

impl std::fmt::Display for NodeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = match self {
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
            Self::Restarting => "restarting",
            Self::Failed => "failed",
            Self::Attached => "attached",
            Self::Detached => "detached",
        };
        f.write_str(text)
    }
}

/// A snapshot of one child for `status`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NodeStatus {
    pub name: String,
    /// Erlang node name (`name@host`), for `remsh` or attaching.
    pub node: String,
    pub state: NodeState,
    pub os_pid: Option<u32>,
    pub uptime_ms: Option<u64>,
    /// Automatic restarts since the last manual start.
    pub restarts: u32,
    /// transient (default), permanent or temporary.
    pub restart_policy: super::RestartPolicy,
    /// Milliseconds until the pending automatic restart (state `restarting`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_restart_in_ms: Option<u64>,
    pub last_exit: Option<String>,
    /// The newest error logged (one line, cut): while the node runs, this run's; else, or
    /// until this run logs one, the error of the run that ended with `last_exit` (labelled so
    /// while the node runs again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The error of the run that ended with `last_exit`, when `last_error` is this run's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_error: Option<String>,
    /// The log line of the error of the run that ended with `last_exit` (`logs` with this as
    /// `since` and `tail` 1 reads it whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error_seq: Option<u64>,
    /// What is wrong while the node runs: a Phoenix endpoint that does not serve HTTP.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Why the child is `failed`.
    pub failure: Option<String>,
    /// The Mix project's applications: a node can be up while its application is not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<AppHealth>,
    pub path: Option<String>,
    pub command: Vec<String>,
    /// Restarts the node's own supervisors made, when the node was asked (`status`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_restarts: Option<crate::helper::AppRestarts>,
    /// Set when the node, asked just now (`status`), failed a round trip: whatever its state
    /// says, it answers nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_answering: Option<Silence>,
}

/// A node that failed a round trip.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Silence {
    /// Seconds since it last answered one of the server's samples, when it has.
    pub last_answer_s: Option<u64>,
}

impl Silence {
    /// `; its last answer N s ago`, or nothing when it never answered a sample.
    pub fn last_answer_text(&self) -> String {
        self.last_answer_s
            .map(|s| format!("; its last answer {s} s ago"))
            .unwrap_or_default()
    }
}

impl NodeStatus {
    /// A node without an OS process of this server's: its names and state, nothing else.
    pub fn bare(name: &str, node: &str, state: NodeState) -> Self {
        Self {
            name: name.to_string(),
            node: node.to_string(),
            state,
            os_pid: None,
            uptime_ms: None,
            restarts: 0,
            restart_policy: super::RestartPolicy::Temporary,
            next_restart_in_ms: None,
            last_exit: None,
            last_error: None,
            exit_error: None,
            last_error_seq: None,
            warnings: Vec::new(),
            failure: None,
            apps: Vec::new(),
            path: None,
            command: Vec::new(),
            app_restarts: None,
            not_answering: None,
        }
    }
}

/// One application of a Mix project node.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AppHealth {
    pub name: String,
    /// `running`, `exited`, or `unknown` (the node did not answer the status that asked).
    pub state: &'static str,
    /// When it was seen gone (RFC 3339 UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exited_at: Option<String>,
    /// The exit reason the node logged (`Application shop exited: …`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
