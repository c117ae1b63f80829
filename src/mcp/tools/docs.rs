//! `docs`: signatures, specs and doc text of a function, macro, callback or type, or a
//! module's summary and members, read on the node from the BEAM's docs chunk and debug info
//! (`os_sup_code`); nothing is loaded or compiled.

use crate::mcp::McpServer;
use crate::node::{DocsQuery, Lang};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// The node's name, as given to `start` or `attach`.
    pub name: String,
    /// `Enum.map/2`, `Enum.map`, `Enum`, `:lists.seq/3`, `lists:seq/3`, `t:Enum.t/0`, `GenServer.handle_call/3`.
    pub target: String,
    /// Term syntax: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.
    #[serde(default)]
    pub format: Lang,
}

#[tool_router(router = docs_router, vis = "pub(crate)")]
impl McpServer {
    /// Docs of a module, function, macro, callback or type as the node has them: signatures,
    /// specs, doc text, deprecation; for a module its summary and members.
    #[tool(
        name = "docs",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn docs(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = DocsQuery {
            target: input.target,
            format: input.format,
        };
        Ok(self.introspect(&input.name, query).await)
    }
}
