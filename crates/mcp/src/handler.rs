//! The rmcp handler: each MCP request the server serves, in a span of its own
//! when traces are exported ([`crate::traced`]), dispatched by who calls.

use super::{
    AgentWorker, INSTRUCTIONS, SERVER_NAME, caller, complete, dashboard, prompts, resources,
    schemas, skills, subscriptions, tasks,
};
use crate::traced;
use kernel::Caller;
use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    handler::server::tool::ToolCallContext,
    model::*,
    service::{RequestContext, SubscriptionContext},
};

/// A subscription refused for what it would hold: the limit, as invalid params.
fn refused(e: subscriptions::budget::Refused) -> McpError {
    McpError::invalid_params(e.to_string(), None)
}

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
        let span = traced::start(&context, "tools/call", Some(&request.name));
        traced::run(span, async move {
            let who = caller(&context)?;
            // Only the dashboard's tools depend on the client's declaration (whose
            // reading, per request in 2026-07-28, stays off every other call).
            let hosted = dashboard::HOSTED.contains(&request.name.as_ref());
            let apps = hosted && dashboard::offered(&who, &context);
            let hidden = hosted && !apps;
            if hidden
                || (!who.is_lead() && self.tools.is_management(&request.name))
                || self.tools.is_withheld(&who, &request.name)
            {
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
            ) && let Some(why) =
                schemas::unknown_arguments(&request.name, &tool.input_schema, args)
            {
                return Ok(CallToolResult::error(vec![ContentBlock::text(why)]).into());
            }
            if tasks::wanted(&request, &context) {
                return tasks::start(self, &self.tools.tasks, request, context);
            }
            let tool = request.name.clone();
            let tcc = ToolCallContext::new(self, request, context);
            let mut r = self.tools.router.call(tcc).await;
            if let Ok(CallToolResponse::Complete(done)) = &mut r {
                if done.is_error == Some(true) {
                    telemetry::note("error.type", "tool_error");
                }
                self.add_news(&who, &tool, done).await;
            }
            r
        })
        .await
    }

    /// Values for prompt arguments and resource-template variables.
    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let span = traced::start(&context, "completion/complete", None);
        traced::run(span, async move {
            let who = caller(&context)?;
            complete::complete(&self.kernel, &who, &request).await
        })
        .await
    }

    /// The lead's tasks only (agents have none, and may not look at the lead's).
    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let span = traced::start(&context, "tasks/get", None);
        traced::run(span, async move {
            lead_only(&context, &request.task_id)?;
            Ok(GetTaskResult::new(
                self.tools.tasks.get_task(&request.task_id)?,
            ))
        })
        .await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let span = traced::start(&context, "tasks/update", None);
        traced::run(span, async move {
            lead_only(&context, &request.task_id)?;
            self.tools
                .tasks
                .update_task(&request.task_id, request.input_responses)
        })
        .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let span = traced::start(&context, "tasks/cancel", None);
        traced::run(span, async move {
            lead_only(&context, &request.task_id)?;
            self.tools.tasks.cancel_task(&request.task_id)
        })
        .await
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let span = traced::start(&context, "tools/list", None);
        traced::run(span, async move {
            let who = caller(&context)?;
            no_cursor("tools/list", request)?;
            let apps = dashboard::offered(&who, &context);
            Ok(ListToolsResult::with_all_items(
                self.tools.visible_to(&who, apps),
            ))
        })
        .await
    }

    /// The lead's prompts (agents have none).
    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let span = traced::start(&context, "prompts/list", None);
        traced::run(span, async move {
            let who = caller(&context)?;
            no_cursor("prompts/list", request)?;
            Ok(ListPromptsResult::with_all_items(if who.is_lead() {
                prompts::list()
            } else {
                Vec::new()
            }))
        })
        .await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let span = traced::start(&context, "prompts/get", Some(&request.name));
        traced::run(span, async move {
            if !caller(&context)?.is_lead() {
                return Err(McpError::invalid_params(
                    format!("unknown prompt {:?}: agents have no prompts", request.name),
                    None,
                ));
            }
            let args = request.arguments.as_ref();
            let feedback = prompts::feedback_for(&self.kernel, &request.name, args).await;
            Ok(prompts::get(&request.name, args, feedback.as_deref())?.into())
        })
        .await
    }

    /// What the caller may read (its own instance and inbox for an agent), a page
    /// at a time (`nextCursor`).
    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let span = traced::start(&context, "resources/list", None);
        traced::run(span, async move {
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
        })
        .await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let span = traced::start(&context, "resources/templates/list", None);
        traced::run(span, async move {
            let who = caller(&context)?;
            no_cursor("resources/templates/list", request)?;
            Ok(ListResourceTemplatesResult::with_all_items(
                resources::templates(&who),
            ))
        })
        .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let span = traced::start(&context, "resources/read", None);
        traced::run(span, async move {
            let who = caller(&context)?;
            if request.uri == dashboard::URI && dashboard::offered(&who, &context) {
                return Ok(dashboard::read().into());
            }
            if skills::is_skill_uri(&request.uri) {
                return Ok(skills::read(&self.kernel, &who, &request.uri).await?.into());
            }
            Ok(resources::read(&self.kernel, &who, &request.uri)
                .await?
                .into())
        })
        .await
    }

    /// The caller's skills (the Skills extension): an agent's own, the lead's
    /// know-how of running teams.
    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        let span = traced::start(&context, "skills/list", None);
        traced::run(span, async move {
            let who = caller(&context)?;
            Ok(ListSkillsResult::with_all_items(
                skills::list(&self.kernel, &who).await?,
            ))
        })
        .await
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        let span = traced::start(&context, "skills/get", None);
        traced::run(span, async move {
            let who = caller(&context)?;
            Ok(GetSkillResult::new(
                skills::get(&self.kernel, &who, &request.uri).await?,
            ))
        })
        .await
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
        let span = traced::start(&context, "logging/setLevel", None);
        traced::run(span, async move {
            if caller(&context)?.is_lead() {
                self.hub().set_level(
                    subscriptions::session_key(&context),
                    context.peer.clone(),
                    request.level,
                );
            }
            Ok(())
        })
        .await
    }

    /// Legacy (2025-11-25, stdio) resource subscriptions.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let span = traced::start(&context, "resources/subscribe", None);
        traced::run(span, async move {
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
        })
        .await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let span = traced::start(&context, "resources/unsubscribe", None);
        traced::run(span, async move {
            let who = caller(&context)?;
            self.hub()
                .unsubscribe(&subscriptions::watcher_key(&who, &context), &request.uri);
            Ok(())
        })
        .await
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
        subscriptions::listen::run(self.hub(), &self.kernel, &who, &cx)
            .await
            .map_err(refused)
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

impl AgentWorker {
    /// A worker run's team tool result ends with a short line when messages wait
    /// unread for its agent (see `kernel::messaging::news`): a backend with no way
    /// into a running turn learns of them when it next touches the team. Not on
    /// my_inbox (it shows them whole) nor on permission_request, whose one text
    /// block is JSON its CLI parses.
    async fn add_news(&self, who: &Caller, tool: &str, done: &mut CallToolResult) {
        let Caller::Agent(a) = who else { return };
        let machine_read = tool == crate::tools::contracts::PERMISSION_TOOL;
        if a.run_id.is_none() || tool.starts_with("my_inbox") || machine_read {
            return;
        }
        if let Ok(Some(line)) = self.kernel.messaging().news(a.workflow_id, &a.name).await {
            done.content.push(ContentBlock::text(line));
        }
    }
}
