//! Tool results: a compact text form for the model plus the same data as structured content.

use crate::node::NodeError;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;

/// A successful result: `text` for reading, `data` as `structuredContent`.
pub fn success(text: String, data: &impl Serialize) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = serde_json::to_value(data).ok();
    result
}

/// A result's text blocks, joined by newlines.
pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text())
        .map(|t| t.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A failure the agent can act on.
pub fn failure(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

impl From<NodeError> for CallToolResult {
    fn from(error: NodeError) -> Self {
        failure(error.to_string())
    }
}
