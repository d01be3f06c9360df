//! Workflow tools (the lead only): workflow_run, workflow_status, workflow_stop,
//! workflow_list, and workflow_context_set.
//!
//! workflow_context_set sets an instance's document settings.
//! Not in the original catalogue: a workflow YAML's `context:` sets the same things when
//! it runs, but an instance made with agent_new (including `@global:main`) had no way to
//! name a document owner or choose a provider. This keeps the two paths equal.

use super::params::Parameters;
use super::{Progress, ToolError, caller, given, wait_seconds};
use crate::AgentWorker;
use crate::input_required::{Round, Waited};
use kernel::context::documents::settings::{ContextChange, ContextView};
use kernel::workflows::run::Source;
use kernel::workflows::{WorkflowListed, WorkflowStatus};
use rmcp::handler::server::tool::{InputResponses, RequestState, schema_for_output};
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ContextArgs {
    /// E.g. "@review:pr-1" (default "@global:main").
    #[serde(default)]
    #[schemars(with = "String")]
    pub workflow: Option<String>,

    #[serde(default)]
    #[schemars(with = "String", extend("enum" = ["file", "sqlite"]))]
    pub documents: Option<String>,
    /// Absolute ("" for the default).
    #[serde(default)]
    #[schemars(with = "String")]
    pub documents_dir: Option<String>,
    /// The one agent who may write ("" for everyone).
    #[serde(default)]
    #[schemars(with = "String")]
    pub document_owner: Option<String>,
}

impl AgentWorker {
    /// Waits up to `wait` for an instance to stop running, asking the lead about
    /// approvals meanwhile (not when it does not wait).
    async fn wait_for<S: serde::Serialize + serde::de::DeserializeOwned>(
        &self,
        round: Round<S>,
        ctx: &RequestContext<RoleServer>,
        (workflow, resume): (String, S),
        wait: std::time::Duration,
    ) -> Result<Waited<WorkflowStatus>, ToolError> {
        let progress = Progress::start(ctx);
        let status = async {
            Ok(self
                .kernel
                .workflows()
                .workflow_wait(&workflow, wait, |m| progress.send(m))
                .await?)
        };
        if wait.is_zero() {
            return Ok(Waited::Done(status.await?));
        }
        round.wait(&self.kernel, ctx, status, resume).await
    }
}

#[tool_router(router = workflow_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// How an instance keeps its documents: `documents` "file" (default) or "sqlite", a folder
    /// to bind, an owner. What is left out stays.
    #[tool(
        title = "Set documents of a workflow",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn workflow_context_set(
        &self,
        Parameters(a): Parameters<ContextArgs>,
    ) -> Result<Json<ContextView>, ToolError> {
        let change = ContextChange {
            documents: given(&a.documents).map(str::to_owned),
            dir: a.documents_dir,
            owner: a.document_owner,
        };
        Ok(Json(
            self.kernel
                .context()
                .workflow_context_set(given(&a.workflow).unwrap_or("@global:main"), change)
                .await?,
        ))
    }
}

pub const DEFAULT_RUN_WAIT: u64 = 0;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct WorkflowRunArgs {
    #[serde(default)]
    #[schemars(with = "String")]
    pub file: Option<String>,

    #[serde(default)]
    #[schemars(with = "String")]
    pub yaml: Option<String>,
    /// Default "main"; each tag is its own instance.
    #[serde(default)]
    #[schemars(with = "String")]
    pub tag: Option<String>,

    #[serde(default)]
    pub params: serde_json::Map<String, serde_json::Value>,
    /// An organisation to run within (default: the YAML's `org`).
    #[serde(default)]
    #[schemars(with = "String")]
    pub org: Option<String>,
    /// 0..=50 (default 0).
    #[serde(default)]
    #[schemars(with = "i64", range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct WorkflowArgs {
    pub workflow: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct WorkflowStatusArgs {
    pub workflow: String,
    /// 0..=50: wait for it to stop running.
    #[serde(default)]
    #[schemars(with = "i64", range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct StoppedOut {
    pub workflow: String,
    /// How many runs in progress were stopped.
    pub stopped: usize,
    /// Its worktree agents' branches: kept, with how to merge or discard them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub branches: Vec<String>,
}

/// The newest hook deliveries workflow_list shows.
const HOOK_DELIVERIES_SHOWN: i64 = 20;

#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkflowsOut {
    pub workflows: Vec<WorkflowListed>,
    /// Every organisation, `global` first: its members, the instances run within it and
    /// its channel's instance (org_set makes and changes them).
    pub organisations: Vec<kernel::registry::orgs::OrgView>,
    /// The hooks (hook_set), without their secrets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<kernel::hooks::HookView>,
    /// Their newest deliveries, newest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hook_deliveries: Vec<kernel::hooks::DeliveryView>,
}

