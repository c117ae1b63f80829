//! The MCP server handler: server info, instructions, and the router made of every tool.

use super::fanout::FanOut;
use super::tools::OnCluster;
use super::toolsets::Toolset;
use crate::node::Registry;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{tool_handler, ErrorData, RoleServer, ServerHandler};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What the server's instructions say besides its tools, which [`McpServer::instructions`]
/// names from the tools it serves (so the text never names a tool it lacks).
const ABOUT: &str = "Runs and supervises Erlang/Elixir nodes and looks inside them. Crashed \
nodes (and Mix nodes whose application exited) are restarted automatically (at most 3 times in \
60 s). Every call is bounded in time and output size. Tools that show terms also take \
`format`: `auto` (Elixir on Elixir nodes), `elixir` or `erlang`.";

/// What the server knows of one tool besides its route: what its line of the table
/// (`McpServer::routers_by_set`) says, and the shared arguments it takes unlisted.
#[derive(Debug)]
struct ToolFacts {
    set: Toolset,
    on_cluster: OnCluster,
    attaches: bool,
    /// It only looks (its `read_only_hint`): it answers on a node still starting, as soon as
    /// the helper does, which is when where the boot waits can be seen.
    looks: bool,
    /// The shared arguments it takes but does not list ([`super::schema`]).
    shared_arguments: Vec<&'static str>,
}

/// Every tool in its listed form, and the facts of each by name.
struct AllTools {
    router: ToolRouter<McpServer>,
    facts: HashMap<String, ToolFacts>,
}

/// One MCP session's handler; all sessions share one registry. Clone one per session.
#[derive(Clone)]
pub struct McpServer {
    pub(crate) registry: Arc<Registry>,
    pub(super) tool_router: ToolRouter<Self>,
    /// Per tool, what the server does with its calls besides routing them.
    facts: Arc<HashMap<String, ToolFacts>>,
    /// Open stream (TCP, Unix, stdio) sessions, shared by every clone.
    pub(crate) sessions: Arc<AtomicUsize>,
    /// The calls this server answered, for the people watching (shared by every clone).
    activity: Arc<super::Activity>,
    /// This session's resource subscriptions (a clone starts with none).
    pub(crate) subscriptions: super::resources::Subscriptions,
}

