//! Child nodes: spawning them with the helper injected, supervising them like an OTP
//! `transient` child, and the registry of named children that is this crate's library API.
//!
//! This layer owns OS processes and their lifecycles; it talks to a node only through
//! [`crate::helper::Client`] and never builds terms itself.

mod attach;
mod attached_node;
mod child_config;
pub mod cluster;
pub mod diagnose;
mod logs;
pub mod mix_task;
mod node_status;
pub mod persist;
mod private_file;
pub mod proc_fs;
mod readiness;
mod registry;
mod registry_calls;
mod registry_restore;
mod restart_policy;
mod spawn;
mod start_spec;
pub mod state_file;
mod supervisor;
pub mod vitals;
pub mod work_readings;

pub use crate::helper::DEFAULT_MAX_EVALS;
/// What the registry's callers send a node and read back: code to evaluate (and in which
/// syntax), the node's own report, and one generic [`ToolCall`] for every tool that runs
/// inside the node. `ToolCall` is the one door the tool slices (`src/mcp/tools/<tool>.rs`)
/// need: it is built from typed values (text, numbers held to [`crate::bounds`], flags), so
/// `mcp` names a tool and its arguments without ever touching a term or the helper, and a new
/// tool adds nothing to this list.
pub use crate::helper::{
    AppRestarts, EvalError, EvalOutput, EvalRequest, Lang, NodeInfo, ToolCall, ToolReply,
};
pub use child_config::{NodeConfig, RestartLimits, RestartPolicy};
pub use logs::{Level, LogBuffer, LogLimits, LogLine, Page, Query, Since, Source};
pub use node_status::{AppHealth, NodeState, NodeStatus, Silence};
pub use readiness::Readiness;
pub use registry::{Registry, DEFAULT_MAX_NODES};
pub use start_spec::{ReadySpec, StartSpec};

use crate::helper::HelperError;

/// Lines of output shown with a failed start.
pub const FAILURE_TAIL_LINES: usize = 30;

/// What can go wrong managing a node; each message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(
        "invalid node name `{0}`: use 1-64 letters, digits, `_` or `-`, starting with a letter"
    )]
    InvalidName(String),
    #[error("no node named `{name}`; known nodes: {known}. Start it with `start`")]
    UnknownNode { name: String, known: String },
    #[error("node `{name}` is already {state}; use `restart` to restart it, or `stop` it first")]
    AlreadyRunning { name: String, state: NodeState },
    #[error("node `{name}` is {state}, not running; {hint}")]
    NotRunning {
        name: String,
        state: NodeState,
        hint: &'static str,
    },
    #[error(
        "node `{name}` is still {state} after waiting {waited_s} s; check `status` and `logs`, then retry"
    )]
    StillStarting {
        name: String,
        state: NodeState,
        waited_s: u64,
    },
    #[error("{0}")]
    BadConfig(String),
    #[error("cannot spawn `{program}`: {reason}")]
    Spawn { program: String, reason: String },
    #[error("node `{name}` failed to start: {reason}\n--- last output ---\n{output}")]
    StartFailed {
        name: String,
        reason: String,
        output: String,
    },
    #[error("node `{name}` is not ready: {reason}\n--- last output ---\n{output}")]
    NotReady {
        name: String,
        reason: String,
        output: String,
    },
    #[error(
        "node `{name}` is not answering: no reply to a round trip within {} ms{} (the VM is \
         stopped, busy in work that does not yield, or overloaded); `logs` still reads what it \
         printed, `status` says when it answers again",
        registry_calls::ANSWER_PROBE.as_millis(),
        .silence.last_answer_text()
    )]
    NotAnswering { name: String, silence: Silence },
    #[error("node `{name}`: start cancelled by a stop request")]
    StartCancelled { name: String },
    #[error("node `{name}`: {source}")]
    Helper {
        name: String,
        #[source]
        source: HelperError,
    },
    #[error(
        "this server already runs {max} nodes (its limit, --max-nodes); stop or `remove` one first"
    )]
    TooManyNodes { max: usize },
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("node `{name}` is attached, not started by this server: it cannot be started, stopped or restarted here; use `remove` to let go of it")]
    AttachedNode { name: String },
    #[error("the name `{name}` is already in use (state: {state}); pick another name")]
    NameTaken { name: String, state: NodeState },
    #[error("cannot attach to `{node}`: {source}")]
    Attach {
        node: String,
        #[source]
        source: HelperError,
    },
}
