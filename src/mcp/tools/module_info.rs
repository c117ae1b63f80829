//! `module_info`: what a module is and whether it is loaded.

use crate::mcp::McpServer;
use crate::node::{Lang, ModuleInfoQuery};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Input {
    pub name: String,
    pub module: String,
    #[serde(default)]
    pub format: Lang,
}

#[tool_router(router = module_info_router, vis = "pub(crate)")]
impl McpServer {
    /// A module's exports, attributes, compile info and source; never loads it.
    #[tool(
        name = "module_info",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn module_info(
        &self,
        Parameters(input): Parameters<Input>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = ModuleInfoQuery {
            module: input.module,
            format: input.format,
        };
        Ok(self.introspect(&input.name, query).await)
    }
}