/// Which tools a server offers: the tools of `sets` (`core` is always in), and with
/// `read_only` only those that run no code and change no node (their `read_only_hint`), plus
/// those that attach (`attach`/`remove`) when `allow_attach`. The others are neither listed
/// nor callable.
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
    fn offers(&self, tool: &Tool, facts: &ToolFacts) -> bool {
        let in_sets = facts.set == Toolset::Core || self.sets.contains(&facts.set);
        let read_only = tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
        let attach = self.allow_attach && facts.attaches;
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
        let AllTools {
            router: tool_router,
            facts,
        } = Self::offered(choice);
        Self {
            registry,
            sessions: Arc::default(),
            activity: Arc::default(),
            subscriptions: Default::default(),
            tool_router,
            facts: Arc::new(facts),
        }
    }

    /// Whether tool `name` only looks (changes nothing): it may ask a node still starting.
    pub(super) fn only_looks(&self, name: &str) -> bool {
        self.facts.get(name).is_some_and(|f| f.looks)
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

    /// The tools `choice` offers, and the facts of every tool.
    fn offered(choice: &ToolChoice) -> AllTools {
        let AllTools { mut router, facts } = Self::all_tools();
        for tool in router.list_all() {
            if !choice.offers(&tool, &facts[tool.name.as_ref()]) {
                router.remove_route(&tool.name);
            }
        }
        AllTools { router, facts }
    }

    /// The server's instructions: [`ABOUT`], then the tools it serves by set, in the order of
    /// the table (`McpServer::routers_by_set`), each set with what its tools are for.
    fn instructions(&self) -> String {
        Self::instructions_for(&self.tool_router)
    }

    fn instructions_for(served: &ToolRouter<Self>) -> String {
        let mut text = ABOUT.to_string();
        for set in Toolset::ALL {
            let names: Vec<String> = Self::routers_by_set()
                .into_iter()
                .filter(|line| line.set == set)
                .flat_map(|line| line.router.list_all())
                .filter(|tool| served.has_route(&tool.name))
                .map(|tool| format!("`{}`", tool.name))
                .collect();
            if !names.is_empty() {
                text += &format!(" {}: {}.", set.purpose(), names.join(", "));
            }
        }
        text
    }

    /// Every tool, each in its compact listed form ([`super::schema`]), and its facts.
    fn all_tools() -> AllTools {
        let mut router = ToolRouter::new();
        let mut facts = HashMap::new();
        for line in Self::routers_by_set() {
            for tool in line.router.list_all() {
                let tool_facts = ToolFacts {
                    set: line.set,
                    on_cluster: line.on_cluster,
                    attaches: line.attaches,
                    looks: tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true),
                    shared_arguments: Vec::new(),
                };
                facts.insert(tool.name.to_string(), tool_facts);
            }
            router += line.router;
        }
        for route in router.map.values_mut() {
            let unlisted = super::schema::compact_tool(&mut route.attr);
            if let Some(tool_facts) = facts.get_mut(route.attr.name.as_ref()) {
                tool_facts.shared_arguments = unlisted;
            }
        }
        AllTools { router, facts }
    }

    /// The shared arguments (`format`) tool `name` takes but does not list, each with its
    /// compact schema: for the command line's `tools NAME`, which prints every argument.
    pub fn unlisted_arguments(name: &str) -> Vec<(&'static str, serde_json::Value)> {
        let Some(tool) = Self::routers_by_set()
            .into_iter()
            .flat_map(|line| line.router.list_all())
            .find(|tool| tool.name == name)
        else {
            return Vec::new();
        };
        let schema = super::schema::compact(&serde_json::Value::Object(
            tool.input_schema.as_ref().clone(),
        ));
        super::schema::SHARED_ARGUMENTS
            .into_iter()
            .filter_map(|arg| Some((arg, schema["properties"].get(arg)?.clone())))
            .collect()
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
            let facts = self.facts.get(request.name.as_ref());
            if let Some(tool) = self.tool_router.get(&request.name) {
                let shared = facts
                    .map(|f| f.shared_arguments.as_slice())
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
                let on_cluster = facts.map(|f| f.on_cluster);
                if known && on_cluster != Some(OnCluster::Itself) {
                    let opted_in = request
                        .arguments
                        .as_ref()
                        .and_then(|a| a.get(super::fanout::EVERY_MEMBER)?.as_bool())
                        == Some(true);
                    let opt_in = on_cluster == Some(OnCluster::Asks(FanOut::OptIn));
                    if on_cluster == Some(OnCluster::Asks(FanOut::Always)) || (opt_in && opted_in) {
                        let merged = self.fan_out(&cluster, request, context).await;
                        return Ok(merged.into());
                    }
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

    /// What `#[tool_handler]` would write, plus the views' links for a client of MCP Apps
    /// (apps.rs); the router's tools stay as they are.
    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let supports_cache_hints = context
            .protocol_version()
            .is_some_and(|version| version >= rmcp::model::ProtocolVersion::V_2026_07_28);
        let mut tools = self.tool_router.list_all();
        if super::apps::wanted(&context) {
            tools = super::apps::link_views(tools);
        }
        Ok(ListToolsResult {
            result_type: Some(rmcp::model::ResultType::COMPLETE),
            tools,
            meta: None,
            next_cursor: None,
            ttl_ms: supports_cache_hints.then_some(0),
            cache_scope: supports_cache_hints.then_some(rmcp::model::CacheScope::Public),
        })
    }

    // Resources, prompts and completion: see resources.rs, prompts.rs, completion.rs; the
    // views of MCP Apps (apps.rs) only for a client that declares the extension.
    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut list = self.resources_list();
        if super::apps::wanted(&context) {
            list.resources.extend(super::apps::resources());
        }
        Ok(list)
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
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if super::apps::wanted(&context) {
            if let Some(view) = super::apps::read(&request.uri) {
                return Ok(view.into());
            }
        }
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
            .with_instructions(self.instructions())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instructions name every tool served and no other.
    #[test]
    fn the_instructions_name_the_tools_served() {
        let all = McpServer::instructions_for(&McpServer::offered(&ToolChoice::default()).router);
        let choice = ToolChoice {
            read_only: true,
            ..ToolChoice::default()
        };
        let read_only = McpServer::instructions_for(&McpServer::offered(&choice).router);
        for tool in McpServer::all_tools().router.list_all() {
            let named = format!("`{}`", tool.name);
            assert!(all.contains(&named), "{named} missing from: {all}");
            let offered = tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
            assert_eq!(read_only.contains(&named), offered, "{named}: {read_only}");
        }
    }

    #[test]
    fn no_tool_is_listed_twice() {
        let listed: usize = McpServer::routers_by_set()
            .iter()
            .map(|line| line.router.list_all().len())
            .sum();
        assert_eq!(McpServer::all_tools().router.list_all().len(), listed);
    }

    #[test]
    fn every_listed_schema_is_portable() {
        for tool in McpServer::all_tools().router.list_all() {
            let input = serde_json::Value::Object(tool.input_schema.as_ref().clone());
            let problems = super::super::schema::portability_problems(&input);
            assert!(problems.is_empty(), "{}: {problems:?}", tool.name);
            assert_eq!(input["type"], "object", "{}", tool.name);
            assert!(tool.output_schema.is_none(), "{}", tool.name);
        }
    }

    /// A call given a cluster's name reaches every member unasked only for a tool that looks
    /// or only stops; a tool asks on `all: true` exactly when it takes `all`.
    #[test]
    fn only_tools_that_look_or_stop_ask_every_member_unasked() {
        for line in McpServer::routers_by_set() {
            for tool in line.router.list_all() {
                let hint = |h: fn(&rmcp::model::ToolAnnotations) -> Option<bool>| {
                    tool.annotations.as_ref().and_then(h) == Some(true)
                };
                let takes_all = tool
                    .input_schema
                    .get("properties")
                    .and_then(|p| p.get(super::super::fanout::EVERY_MEMBER))
                    .is_some();
                if line.on_cluster == OnCluster::Asks(FanOut::Always) {
                    let looks_or_stops = hint(|a| a.read_only_hint) || hint(|a| a.idempotent_hint);
                    assert!(looks_or_stops, "{} changes things", tool.name);
                }
                let opt_in = line.on_cluster == OnCluster::Asks(FanOut::OptIn);
                assert_eq!(opt_in, takes_all, "{}", tool.name);
            }
        }
    }
}
