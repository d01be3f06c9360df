//! What the dashboard shows of an instance at one moment, read as the lead: the
//! same views the lead's tools return, cut to what a panel needs and bounded.

use super::board::TaskShown;
use domain::error::Result;
use domain::protocol::Usage;
use domain::redact;
use domain::states::{AgentState, WorkflowState};
use kernel::governance::approvals::ApprovalView;
use kernel::messaging::read::ChannelMessage;
use kernel::runtime::runs::RunView;
use kernel::{Caller, Kernel};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Agents shown with their runs at most (the rest are counted).
const MAX_AGENTS: usize = 50;
/// Runs shown per agent.
const RUNS_SHOWN: usize = 5;
/// Instances in the switcher at most (newest first).
const MAX_INSTANCES: usize = 100;
/// Messages returned per poll at most (the app reads on with the cursor).
const MESSAGES_PER_POLL: i64 = 100;
/// Decided approvals shown after the pending ones.
const DECIDED_SHOWN: usize = 5;
/// Pending approvals shown at most (the rest are counted).
const PENDING_SHOWN: usize = 50;
/// Hook deliveries shown (newest first; workflow_list shows more).
const DELIVERIES_SHOWN: i64 = 10;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = crate::tools::no_null_defaults)]
pub struct WatchArgs {
    /// The instance, e.g. "@review:pr-1" (default: the newest running one, else
    /// the newest).
    #[serde(default)]
    #[schemars(with = "String")]
    pub workflow: Option<String>,
    /// The last message id shown: only newer messages are returned.
    #[serde(default)]
    #[schemars(with = "String")]
    pub since: Option<String>,
    /// The `version` last shown: the call waits until something else changes.
    #[serde(default)]
    #[schemars(with = "String")]
    pub seen: Option<String>,
    /// 0..=50 (default 25).
    #[serde(default)]
    #[schemars(with = "i64", range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = crate::tools::no_null_defaults)]
pub struct OpenArgs {
    /// The instance, e.g. "@review:pr-1" (default: the newest running one, else
    /// the newest).
    #[serde(default)]
    #[schemars(with = "String")]
    pub workflow: Option<String>,
}

/// The instance the dashboard opens on.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct Opened {
    /// Absent when there is no instance yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<WorkflowState>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Snapshot {
    /// Changes when anything shown but the channel changes; pass it back as `seen`.
    pub version: String,
    /// The shown instance's id: which events concern it.
    #[serde(skip)]
    pub(super) workflow_id: Option<i64>,
    /// The server's clock, in milliseconds (for elapsed times).
    pub now_ms: i64,
    /// The instance shown (absent when there is none yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    pub instances: Vec<Instance>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusShown>,
    pub agents: Vec<AgentShown>,
    /// Agents not shown (past the first 50).
    pub agents_more: usize,
    pub approvals: Vec<ApprovalView>,
    /// Pending approvals not shown (past the first 50; approval_list has them).
    pub approvals_more: usize,
    pub documents: Vec<String>,
    /// The task board: live tasks first, then the latest final ones (at most 100).
    pub board: Vec<TaskShown>,
    /// Tasks not shown (task_list has them).
    pub board_more: usize,
    /// Messages after `since` (or the latest), oldest first.
    pub messages: Vec<ChannelMessage>,
    /// More messages follow the last one returned.
    pub messages_more: bool,
    /// The newest deliveries to hooks, of every instance (newest first).
    pub hooks: Vec<kernel::hooks::DeliveryView>,
}

