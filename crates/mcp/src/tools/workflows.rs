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
    /// The workflow instance, e.g. "@review:pr-1" (default "@global:main"; created if new).
    #[serde(default)]
    #[schemars(with = "String")]
    pub workflow: Option<String>,
    /// Where documents are stored: "file" (real files, the default) or "sqlite" (in the database).
    /// Refused while the current store holds documents (they are not moved).
    #[serde(default)]
    #[schemars(with = "String", extend("enum" = ["file", "sqlite"]))]
    pub documents: Option<String>,
    /// File provider: an existing absolute folder to keep the documents in, e.g. a project's docs
    /// folder ("" = back to the data dir's own folder for this instance).
    #[serde(default)]
    #[schemars(with = "String")]
    pub documents_dir: Option<String>,
    /// The agent who alone (with the lead) may write documents; others must use
    /// document_suggest ("" = everyone may write).
    #[serde(default)]
    #[schemars(with = "String")]
    pub document_owner: Option<String>,
}

impl AgentWorker {
    /// Waits up to `wait` for an instance to stop running, asking the lead about
    /// approvals meanwhile (not when it does not wait).
    async fn wait_for(
        &self,
        round: Round<String>,
        ctx: &RequestContext<RoleServer>,
        workflow: String,
        wait: std::time::Duration,
    ) -> Result<Waited<WorkflowStatus>, ToolError> {
        let progress = Progress::start(ctx);
        let status = async {
            Ok(self
                .kernel
                .workflow_wait(&workflow, wait, |m| progress.send(m))
                .await?)
        };
        if wait.is_zero() {
            return Ok(Waited::Done(status.await?));
        }
        round
            .wait(&self.kernel, ctx, status, workflow.clone())
            .await
    }
}

#[tool_router(router = workflow_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Set how a workflow instance keeps its shared documents: `documents` (file or sqlite), a
    /// folder to bind, and a document owner. Leave an argument out to keep its setting. Returns
    /// the settings now in force.
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
                .workflow_context_set(given(&a.workflow).unwrap_or("@global:main"), change)
                .await?,
        ))
    }
}

pub const DEFAULT_RUN_WAIT: u64 = 0;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct WorkflowRunArgs {
    /// Path of a workflow YAML file (absolute, or relative to the server's working directory).
    #[serde(default)]
    #[schemars(with = "String")]
    pub file: Option<String>,
    /// The workflow YAML itself, instead of `file`.
    #[serde(default)]
    #[schemars(with = "String")]
    pub yaml: Option<String>,
    /// The instance tag (default "main"): the same workflow runs side by side under
    /// different tags, e.g. "pr-123", each with its own channel, inboxes and documents.
    #[serde(default)]
    #[schemars(with = "String")]
    pub tag: Option<String>,
    /// Values for the workflow's params, e.g. {"pr": 123}.
    #[serde(default)]
    pub params: serde_json::Map<String, serde_json::Value>,
    /// Wait up to this many seconds (0..=50, default 0) for it to finish; progress
    /// notifications show what happens meanwhile. Poll workflow_status for the rest.
    #[serde(default)]
    #[schemars(with = "i64", range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct WorkflowArgs {
    /// The workflow instance, e.g. "@review:pr-1".
    pub workflow: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct WorkflowStatusArgs {
    /// The workflow instance, e.g. "@review:pr-1".
    pub workflow: String,
    /// Wait up to this many seconds (0..=50, default 0) for it to stop running.
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

#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkflowsOut {
    pub workflows: Vec<WorkflowListed>,
}

#[tool_router(router = workflow_run_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Run a workflow from YAML (a file path or the text): registers its agents in the
    /// instance @name:tag, runs its setup steps, posts the kickoff as you (`user`), and
    /// lets the agents work. Returns the status; once done (idle), also a summary (runs,
    /// messages, usage and cost per agent) and the main document. Mistakes in the YAML
    /// come back with file:line:column and a fix, and start nothing. Give `file` (a path)
    /// or `yaml` (the text), `params` as an object ({"pr": 123}), `tag` for a side-by-side
    /// instance, and `wait_seconds` (at most 50) to wait for it to finish.
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
        // A retry resumes the instance its first round started (never started twice).
        let round =
            Round::<String>::begin(&self.kernel, &ctx, "workflow_run", state, answers).await?;
        let wref = match round.resumed() {
            Some(w) => w.clone(),
            None => self
                .kernel
                .workflow_start(source, given(&a.tag), &a.params)
                .await?
                .1
                .to_string(),
        };
        self.wait_for(round, &ctx, wref, wait).await
    }

    /// The status of a `workflow` instance ("@name:tag" or "name:tag"): running, completed, scheduled (idle, but its
    /// schedules will run agents again until workflow_stop), blocked (an agent is paused
    /// by a guard or an auth error, with the reason), failed (with the reason) or
    /// stopped; each agent's state, runs, inbox and usage; the main document once it is
    /// not running. With wait_seconds, waits for it to stop running first.
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
        self.wait_for(round, &ctx, a.workflow, wait).await
    }

    /// Stop a `workflow` instance ("@name:tag"): stops its running workers and its schedules. The
    /// channel, documents and unread messages stay; workflow_run starts it again.
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
        let (stopped, branches) = self.kernel.workflow_stop(&a.workflow).await?;
        Ok(Json(StoppedOut {
            workflow: a.workflow,
            stopped,
            branches,
        }))
    }

    /// List every workflow instance with its status, newest first.
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
            workflows: self.kernel.workflow_list().await?,
        }))
    }
}
