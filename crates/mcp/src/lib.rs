//! The MCP interface: stateless protocol translation onto the kernel.
//!
//! One handler type serves stdio and streamable HTTP, MCP 2025-11-25 (sessions) and
//! 2026-07-28 (stateless). rmcp creates a handler per session or per request, so the
//! handler holds only `Arc`s; identity is read from each request (see [`caller`]).
//!
//! Tool visibility: the lead sees every tool; an agent sees only the context tools.
//! This is enforced in one place ([`AgentWorker::call_tool`]) and mirrored in
//! `tools/list`.

pub mod client_configs;
pub mod complete;
pub mod dashboard;
pub mod elicit;
pub mod era;
pub mod http;
pub mod input_required;
pub mod jsonrpc;
pub mod prompts;
pub mod resources;
pub mod schemas;
pub mod skills;
pub mod stdio;
pub mod subscriptions;
pub mod tasks;
pub mod tools;

use kernel::{Caller, Kernel};
use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    handler::server::{router::tool::ToolRouter, tool::ToolCallContext},
    model::*,
    service::{RequestContext, SubscriptionContext},
};
use std::collections::HashSet;
use std::sync::Arc;

pub const SERVER_NAME: &str = "agent-worker";

const INSTRUCTIONS: &str = "agent-worker runs teams of AI agents. As the lead you create agents \
(agent_new) or run a whole team from a YAML workflow (workflow_run, then workflow_status), talk to \
them in a shared channel (channel_send with @mentions, channel_read): a message that @mentions an \
agent wakes it at once. Schedules (schedule_set) run agents on an interval or cron; guards pause \
runaway agents and say why. Watch them with agent_info and team_members. Teams share documents \
(team_doc_*), long content as resources (resource_create), and decide by vote (team_proposal_create, \
team_vote). Agents see only the context tools, scoped to their own workflow instance. Use agent_join \
to let an external MCP client act as an agent. How to run teams well (patterns, coding teams with \
worktrees and merges, a contracts cookbook): skill://agent-worker-teams/SKILL.md, also the prompt \
teams-guide.";

/// The tool table, built once per process and shared by every handler instance.
pub struct Tools {
    router: ToolRouter<AgentWorker>,
    /// Tools only the lead may see and call.
    management: HashSet<String>,
    /// Every tool as clients see it: schemas made portable (see [`schemas`]).
    listed: Vec<Tool>,
    /// The lead's tools as a host that renders MCP Apps sees them: with the
    /// dashboard's links and its app-only tools (see [`dashboard`]).
    with_apps: Vec<Tool>,
    /// The tools an agent may see, without the lead's `workflow` argument (an
    /// agent acts in its own instance).
    for_agents: Vec<Tool>,
    /// Resource subscriptions of every session (started with the first one).
    hub: std::sync::OnceLock<Arc<subscriptions::Hub>>,
    /// agent_ask and workflow_run run as tasks (see [`tasks`]).
    tasks: rmcp::task_manager::TaskManager,
}

impl Tools {
    pub fn new() -> Arc<Self> {
        let management = AgentWorker::management_tools() + AgentWorker::dashboard_tools();
        let names: HashSet<String> = management
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        let router = management + AgentWorker::context_tools();
        let listed = router
            .list_all()
            .into_iter()
            .map(|mut t| {
                let mut input = (*t.input_schema).clone();
                schemas::portable(&mut input, true);
                t.input_schema = Arc::new(input);
                if let Some(o) = &t.output_schema {
                    let mut out = (**o).clone();
                    schemas::portable(&mut out, false);
                    t.output_schema = Some(Arc::new(out));
                }
                t
            })
            .collect::<Vec<Tool>>();
        let with_apps = dashboard::decorate(&listed);
        let listed: Vec<Tool> = listed
            .into_iter()
            .filter(|t| !dashboard::APP_ONLY.contains(&t.name.as_ref()))
            .collect();
        let for_agents = listed
            .iter()
            .filter(|t| !names.contains(t.name.as_ref()))
            .map(|t| {
                let mut t = t.clone();
                let mut input = (*t.input_schema).clone();
                schemas::without(&mut input, "workflow");
                t.input_schema = Arc::new(input);
                t
            })
            .collect();
        Arc::new(Self {
            router,
            management: names,
            listed,
            with_apps,
            for_agents,
            hub: std::sync::OnceLock::new(),
            tasks: rmcp::task_manager::TaskManager::new(),
        })
    }

