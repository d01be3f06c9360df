//! The MCP interface: stateless protocol translation onto the kernel.
//!
//! One handler type serves stdio and streamable HTTP, MCP 2025-11-25 (sessions) and
//! 2026-07-28 (stateless). rmcp creates a handler per session or per request, so the
//! handler holds only `Arc`s; identity is read from each request (see [`caller`]).
//!
//! Tool visibility: the lead sees every tool but an agent's own; an agent sees only
//! the context tools, and the delegation tools (team_agent_*) when its definition
//! carries `delegate` (read with its identity, per request). This is enforced in
//! one place ([`AgentWorker::call_tool`]) and mirrored in `tools/list`.

pub mod client_configs;
pub mod complete;
pub mod dashboard;
pub mod elicit;
pub mod era;
mod handler;
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
mod traced;

use kernel::{Caller, Kernel};
use rmcp::{
    ErrorData as McpError, RoleServer, handler::server::router::tool::ToolRouter, model::*,
    service::RequestContext,
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
/// The context tools an agent may point at its organisation's instance (its
/// channel, documents, members and its organisation inbox), if it is a member.
const ORG_SCOPED: &[&str] = &[
    "channel_read",
    "channel_send",
    "my_inbox",
    "my_inbox_ack",
    "my_inbox_defer",
    "team_members",
    "team_doc_read",
    "team_doc_list",
    "team_doc_write",
    "team_doc_append",
    "team_doc_create",
];
const ORG_WORKFLOW: &str = "Or @org.<name>, your organisation's.";

pub struct Tools {
    router: ToolRouter<AgentWorker>,
    /// Tools only the lead may see and call.
    management: HashSet<String>,
    /// Tools only an agent allowed to delegate may see and call.
    delegating: HashSet<String>,
    /// Every tool as clients see it: schemas made portable (see [`schemas`]).
    listed: Vec<Tool>,
    /// The lead's tools as a host that renders MCP Apps sees them: with the
    /// dashboard's links and its app-only tools (see [`dashboard`]).
    with_apps: Vec<Tool>,
    /// The tools an agent may see, without the lead's `workflow` argument (an
    /// agent acts in its own instance).
    for_agents: Vec<Tool>,
    /// What an agent allowed to delegate sees: [`Self::for_agents`] and the
    /// delegation tools.
    for_delegates: Vec<Tool>,
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
        let delegating: HashSet<String> = AgentWorker::delegating_tools()
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        let router = management + AgentWorker::context_tools() + AgentWorker::delegating_tools();
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
        let (own, listed): (Vec<Tool>, Vec<Tool>) = listed
            .into_iter()
            .partition(|t| delegating.contains(t.name.as_ref()));
        let with_apps = dashboard::decorate(&listed);
        let listed: Vec<Tool> = listed
            .into_iter()
            .filter(|t| !dashboard::HOSTED.contains(&t.name.as_ref()))
            .collect();
        let for_agents: Vec<Tool> = listed
            .iter()
            .filter(|t| !names.contains(t.name.as_ref()))
            .map(|t| {
                let mut t = t.clone();
                let mut input = (*t.input_schema).clone();
                if ORG_SCOPED.contains(&t.name.as_ref()) {
                    schemas::describe(&mut input, "workflow", ORG_WORKFLOW);
                } else {
                    schemas::without(&mut input, "workflow");
                }
                t.input_schema = Arc::new(input);
                t
            })
            .collect();
        let for_delegates = for_agents.iter().chain(&own).cloned().collect();
        Arc::new(Self {
            router,
            management: names,
            delegating,
            for_delegates,
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

    /// Whether `name` is a tool `caller` may not call for want of `delegate`.
    pub fn is_withheld(&self, caller: &Caller, name: &str) -> bool {
        self.delegating.contains(name) && !matches!(caller, Caller::Agent(a) if a.delegates)
    }

    /// A tool as `caller` sees it (`apps`: from a host that renders the dashboard).
    fn get(&self, caller: &Caller, apps: bool, name: &str) -> Option<&Tool> {
        self.seen_by(caller, apps).iter().find(|t| t.name == name)
    }

    fn seen_by(&self, caller: &Caller, apps: bool) -> &[Tool] {
        match caller {
            Caller::Lead if apps => &self.with_apps,
            Caller::Lead => &self.listed,
            Caller::Agent(a) if a.delegates => &self.for_delegates,
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

/// Who sent this request. Over HTTP the auth layer has put a [`Caller`] into the
/// request's extensions; over stdio there are no HTTP parts and the caller is the lead.
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
