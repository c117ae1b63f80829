//! MCP Apps (the `io.modelcontextprotocol/ui` extension): the views a client that declares it
//! draws beside some tools' results. A tool names its view in `_meta.ui.resourceUri` of its
//! `tools/list` entry; the view is a `ui://os-sup/*.html` resource, one self-contained HTML
//! document (the dashboard's style and drawing code, a hand-written host bridge, the view's
//! own script; nothing loaded from anywhere), which the host frames and hands the tool's
//! input and result.
//!
//! Only a client that declares the extension with the `text/html;profile=mcp-app` type sees
//! any of it: for every other client `tools/list`, `resources/list` and `resources/read` answer
//! byte for byte as without this module. The views only read: they call `supervision_tree`,
//! `process_info`, `status` and `resources/read` of `beam://NAME/vitals` through the host,
//! nothing that changes a node, so they work on a `--read-only` server too.

use rmcp::model::{MetaObject, ReadResourceResult, Resource, ResourceContents, Tool};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::json;

/// The extension's id in the client's `capabilities.extensions`.
const EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The one type of view served, which the client must list in the extension's `mimeTypes`.
const MIME_TYPE: &str = "text/html;profile=mcp-app";
/// Where the views live.
const URI_PREFIX: &str = "ui://os-sup/";

/// One view: the tool it is drawn for and its page.
struct View {
    tool: &'static str,
    /// Its file name under [`URI_PREFIX`].
    file: &'static str,
    title: &'static str,
    description: &'static str,
    /// Its body: its elements, then its script (run after the shared ones).
    body: &'static str,
}

const VIEWS: [View; 3] = [
    View {
        tool: "supervision_tree",
        file: "tree.html",
        title: "Supervision tree",
        description: "The supervision tree, drawn as on the dashboard; refreshes on request.",
        body: include_str!("apps/tree.html"),
    },
    View {
        tool: "process_info",
        file: "profile.html",
        title: "Process profile",
        description: "A process's profile (process_info with profile_ms) as a flame graph.",
        body: include_str!("apps/profile.html"),
    },
    View {
        tool: "diagnose",
        file: "vitals.html",
        title: "Diagnosis and vital signs",
        description: "The diagnosis beside the node's vital signs (a cluster's: who sees whom).",
        body: include_str!("apps/vitals.html"),
    },
];

const STYLE: &str = include_str!("apps/view.css");
const BRIDGE: &str = include_str!("apps/bridge.js");
/// The dashboard's drawing code and style, the files themselves: the dashboard's module is
/// not this layer's to use (`tests/layers.rs`), its assets are shared.
const DASHBOARD_DRAW: &str = include_str!("../dashboard/draw.js");
const DASHBOARD_STYLE: &str = include_str!("../dashboard/style.css");

impl View {
    fn uri(&self) -> String {
        format!("{URI_PREFIX}{}", self.file)
    }

    /// The whole document. Inline `<style>` and `<script>` only, as the host's default CSP for
    /// views allows; the scripts are classic ones, run in order: the drawing code, the bridge
    /// (`host`), then the view's own.
    fn document(&self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"color-scheme\" content=\"light dark\">\n<title>{title}</title>\n\
             <style>\n{dashboard_style}{STYLE}</style>\n</head>\n<body>\n\
             <script>\n{draw}</script>\n<script>\n{BRIDGE}</script>\n{body}</body>\n</html>\n",
            title = self.title,
            dashboard_style = DASHBOARD_STYLE,
            draw = DASHBOARD_DRAW,
            body = self.body,
        )
    }
}

/// Whether the client of this request declared the extension with the type of our views.
pub(crate) fn wanted(context: &RequestContext<RoleServer>) -> bool {
    let Some(extensions) = context.client_capabilities().and_then(|c| c.extensions) else {
        return false;
    };
    extensions
        .get(EXTENSION)
        .and_then(|ui| ui.get("mimeTypes")?.as_array().cloned())
        .is_some_and(|types| types.iter().any(|t| t == MIME_TYPE))
}

/// `tools` with each view's link added to its tool's `_meta` (the current key and the
/// deprecated one, which hosts still read).
pub(crate) fn link_views(mut tools: Vec<Tool>) -> Vec<Tool> {
    for tool in &mut tools {
        let Some(view) = VIEWS.iter().find(|v| v.tool == tool.name) else {
            continue;
        };
        let uri = view.uri();
        let meta = tool.meta.get_or_insert_with(MetaObject::new);
        meta.0
            .insert("ui".into(), json!({ "resourceUri": uri.clone() }));
        meta.0.insert("ui/resourceUri".into(), json!(uri));
    }
    tools
}

/// The views, as `resources/list` entries.
pub(crate) fn resources() -> impl Iterator<Item = Resource> {
    VIEWS.iter().map(|view| {
        Resource::new(view.uri(), view.file)
            .with_title(view.title)
            .with_description(view.description)
            .with_mime_type(MIME_TYPE)
    })
}

/// The view at `uri`, or `None` when `uri` names none.
pub(crate) fn read(uri: &str) -> Option<ReadResourceResult> {
    let file = uri.strip_prefix(URI_PREFIX)?;
    let view = VIEWS.iter().find(|v| v.file == file)?;
    let prefers_border = json!({ "ui": { "prefersBorder": true } });
    let meta = MetaObject(prefers_border.as_object().cloned().unwrap_or_default());
    let contents = ResourceContents::text(view.document(), uri)
        .with_mime_type(MIME_TYPE)
        .with_meta(meta);
    Some(ReadResourceResult::new(vec![contents]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A view's document must stay one: no `</script>` or `</style>` inside its inlined
    /// parts would end an element early.
    #[test]
    fn inlined_parts_never_close_their_element() {
        let inlined = [DASHBOARD_DRAW, BRIDGE, DASHBOARD_STYLE, STYLE];
        for part in inlined {
            assert!(!part.contains("</script") && !part.contains("</style"));
        }
        for view in &VIEWS {
            assert_eq!(view.body.matches("<script>").count(), 1, "{}", view.file);
            assert!(read(&view.uri()).is_some(), "{}", view.file);
        }
        assert!(read("ui://os-sup/nosuch.html").is_none());
    }
}