    pub fn is_management(&self, name: &str) -> bool {
        self.management.contains(name)
    }

    /// A tool as `caller` sees it (`apps`: from a host that renders the dashboard).
    fn get(&self, caller: &Caller, apps: bool, name: &str) -> Option<&Tool> {
        self.seen_by(caller, apps).iter().find(|t| t.name == name)
    }

    fn seen_by(&self, caller: &Caller, apps: bool) -> &[Tool] {
        match caller {
            Caller::Lead if apps => &self.with_apps,
            Caller::Lead => &self.listed,
            Caller::Agent(_) => &self.for_agents,
        }
    }

    fn visible_to(&self, caller: &Caller, apps: bool) -> Vec<Tool> {
        self.seen_by(caller, apps)
            .iter()
            // How a worker run asks before a tool runs: only runs see it.
            .filter(|t| {
                t.name != tools::contracts::PERMISSION_TOOL
                    || matches!(caller, Caller::Agent(a) if a.run_id.is_some())
            })
            .cloned()
            .collect()
    }
}

/// The rmcp handler. Cheap to clone: rmcp may build one per request.
#[derive(Clone)]
pub struct AgentWorker {
    pub(crate) kernel: Arc<Kernel>,
    tools: Arc<Tools>,
}

impl AgentWorker {
    pub fn new(kernel: Arc<Kernel>, tools: Arc<Tools>) -> Self {
        let me = Self { kernel, tools };
        // Subscriptions hear of events from the first session on.
        me.hub();
        me
    }

    fn hub(&self) -> &Arc<subscriptions::Hub> {
        self.tools
            .hub
            .get_or_init(|| subscriptions::Hub::start(&self.kernel))
    }
}

/// A subscription refused for what it would hold: the limit, as invalid params.
fn refused(e: subscriptions::budget::Refused) -> McpError {
    McpError::invalid_params(e.to_string(), None)
}

/// Who sent this request. Over HTTP the auth layer has put a [`Caller`] into the
/// request's extensions; over stdio there are no HTTP parts and the caller is the lead.
/// Tasks are the lead's: an agent is told none exists.
fn lead_only(context: &RequestContext<RoleServer>, task_id: &str) -> Result<(), McpError> {
    if caller(context)?.is_lead() {
        Ok(())
    } else {
        Err(McpError::invalid_params(
            format!("unknown task {task_id:?}"),
            None,
        ))
    }
}

/// The tools, prompts and templates fit on one page: a cursor for them can only be a
/// client's mistake (resources/list pages with its own cursor).
fn no_cursor(method: &str, request: Option<PaginatedRequestParams>) -> Result<(), McpError> {
    match request.and_then(|r| r.cursor) {
        Some(cursor) => Err(McpError::invalid_params(
            format!(
                "unknown cursor {cursor:?}: {method} returns everything on one page; call it without a cursor"
            ),
            None,
        )),
        None => Ok(()),
    }
}

pub(crate) fn caller(ctx: &RequestContext<RoleServer>) -> Result<Caller, McpError> {
    match ctx.extensions.get::<::http::request::Parts>() {
        None => Ok(Caller::Lead),
        Some(parts) => parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| McpError::invalid_request("unauthenticated request", None)),
    }
}