#[tool_router(router = workflow_run_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Run a workflow from YAML (`file` or `yaml`) as @name:tag with `params` {"pr": 123}.
    /// YAML mistakes come back with file:line:column and start nothing.
    #[tool(
        title = "Run a workflow",
        output_schema = schema_for_output::<WorkflowStatus>(),
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    async fn workflow_run(
        &self,
        Parameters(a): Parameters<WorkflowRunArgs>,
        RequestState(state): RequestState,
        InputResponses(answers): InputResponses,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Waited<WorkflowStatus>, ToolError> {
        caller(&ctx)?;
        let wait = wait_seconds(a.wait_seconds, DEFAULT_RUN_WAIT, "workflow_status")?;
        let source = match (
            given(&a.file),
            a.yaml.as_deref().filter(|y| !y.trim().is_empty()),
        ) {
            (Some(f), None) => Source::File(f.into()),
            (None, Some(y)) => Source::Text(y.to_owned()),
            (Some(_), Some(_)) => {
                return Err(ToolError("give either `file` or `yaml`, not both".into()));
            }
            (None, None) => {
                return Err(ToolError(
                    "give `file` (a path to a workflow YAML) or `yaml` (its text)".into(),
                ));
            }
        };
        // A retry resumes the instance its first round started (never started twice),
        // and still says what the start warned of.
        let round = Round::<(String, Vec<String>)>::begin(
            &self.kernel,
            &ctx,
            "workflow_run",
            state,
            answers,
        )
        .await?;
        let (wref, warnings) = match round.resumed() {
            Some(w) => w.clone(),
            None => {
                // Its `hooks:` post into it from now on (refused first when
                // another holds one of their names).
                let s = self
                    .kernel
                    .hooks
                    .start((source, given(&a.tag)), &a.params, (given(&a.org), false))
                    .await?;
                (s.workflow.to_string(), s.warnings)
            }
        };
        let resume = (wref.clone(), warnings.clone());
        Ok(
            match self.wait_for(round, &ctx, (wref, resume), wait).await? {
                Waited::Done(mut s) => {
                    s.warnings = warnings;
                    Waited::Done(s)
                }
                asks => asks,
            },
        )
    }

    /// A `workflow` instance's status (running, completed, scheduled, blocked, failed or
    /// stopped, with why), agents, runs, usage and main document.
    #[tool(
        title = "Workflow status",
        output_schema = schema_for_output::<WorkflowStatus>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn workflow_status(
        &self,
        Parameters(a): Parameters<WorkflowStatusArgs>,
        RequestState(state): RequestState,
        InputResponses(answers): InputResponses,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Waited<WorkflowStatus>, ToolError> {
        caller(&ctx)?;
        let wait = wait_seconds(a.wait_seconds, 0, "workflow_status")?;
        let round =
            Round::<String>::begin(&self.kernel, &ctx, "workflow_status", state, answers).await?;
        let resume = a.workflow.clone();
        self.wait_for(round, &ctx, (a.workflow, resume), wait).await
    }

    /// Stop a `workflow` instance's workers and schedules; its channel and documents stay.
    #[tool(
        title = "Stop a workflow",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn workflow_stop(
        &self,
        Parameters(a): Parameters<WorkflowArgs>,
    ) -> Result<Json<StoppedOut>, ToolError> {
        let (stopped, branches) = self.kernel.workflows().workflow_stop(&a.workflow).await?;
        Ok(Json(StoppedOut {
            workflow: a.workflow,
            stopped,
            branches,
        }))
    }

    /// Every workflow instance (newest first, status, times), organisation (members,
    /// instances) and hook (deliveries).
    #[tool(
        title = "List workflows",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn workflow_list(&self) -> Result<Json<WorkflowsOut>, ToolError> {
        Ok(Json(WorkflowsOut {
            workflows: self.kernel.workflows().workflow_list().await?,
            organisations: self.kernel.registry().org_list().await?,
            hooks: self.kernel.hooks.hook_list().await?,
            hook_deliveries: self.kernel.hooks.deliveries(HOOK_DELIVERIES_SHOWN).await?,
        }))
    }
}
