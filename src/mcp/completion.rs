//! Argument completion (`completion/complete`): node names for the prompts' `name` argument
//! and the `{name}` of the resource templates, from the registry (no call to any node).
//! Module names are not completed: listing them needs a call into the node, and no prompt or
//! template takes one.

use super::resources::is_resource_template;
use super::{prompts, McpServer};
use rmcp::model::{CompleteRequestParams, CompleteResult, CompletionInfo, Reference};
use rmcp::ErrorData;

impl McpServer {
    /// Known node names starting with the typed value (case-insensitive), at most
    /// [`CompletionInfo::MAX_VALUES`]; nothing for arguments that are not a node's name.
    pub(crate) fn complete(
        &self,
        request: &CompleteRequestParams,
    ) -> Result<CompleteResult, ErrorData> {
        let argument = &request.argument;
        let node_name = match &request.r#ref {
            Reference::Prompt(prompt) => {
                prompts::has_argument(&prompt.name, &argument.name)? && argument.name == "name"
            }
            Reference::Resource(template) => {
                if !is_resource_template(&template.uri) {
                    return Err(ErrorData::invalid_params(
                        format!(
                            "unknown resource template `{}`; templates: beam://{{name}}/logs, beam://{{name}}/tree, beam://{{name}}/vitals, beam://{{name}}/profile/{{pid}}",
                            template.uri
                        ),
                        None,
                    ));
                }
                argument.name == "name"
            }
            _ => false,
        };
        if !node_name {
            return Ok(CompleteResult::default());
        }
        let typed = argument.value.to_lowercase();
        let names: Vec<String> = self
            .registry
            .list_nodes()
            .into_iter()
            .map(|node| node.name)
            .filter(|name| name.to_lowercase().starts_with(&typed))
            .collect();
        let total = names.len();
        let shown: Vec<String> = names.into_iter().take(CompletionInfo::MAX_VALUES).collect();
        let has_more = total > shown.len();
        let info = CompletionInfo::with_pagination(shown, u32::try_from(total).ok(), has_more)
            .map_err(|e| ErrorData::internal_error(e, None))?;
        Ok(CompleteResult::new(info))
    }
}
