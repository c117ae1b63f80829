//! `callers`: the project's functions that call a function (or, with `callees`, what a
//! function calls), from the call sites in the BEAMs' debug info (`os_sup_code_xref`). It is
//! bounded at 2 s (a partial result says so) and `limit` functions.

use crate::bounds::{CALLERS_LIMIT, CALLERS_LIMIT_DEFAULT};
use crate::mcp::McpServer;
use crate::node::{Lang, ToolCall};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    /// `Mod.fun/2`, `Mod.fun` or `Mod`.
    pub target: String,
    /// What it calls instead.
    #[serde(default)]
    pub callees: bool,
    #[serde(default = "default_limit")]
    pub limit: u32,
    /// Term syntax: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.
    #[serde(default)]
    pub format: Lang,
}

fn default_limit() -> u32 {
    CALLERS_LIMIT_DEFAULT as u32
}

#[tool_router(router = callers_router, vis = "pub(crate)")]
impl McpServer {
    /// Callers of a function in the project, with file:line.
    #[tool(
        name = "callers",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn callers(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let call = ToolCall::new("callers")
            .text("target", input.target.as_str())
            .bounded("limit", Some(input.limit.into()), CALLERS_LIMIT)
            .flag("callees", input.callees)
            .format(input.format);
        Ok(self.call_tool(&input.name, call).await)
    }
}