impl ServerHandler for AgentWorker {
    #[allow(deprecated)] // logging is legacy (SEP-2577); 2025-11-25 clients use it
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_logging()
            .enable_tasks()
            .enable_completions()
            .enable_skills()
            .build();
        // MCP Apps: the dashboard, for a lead whose host renders it.
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(dashboard::EXTENSION.into(), Default::default());
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let who = caller(&context)?;
        let apps = dashboard::offered(&who, &context);
        let hidden = !apps && dashboard::APP_ONLY.contains(&request.name.as_ref());
        if hidden || (!who.is_lead() && self.tools.is_management(&request.name)) {
            // Same answer as for a tool that does not exist: agents cannot probe for it.
            return Err(McpError::invalid_params(
                format!("tool not found: {}", request.name),
                None,
            ));
        }
        if who.is_lead()
            && let Some(now) = renamed(&request.name)
        {
            return Err(McpError::invalid_params(
                format!("tool not found: {}; it is now {now}", request.name),
                None,
            ));
        }
        if let (Some(tool), Some(args)) = (
            self.tools.get(&who, apps, &request.name),
            &request.arguments,
        ) && let Some(why) = schemas::unknown_arguments(&request.name, &tool.input_schema, args)
        {
            return Ok(CallToolResult::error(vec![ContentBlock::text(why)]).into());
        }
        if tasks::wanted(&request, &context) {
            return tasks::start(self, &self.tools.tasks, request, context);
        }
        let tcc = ToolCallContext::new(self, request, context);
        self.tools.router.call(tcc).await
    }

    /// Values for prompt arguments and resource-template variables.
    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let who = caller(&context)?;
        complete::complete(&self.kernel, &who, &request).await
    }

    /// The lead's tasks only (agents have none, and may not look at the lead's).
    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        lead_only(&context, &request.task_id)?;
        Ok(GetTaskResult::new(
            self.tools.tasks.get_task(&request.task_id)?,
        ))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        lead_only(&context, &request.task_id)?;
        self.tools
            .tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        lead_only(&context, &request.task_id)?;
        self.tools.tasks.cancel_task(&request.task_id)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let who = caller(&context)?;
        no_cursor("tools/list", request)?;
        let apps = dashboard::offered(&who, &context);
        Ok(ListToolsResult::with_all_items(
            self.tools.visible_to(&who, apps),
        ))
    }

    /// The lead's prompts (agents have none).
    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let who = caller(&context)?;
        no_cursor("prompts/list", request)?;
        Ok(ListPromptsResult::with_all_items(if who.is_lead() {
            prompts::list()
        } else {
            Vec::new()
        }))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if !caller(&context)?.is_lead() {
            return Err(McpError::invalid_params(
                format!("unknown prompt {:?}: agents have no prompts", request.name),
                None,
            ));
        }
        Ok(prompts::get(&request.name, request.arguments.as_ref())?.into())
    }

    /// What the caller may read (its own instance and inbox for an agent), a page
    /// at a time (`nextCursor`).
    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let who = caller(&context)?;
        let cursor = request.and_then(|r| r.cursor);
        let (mut page, next) = resources::list(&self.kernel, &who, cursor.as_deref()).await?;
        if cursor.is_none() && dashboard::offered(&who, &context) {
            page.insert(0, dashboard::listed());
        }
        // A session that lists resources hears when the list changes.
        self.hub().watch_list(
            subscriptions::watcher_key(&who, &context),
            subscriptions::budget::owner(&who),
            context.peer.clone(),
        );
        let mut result = ListResourcesResult::with_all_items(page);
        result.next_cursor = next;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let who = caller(&context)?;
        no_cursor("resources/templates/list", request)?;
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(&who),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let who = caller(&context)?;
        if request.uri == dashboard::URI && who.is_lead() {
            return Ok(dashboard::read().into());
        }
        if skills::is_skill_uri(&request.uri) {
            return Ok(skills::read(&self.kernel, &who, &request.uri).await?.into());
        }
        Ok(resources::read(&self.kernel, &who, &request.uri)
            .await?
            .into())
    }

    /// The caller's skills (the Skills extension): an agent's own, the lead's
    /// know-how of running teams.
    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        let who = caller(&context)?;
        Ok(ListSkillsResult::with_all_items(
            skills::list(&self.kernel, &who).await?,
        ))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        let who = caller(&context)?;
        Ok(GetSkillResult::new(
            skills::get(&self.kernel, &who, &request.uri).await?,
        ))
    }

    /// The lead's clients hear what it should notice (an agent paused or failed, a
    /// guard tripped, a workflow run done, blocked or failed) at this level or above.
    /// Agents have nothing to hear: their level is accepted and changes nothing.
    #[allow(deprecated)] // logging is legacy (SEP-2577); 2025-11-25 clients use it
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if caller(&context)?.is_lead() {
            self.hub().set_level(
                subscriptions::session_key(&context),
                context.peer.clone(),
                request.level,
            );
        }
        Ok(())
    }

    /// Legacy (2025-11-25, stdio) resource subscriptions.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let who = caller(&context)?;
        resources::authorize(&self.kernel, &who, &request.uri).await?;
        self.hub()
            .subscribe(
                subscriptions::watcher_key(&who, &context),
                subscriptions::budget::owner(&who),
                context.peer.clone(),
                request.uri,
            )
            .map_err(refused)
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let who = caller(&context)?;
        self.hub()
            .unsubscribe(&subscriptions::watcher_key(&who, &context), &request.uri);
        Ok(())
    }

    /// 2026-07-28 clients ask for resource updates and list changes here.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut f = SubscriptionFilter::new();
        let asked = requested
            .resource_subscriptions
            .as_deref()
            .unwrap_or_default();
        // A filter over the limits is refused by `listen`, which knows who asks;
        // until then none of it is accepted, so rmcp's intersection of the accepted
        // with the requested (quadratic) stays cheap.
        f.resource_subscriptions = match subscriptions::budget::check_filter(asked) {
            Ok(_) => requested.resource_subscriptions.clone(),
            Err(_) => Some(Vec::new()),
        };
        f.resources_list_changed = requested.resources_list_changed;
        Some(f)
    }

    async fn listen(&self, cx: SubscriptionContext) -> Result<(), McpError> {
        let who = caller(cx.request_context())?;
        // Bounded before anything is read (what was asked, not only what rmcp
        // accepted of it): held until the listen ends.
        let _lease = subscriptions::budget::Lease::listen(
            self.hub().budgets(),
            subscriptions::budget::owner(&who),
            cx.requested()
                .resource_subscriptions
                .as_deref()
                .unwrap_or_default(),
        )
        .map_err(refused)?;
        let asked = cx
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        // What the caller may not read, it does not hear about.
        let watched = subscriptions::authorized(&self.kernel, &who, &asked).await;
        let list_changed = cx.accepted().resources_list_changed == Some(true);
        let (mut rx, missed) = self.hub().changes();
        let tell = async |change: &subscriptions::Change| -> bool {
            for uri in change.uris.iter().filter(|u| watched.contains(*u)) {
                if cx
                    .sink()
                    .notify_resource_updated(uri.clone())
                    .await
                    .is_err()
                {
                    return false;
                }
            }
            !(list_changed
                && change.list_changed
                && cx.sink().notify_resource_list_changed().await.is_err())
        };
        for change in &missed {
            if !tell(change).await {
                return Ok(());
            }
        }
        loop {
            tokio::select! {
                _ = cx.cancelled() => return Ok(()),
                change = rx.recv() => {
                    let change = match change {
                        Ok(c) => c,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
                    };
                    if !tell(&change).await {
                        return Ok(());
                    }
                }
            }
        }
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.get(&Caller::Lead, true, name).cloned()
    }
}

/// A tool folded into another, and its call now (for a lead's old script).
fn renamed(tool: &str) -> Option<&'static str> {
    match tool {
        "agent_resume" => Some("agent_pause {target, resume: true}"),
        "schedule_clear" => Some("schedule_set {target, clear: true}"),
        _ => None,
    }
}
