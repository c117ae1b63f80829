//! The MCP server handler: server info, instructions, and the router made of every tool.

use super::fanout::FanOut;
use super::toolsets::Toolset;
use crate::node::Registry;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{tool_handler, ErrorData, RoleServer, ServerHandler};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const INSTRUCTIONS: &str = "Runs and supervises Erlang/Elixir nodes and looks inside them. \
`start` a Mix project by path (it returns once the application has started) or `attach` to a \
running node; `eval` Elixir or Erlang code on it; look inside with `supervision_tree`, \
`processes`, `process_info`, `get_state`, `applications`, `system_info` and `ets`; `waits` \
shows who waits on whom (slow calls, deadlocks); `diagnose` ranks what is wrong (leaks, deadlocks, restarts, growth) with the next call to make; check `status`, and \
`stop`/`restart` it. Code questions: `docs` (docs and specs), `source` (file:line), \
`callers` (who calls a function, or `callees`), `find` (modules and functions by name). \
Crashed nodes (and Mix nodes whose application exited) are restarted automatically (at most 3 \
times in 60 s). Every call is bounded in time and output size. Tools that show terms also take \
`format`: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.";

/// Every tool in its listed form, per tool the shared arguments it takes unlisted, and its set.
type AllTools = (
    ToolRouter<McpServer>,
    HashMap<String, Vec<&'static str>>,
    HashMap<String, Toolset>,
    HashMap<String, FanOut>,
);

/// One MCP session's handler; all sessions share one registry. Clone one per session.
#[derive(Clone)]
pub struct McpServer {
    pub(crate) registry: Arc<Registry>,
    pub(super) tool_router: ToolRouter<Self>,
    /// Per tool, the shared arguments it takes but does not list ([`super::schema`]).
    shared_arguments: Arc<HashMap<String, Vec<&'static str>>>,
    /// Open stream (TCP, Unix, stdio) sessions, shared by every clone.
    pub(crate) sessions: Arc<AtomicUsize>,
    /// The calls this server answered, for the people watching (shared by every clone).
    activity: Arc<super::Activity>,
    /// This session's resource subscriptions (a clone starts with none).
    pub(crate) subscriptions: super::resources::Subscriptions,
    /// The tools that, given a cluster's name, ask every member ([`super::fanout`]): those
    /// of the core and introspection sets that look or only stop, and those that take
    /// [`super::fanout::EVERY_MEMBER`] (`eval`) when it is true.
    fans_out: Arc<HashMap<String, FanOut>>,
}

/// Tools that load code into a node, offered with `--read-only` only when `--allow-attach`
/// says so: attaching is how a read-only server reaches a production node, but it runs code.
const ATTACH_TOOLS: [&str; 2] = ["attach", "remove"];

/// Which tools a server offers: the tools of `sets` (`core` is always in), and with
/// `read_only` only those that run no code and change no node (their `read_only_hint`), plus
/// `attach`/`remove` when `allow_attach`. The others are neither listed nor callable.
#[derive(Debug, Clone)]
pub struct ToolChoice {
    pub sets: Vec<Toolset>,
    pub read_only: bool,
    pub allow_attach: bool,
}

impl Default for ToolChoice {
    fn default() -> Self {
        Self {
            sets: Toolset::ALL.to_vec(),
            read_only: false,
            allow_attach: false,
        }
    }
}

impl ToolChoice {
    fn offers(&self, tool: &Tool, set: Toolset) -> bool {
        let in_sets = set == Toolset::Core || self.sets.contains(&set);
        let read_only = tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
        let attach = self.allow_attach && ATTACH_TOOLS.contains(&tool.name.as_ref());
        in_sets && (!self.read_only || read_only || attach)
    }
}

impl McpServer {
    /// A server offering every tool.
    pub fn new(registry: Arc<Registry>) -> Self {
        Self::with_tools(registry, &ToolChoice::default())
    }

    /// A server offering only tools that run no code and change no node, plus
    /// `attach`/`remove` when `allow_attach`.
    pub fn read_only(registry: Arc<Registry>, allow_attach: bool) -> Self {
        let choice = ToolChoice {
            read_only: true,
            allow_attach,
            ..ToolChoice::default()
        };
        Self::with_tools(registry, &choice)
    }

    /// A server offering the tools `choice` names.
    pub fn with_tools(registry: Arc<Registry>, choice: &ToolChoice) -> Self {
        let (mut tool_router, shared_arguments, sets, fans_out) = Self::all_tools();
        for tool in tool_router.list_all() {
            if !choice.offers(&tool, sets[tool.name.as_ref()]) {
                tool_router.remove_route(&tool.name);
            }
        }
        Self {
            registry,
            sessions: Arc::default(),
            activity: Arc::default(),
            subscriptions: Default::default(),
            tool_router,
            shared_arguments: Arc::new(shared_arguments),
            fans_out: Arc::new(fans_out),
        }
    }

