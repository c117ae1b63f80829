//! `waits`: who waits on whom. Processes blocked in a call (GenServer/gen_statem calls,
//! `Task.await`, `:erpc`, IO requests, `proc_lib` start-up) are followed hop by hop to the
//! process that holds everything up, with queue growth and call rates over a short window;
//! cycles are reported as deadlocks. The node does the work (`os_sup_waits`), from
//! `process_info` only: no process is sent anything.

use crate::mcp::McpServer;
use crate::node::{Lang, WaitsQuery};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// The node's name, as given to `start` or `attach`.
    pub name: String,
    /// Start from this process: a pid (`<0.123.0>`, `#PID<0.123.0>`, `0.123.0`) or a
    /// registered name (`Shop.Ledger`). Without it the whole node is scanned (2 s at most)
    /// for processes blocked in a call and for the largest queues.
    #[serde(default)]
    pub pid: Option<String>,
    /// Sampling window in ms for queue growth (+N/s), reductions/s, calls/s and where each
    /// process spends its time (default 500, 0 for none, max 5000).
    #[serde(default = "default_window_ms")]
    pub window_ms: u32,
    /// How many chains to show, most interesting first: deadlocks, then the largest queue
    /// (default 5, max 20).
    #[serde(default = "default_limit")]
    pub limit: u32,
    /// Term syntax: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.
    #[serde(default)]
    pub format: Lang,
}

fn default_window_ms() -> u32 {
    500
}

fn default_limit() -> u32 {
    5
}

#[tool_router(router = waits_router, vis = "pub(crate)")]
impl McpServer {
    /// Find what blocked processes wait on, one line per chain:
    /// `Shop.Ledger (mq 12924, +928/s, in :gen.do_call/4 from Shop.Ledger.handle_cast/2) →
    /// call → Shop.Audit (mq 0, in Process.sleep/1 from Shop.Audit.handle_call/3, 172
    /// calls/s)`. Follows GenServer/gen_statem calls, Task.await, :erpc, IO requests and
    /// supervisor start-up to the process holding things up (or to another node), and
    /// reports cycles as DEADLOCK. Without `pid`, scans the node for the most interesting
    /// chains (deadlocks, then the largest queues). Read-only: uses process_info only.
    #[tool(
        name = "waits",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn waits(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = WaitsQuery {
            pid: input.pid,
            window_ms: Some(input.window_ms),
            limit: Some(input.limit),
            format: input.format,
        };
        Ok(self.introspect(&input.name, query).await)
    }
}
