//! task_add, task_claim, task_update, task_list: the instance's task board (the
//! kernel's `tasks` room). The lead and the agents see them; an agent acts on its
//! own instance's board.

use super::params::Parameters;
use super::{ScopeArg, ToolError, given};
use crate::AgentWorker;
use kernel::tasks::rules::Dep;
use kernel::tasks::{Filter, NewTask, TaskView, Update, Updated};
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One task of a plan (task_add's `plan`), or task_add's own fields.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskArgs {
    /// A local name other tasks of the plan give in `deps`.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub deps: Vec<Dep>,
    #[serde(default)]
    pub assign: Option<String>,
    #[serde(default)]
    pub labels: Vec<String>,
    #[serde(default)]
    pub priority: Option<i64>,
    #[serde(default)]
    pub result_schema: Option<serde_json::Value>,
}

impl From<TaskArgs> for NewTask {
    fn from(a: TaskArgs) -> Self {
        NewTask {
            name: a.name.filter(|n| !n.trim().is_empty()),
            title: a.title,
            body: a.body,
            deps: a.deps,
            assign: a.assign,
            labels: a.labels,
            priority: a.priority.unwrap_or(0),
            result_schema: a.result_schema,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct AddArgs {
    #[serde(default)]
    #[schemars(with = "String")]
    pub title: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub body: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_array")]
    pub deps: Vec<Dep>,
    /// A name, role:<role> or any.
    #[serde(default)]
    #[schemars(with = "String")]
    pub assign: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_array")]
    pub labels: Vec<String>,
    /// Higher first.
    #[serde(default)]
    #[schemars(with = "i64")]
    pub priority: Option<i64>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_object")]
    pub result_schema: Option<serde_json::Value>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_array")]
    pub plan: Vec<TaskArgs>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

impl AddArgs {
    /// The tasks asked for: the plan, or the one task of the other fields.
    fn tasks(self) -> Result<Vec<NewTask>, ToolError> {
        let one = self.title.is_some();
        if one && !self.plan.is_empty() {
            return Err(ToolError(
                "give title (one task) or plan (several), not both".into(),
            ));
        }
        if !one {
            if self.body.is_some() || !self.deps.is_empty() || self.assign.is_some() {
                return Err(ToolError(
                    "title: give the task a title (or give plan, a list of tasks)".into(),
                ));
            }
            return Ok(self.plan.into_iter().map(NewTask::from).collect());
        }
        Ok(vec![NewTask::from(TaskArgs {
            name: None,
            title: self.title.unwrap_or_default(),
            body: self.body,
            deps: self.deps,
            assign: self.assign,
            labels: self.labels,
            priority: self.priority,
            result_schema: self.result_schema,
        })])
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ClaimArgs {
    #[serde(default)]
    #[schemars(with = "i64")]
    pub id: Option<i64>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct UpdateArgs {
    pub id: i64,
    #[serde(default)]
    #[schemars(with = "String")]
    pub state: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_value")]
    pub result: Option<serde_json::Value>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub note: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub body: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_array")]
    pub links: Vec<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ListArgs {
    /// With its history.
    #[serde(default)]
    #[schemars(with = "i64")]
    pub id: Option<i64>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub state: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub owner: Option<String>,
    #[serde(default)]
    #[schemars(with = "bool")]
    pub mine: Option<bool>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TasksOut {
    pub tasks: Vec<TaskView>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ClaimOut {
    /// Absent: nothing to claim now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[tool_router(router = task_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Add a task (`title`, `deps`: ids, `labels`, `result_schema`) or a `plan`: [{name, title, deps: names or ids}].
    #[tool(
        title = "Add tasks",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn task_add(
        &self,
        Parameters(a): Parameters<AddArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<TasksOut>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        let tasks = a.tasks()?;
        let tasks = self.kernel.tasks().task_add(&scope, tasks).await?;
        Ok(Json(TasksOut { tasks }))
    }

    /// Claim a task (default: the best open one for you).
    #[tool(
        title = "Claim a task",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn task_claim(
        &self,
        Parameters(a): Parameters<ClaimArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<ClaimOut>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        let task = self.kernel.tasks().task_claim(&scope, a.id).await?;
        let note = task
            .is_none()
            .then(|| "nothing to claim: no open, unblocked task is for you now".to_owned());
        Ok(Json(ClaimOut { task, note }))
    }

    /// Set task `id`'s `state`: done (with `result`), failed (`note` why), open (give back), cancelled (lead); or add a `note`, `links`.
    #[tool(
        title = "Update a task",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn task_update(
        &self,
        Parameters(a): Parameters<UpdateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Updated>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        let u = Update {
            id: a.id,
            state: a.state,
            result: a.result,
            body: a.body,
            note: a.note,
            links: a.links,
        };
        Ok(Json(self.kernel.tasks().task_update(&scope, u).await?))
    }

    /// The board's tasks with owner, blocked_by, result; state: open, blocked, claimed, done, failed, cancelled.
    #[tool(
        title = "List tasks",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn task_list(
        &self,
        Parameters(a): Parameters<ListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<TasksOut>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        let owner = match (a.mine.unwrap_or(false), given(&a.owner)) {
            (true, Some(_)) => {
                return Err(ToolError("give owner or mine, not both".into()));
            }
            (true, None) => Some(scope.me.clone()),
            (false, o) => o.map(str::to_owned),
        };
        let f = Filter {
            id: a.id,
            state: a.state,
            owner,
        };
        let tasks = self.kernel.tasks().task_list(&scope, f).await?;
        Ok(Json(TasksOut { tasks }))
    }
}