    /// Open stream sessions (TCP, Unix socket, stdio).
    pub fn open_sessions(&self) -> usize {
        self.sessions.load(Ordering::Relaxed)
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The feed of tool calls answered by every session of this server.
    pub fn activity(&self) -> &Arc<super::Activity> {
        &self.activity
    }

    /// Every tool, each in its compact listed form ([`super::schema`]), and per tool the
    /// shared arguments it takes unlisted and its set.
    fn all_tools() -> AllTools {
        let mut router = ToolRouter::new();
        let mut sets = HashMap::new();
        for (set, tools) in Self::routers_by_set() {
            for tool in tools.list_all() {
                sets.insert(tool.name.to_string(), set);
            }
            router += tools;
        }
        // Before the hints are compacted away: the tools of the core and introspection sets
        // that look or only stop ask every member of a cluster; a tool that changes things
        // does when its caller says so.
        let fans_out = router
            .list_all()
            .into_iter()
            .filter_map(|tool| {
                let hint = |h: fn(&rmcp::model::ToolAnnotations) -> Option<bool>| {
                    tool.annotations.as_ref().and_then(h) == Some(true)
                };
                let looks = matches!(
                    sets[tool.name.as_ref()],
                    Toolset::Core | Toolset::Introspect
                ) && (hint(|a| a.read_only_hint) || hint(|a| a.idempotent_hint));
                let opt_in = tool
                    .input_schema
                    .get("properties")
                    .and_then(|p| p.get(super::fanout::EVERY_MEMBER))
                    .is_some();
                let how = if opt_in {
                    FanOut::OptIn
                } else if looks {
                    FanOut::Always
                } else {
                    return None;
                };
                Some((tool.name.to_string(), how))
            })
            .collect();
        let mut shared = HashMap::new();
        for route in router.map.values_mut() {
            let unlisted = super::schema::compact_tool(&mut route.attr);
            shared.insert(route.attr.name.to_string(), unlisted);
        }
        (router, shared, sets, fans_out)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for McpServer {
    /// Checks argument names against the tool's schema, then runs the tool; records the call
    /// in the activity feed.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let call = self
            .activity
            .begin(&request.name, request.arguments.as_ref());
        let response = async {
            if let Some(tool) = self.tool_router.get(&request.name) {
                let shared = self
                    .shared_arguments
                    .get(request.name.as_ref())
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let arguments = request.arguments.as_ref();
                if let Err(message) = super::arguments::check(tool, shared, arguments) {
                    return Ok(super::output::failure(message).into());
                }
            }
            let cluster = request
                .arguments
                .as_ref()
                .and_then(|a| a.get("name")?.as_str());
            if let Some((cluster, members)) =
                cluster.and_then(|c| Some((c.to_string(), self.registry.members(c)?)))
            {
                // Unknown tools get the router's own error below.
                let known = self.tool_router.has_route(&request.name);
                if known && !super::tools::TAKE_CLUSTERS.contains(&request.name.as_ref()) {
                    let how = self.fans_out.get(request.name.as_ref());
                    let opted_in = request
                        .arguments
                        .as_ref()
                        .and_then(|a| a.get(super::fanout::EVERY_MEMBER)?.as_bool())
                        == Some(true);
                    if how == Some(&FanOut::Always) || (how == Some(&FanOut::OptIn) && opted_in) {
                        let merged = self.fan_out(&cluster, request, context).await;
                        return Ok(merged.into());
                    }
                    let opt_in = how == Some(&FanOut::OptIn);
                    return Ok(
                        Self::refuse_cluster(&cluster, &request.name, &members, opt_in).into(),
                    );
                }
            }
            let call = ToolCallContext::new(self, request, context);
            self.tool_router.call(call).await
        }
        .await;
        self.activity.finish(call, &response);
        response
    }

    // Resources, prompts and completion: see resources.rs, prompts.rs, completion.rs.
    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(self.resources_list())
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(self.resource_templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Ok(self.resource_read(&request.uri).await?.into())
    }

    #[allow(deprecated)] // the legacy form of `listen`, still what sessions with `initialize` use
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.resource_subscribe(request.uri, context.peer)
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.resource_unsubscribe(&request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.accepted_subscriptions(requested)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.resources_listen(context).await;
        Ok(())
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(super::prompts::list())
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Ok(self
            .prompt_get(&request.name, request.arguments.as_ref())?
            .into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.complete(&request)
    }

    /// Declares exactly what is served: tools, resources (with subscriptions), prompts and
    /// completion; no logging (`logging/setLevel` is not implemented).
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_prompts()
            .enable_completions()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                env!("CARGO_PKG_NAME"),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_tool_is_listed_twice() {
        let listed: usize = McpServer::routers_by_set()
            .iter()
            .map(|(_, router)| router.list_all().len())
            .sum();
        assert_eq!(McpServer::all_tools().0.list_all().len(), listed);
    }

    #[test]
    fn every_listed_schema_is_portable() {
        for tool in McpServer::all_tools().0.list_all() {
            let input = serde_json::Value::Object(tool.input_schema.as_ref().clone());
            let problems = super::super::schema::portability_problems(&input);
            assert!(problems.is_empty(), "{}: {problems:?}", tool.name);
            assert_eq!(input["type"], "object", "{}", tool.name);
            assert!(tool.output_schema.is_none(), "{}", tool.name);
        }
    }
}