#[derive(Debug, Clone, Serialize, JsonSchema, Hash)]
pub struct Instance {
    pub workflow: String,
    pub status: WorkflowState,
    pub agents: i64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StatusShown {
    pub status: WorkflowState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    pub runs: i64,
    pub usage: Usage,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AgentShown {
    pub name: String,
    pub backend: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `shared`, or `worktree` with its branch.
    pub workspace: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    pub state: AgentState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<String>,
    /// The run in progress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<RunShown>,
    /// The approval it waits on, if one holds it (see [`waits`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<WaitShown>,
    /// The latest runs, newest first.
    pub runs: Vec<RunShown>,
    pub total_runs: i64,
    pub failed_runs: i64,
    pub usage: Usage,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunShown {
    pub id: String,
    pub trigger: String,
    pub status: domain::states::RunStatus,
    pub started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    pub usage: Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A pending approval an agent waits on.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WaitShown {
    pub approval: i64,
    /// When it was asked for.
    pub since: String,
}

impl From<&RunView> for RunShown {
    fn from(r: &RunView) -> Self {
        Self {
            id: r.id.clone(),
            trigger: r.trigger.clone(),
            status: r.status,
            started_at: r.started_at.clone(),
            duration_ms: r.duration_ms,
            usage: r.usage,
            error_class: r.error_class.clone(),
            error: r.error.as_deref().map(redact::shown),
        }
    }
}

/// The instance to show: the one asked for, else the newest running, else the newest.
fn chosen(asked: Option<&str>, instances: &[Instance]) -> Option<String> {
    if let Some(w) = asked {
        return Some(w.to_owned());
    }
    instances
        .iter()
        .find(|i| i.status == WorkflowState::Running)
        .or_else(|| instances.first())
        .map(|i| i.workflow.clone())
}

/// The instances, newest first (as workflow_list gives them), the first 100.
async fn instances(kernel: &Kernel) -> Result<Vec<Instance>> {
    let mut all = kernel.workflows().workflow_list().await?;
    all.truncate(MAX_INSTANCES);
    Ok(all
        .into_iter()
        .map(|w| Instance {
            workflow: w.workflow,
            status: w.status,
            agents: w.agents,
        })
        .collect())
}

/// The instance the dashboard opens on: `asked` (which must exist), else the
/// one [`chosen`].
pub async fn opened(kernel: &Kernel, asked: Option<&str>) -> Result<Opened> {
    let Some(w) = chosen(asked, &instances(kernel).await?) else {
        return Ok(Opened::default());
    };
    let status = kernel.workflows().workflow_status(&w).await?;
    Ok(Opened {
        workflow: Some(status.workflow),
        status: Some(status.status),
    })
}

/// Reads what the dashboard shows of `asked` (or the instance [`chosen`]).
pub async fn snapshot(
    kernel: &Kernel,
    asked: Option<&str>,
    since: Option<String>,
) -> Result<Snapshot> {
    let instances = instances(kernel).await?;
    let mut snap = Snapshot {
        version: String::new(),
        now_ms: kernel.clock().now_ms(),
        workflow_id: None,
        workflow: chosen(asked, &instances),
        instances,
        status: None,
        agents: Vec::new(),
        agents_more: 0,
        approvals: Vec::new(),
        approvals_more: 0,
        documents: Vec::new(),
        board: Vec::new(),
        board_more: 0,
        messages: Vec::new(),
        messages_more: false,
        hooks: kernel.hooks.deliveries(DELIVERIES_SHOWN).await?,
    };
    if let Some(w) = snap.workflow.clone() {
        fill(kernel, &mut snap, &w, since).await?;
    }
    snap.version = version(&snap);
    Ok(snap)
}

async fn fill(kernel: &Kernel, snap: &mut Snapshot, w: &str, since: Option<String>) -> Result<()> {
    let scope = kernel.registry().scope(&Caller::Lead, Some(w)).await?;
    snap.workflow_id = Some(scope.workflow_id);
    let status = kernel.workflows().workflow_status(w).await?;
    let views = kernel.registry().agent_list(Some(w)).await?;
    let mut runs = kernel
        .runtime()
        .workers()
        .recent_runs(scope.workflow_id, RUNS_SHOWN as i64)
        .await?;
    let all = kernel
        .approval_list(&Caller::Lead, Some(&scope.workflow))
        .await?;
    snap.agents_more = status.agents.len().saturating_sub(MAX_AGENTS);
    for a in status.agents.iter().take(MAX_AGENTS) {
        let view = views.iter().find(|v| v.name == a.name);
        let mine = runs.iter().filter(|(n, _)| n == &a.name).map(|(_, r)| r);
        let mut shown = agent(a, view, mine);
        shown.waiting_for = waits(&all, &a.name);
        snap.agents.push(shown);
    }
    runs.clear();
    (snap.approvals, snap.approvals_more) = approvals(all);
    snap.status = Some(StatusShown {
        status: status.status,
        reason: status.reason.as_deref().map(redact::shown),
        started_at: status.started_at,
        ended_at: status.ended_at,
        runs: status.runs,
        usage: status.usage,
    });
    let docs = kernel.context().doc_list(&scope).await?;
    snap.documents = docs.files.into_iter().map(|f| f.file).collect();
    (snap.board, snap.board_more) = super::board::board(kernel, &scope).await?;
    let read = kernel
        .messaging()
        .channel_view(&scope, since, Some(MESSAGES_PER_POLL))
        .await?;
    snap.messages = read.messages;
    snap.messages_more = read.has_more;
    Ok(())
}

/// An agent as shown: its summary, its configuration's view (model,
/// workspace), its latest runs (newest first; a running one is the run in
/// progress).
fn agent<'r>(
    a: &kernel::workflows::AgentSummary,
    view: Option<&kernel::registry::AgentView>,
    runs: impl Iterator<Item = &'r RunView>,
) -> AgentShown {
    let runs: Vec<RunShown> = runs.map(RunShown::from).collect();
    let running = runs
        .first()
        .filter(|r| r.status == domain::states::RunStatus::Running)
        .cloned();
    let branch = view.and_then(|v| match &v.workspace {
        Some(domain::workspace::Workspace::Worktree(t)) => {
            Some(t.branch.clone().unwrap_or_default())
        }
        _ => None,
    });
    AgentShown {
        name: a.name.clone(),
        backend: a.backend.clone(),
        model: view.and_then(|v| v.model.clone()),
        node: a.node.clone(),
        workspace: if branch.is_some() {
            "worktree"
        } else {
            "shared"
        }
        .to_owned(),
        branch,
        state: a.state,
        reason: a.reason.as_deref().map(redact::shown),
        resume_at: a.resume_at.clone(),
        running,
        waiting_for: None,
        runs,
        total_runs: a.runs,
        failed_runs: a.failed_runs,
        usage: a.usage,
    }
}

/// The approval `agent` waits on: the oldest pending one it asked for whose
/// decision holds it. A tool request's holds its run (alive, until it is
/// decided: a run that ends first loses its approvals); a spend's holds its next
/// run. A merge's holds the merge, not the agent.
fn waits(all: &[ApprovalView], agent: &str) -> Option<WaitShown> {
    all.iter()
        .filter(|a| a.agent == agent && a.state == domain::states::ApprovalState::Pending)
        .filter(|a| matches!(a.event.as_str(), "tool_request" | "spend"))
        .min_by_key(|a| a.id)
        .map(|a| WaitShown {
            approval: a.id,
            since: a.since.clone(),
        })
}

/// Pending approvals first (at most 50, and how many more), then the latest
/// decided; what each is about shown as [`redact::shown`] says.
fn approvals(all: Vec<ApprovalView>) -> (Vec<ApprovalView>, usize) {
    let (mut pending, decided): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|a| a.state == domain::states::ApprovalState::Pending);
    let more = pending.len().saturating_sub(PENDING_SHOWN);
    pending.truncate(PENDING_SHOWN);
    pending.extend(decided.into_iter().take(DECIDED_SHOWN));
    for a in &mut pending {
        a.what = redact::shown(&a.what);
        a.reason = a.reason.as_deref().map(redact::shown);
    }
    (pending, more)
}

/// A digest of everything shown but the clock and the channel.
fn version(s: &Snapshot) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let shown = serde_json::json!([
        s.workflow,
        s.instances,
        s.status,
        s.agents,
        s.approvals,
        s.documents,
        s.board,
        s.board_more,
        s.hooks
    ]);
    shown.to_string().hash(&mut h);
    format!("{:016x}", h.finish())
}
