//! The task board: tasks of a workflow instance (an organisation's board is its
//! own instance), their dependencies, claims and history. A room above the
//! runtime, which learns nothing of it: the board reacts to the runtime's events
//! (an agent failed for good or deleted, a run lost) and settles on start.
//!
//! - A task is open, claimed, done, failed or cancelled; an open task whose
//!   dependencies are not all done is blocked (derived, shown as `blocked_by`).
//!   Done, failed and cancelled are final.
//! - A claim is one `UPDATE … WHERE state = 'open'` with no undone dependency,
//!   through the store's single writer (on PostgreSQL every write holds the
//!   database's write lock), so two members never hold one task. An agent holds at
//!   most [`rules::MAX_CLAIMS`] at once; the lead is not limited.
//! - A claim is held by the run that made it (`run_id`; a joined client or the
//!   lead holds it as itself). It is released, with the reason in the history,
//!   when its agent fails for good, is deleted, or the run ends (lost with its
//!   kernel or node, or ended without finishing it: the agent is told too).
//! - Every change publishes [`Event::TaskChanged`] after commit; a task that can
//!   be taken (added unblocked, its last dependency done, released) is announced
//!   in the inboxes of the agents that may take it and hold no claim.
//! - Contracts on `event: task` may deny a move or hold it for an approval: the
//!   task keeps its state and shows the approval until it is decided.

mod approval;
mod read;
mod rows;
pub mod rules;
#[cfg(test)]
mod rules_tests;
#[cfg(test)]
mod seen_tests;
mod settle;
#[cfg(test)]
mod tests;
mod wake;

use crate::Scope;
use crate::events::{Event, Events};
use crate::governance::contracts::Contracts;
use crate::messaging::{Messaging, Posted};
use crate::runtime::Runtime;
use crate::timing::Clock;
use domain::error::{Error, Result};
use domain::states::TaskState;
use rules::Dep;
use schemars::JsonSchema;
use serde::Serialize;
use std::sync::{Arc, Weak};
use store::Store;

/// What task_list and the board call an open task with a dependency not done.
pub const BLOCKED: &str = "blocked";

/// One task as the tools show it.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct TaskView {
    pub id: i64,
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// open, claimed, done, failed or cancelled.
    pub state: TaskState,
    /// The tasks it waits for that are not done (an open task with any is blocked).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocked_by: Vec<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deps: Vec<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Who may take it: a name, role:<role>; absent for anyone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assign: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    pub priority: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_schema: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
    /// The approval a move of it waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<i64>,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    /// Oldest first (task_list with an id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<HistoryLine>>,
}

impl TaskView {
    /// The task as a list shows it: its body and a long result cut to a preview
    /// (task_list with its id shows them whole).
    pub fn brief(mut self) -> Self {
        use crate::messaging::preview;
        self.body = self.body.map(|b| preview(&b));
        if let Some(r) = &self.result {
            let text = r.to_string();
            if preview(&text) != text {
                self.result = Some(serde_json::Value::String(preview(&text)));
            }
        }
        self
    }

    /// Open with a dependency not done.
    pub fn is_blocked(&self) -> bool {
        self.state == TaskState::Open && !self.blocked_by.is_empty()
    }
}

/// One change of a task: when, by whom, what, why.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct HistoryLine {
    pub at: String,
    pub who: String,
    pub what: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// A task as task_add is given it (one of a plan has a local `name`).
#[derive(Debug, Clone, Default)]
pub struct NewTask {
    pub name: Option<String>,
    pub title: String,
    pub body: Option<String>,
    pub deps: Vec<Dep>,
    pub assign: Option<String>,
    pub labels: Vec<String>,
    pub priority: i64,
    pub result_schema: Option<serde_json::Value>,
}

/// What task_update asks: a move, a result, a note, links.
#[derive(Debug, Clone, Default)]
pub struct Update {
    pub id: i64,
    pub state: Option<String>,
    pub result: Option<serde_json::Value>,
    pub body: Option<String>,
    pub note: Option<String>,
    pub links: Vec<String>,
}

/// What task_update answers: the task, and the approval its move waits for.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Updated {
    pub task: TaskView,
    /// Set when a contract holds the move: the task keeps its state until the
    /// approval is decided, then moves (or not) and its owner is told.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
}

/// An instance's board as its resource shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Board {
    /// The instance, e.g. "@global:main".
    pub workflow: String,
    /// How many tasks are open (unblocked), blocked, claimed, done, failed, cancelled.
    pub counts: std::collections::BTreeMap<String, usize>,
    /// Oldest first.
    pub tasks: Vec<TaskView>,
}

/// What task_list filters by.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub id: Option<i64>,
    /// A state, or `blocked`.
    pub state: Option<String>,
    pub owner: Option<String>,
}

/// What a write of the board gives to announce once committed.
#[derive(Default)]
pub(crate) struct Done {
    /// (instance, task, its state now, whether its state changed).
    pub(crate) changed: Vec<(i64, i64, TaskState, bool)>,
    /// The kernel's posts, each with its instance.
    pub(crate) posted: Vec<(i64, Posted)>,
}

/// The board room: every instance's tasks.
pub struct Tasks {
    store: Store,
    events: Events,
    clock: Clock,
    contracts: Arc<Contracts>,
    messaging: Arc<Messaging>,
    /// Approvals' deadlines are armed by the runtime (absent in room tests).
    runtime: Weak<Runtime>,
}

impl Tasks {
    pub fn new(
        (store, events, clock): (Store, Events, Clock),
        contracts: Arc<Contracts>,
        messaging: Arc<Messaging>,
        runtime: Weak<Runtime>,
    ) -> Self {
        Self {
            store,
            events,
            clock,
            contracts,
            messaging,
            runtime,
        }
    }

    /// Adds tasks to the caller's instance (one, or a plan whose tasks may wait
    /// for each other by local name); their views, in the order given.
    pub async fn task_add(&self, scope: &Scope, plan: Vec<NewTask>) -> Result<Vec<TaskView>> {
        let checked = rows::Checked::new(plan).map_err(Error::invalid)?;
        let (s, now) = (scope.clone(), self.clock.now_ms());
        let (ids, done) = self
            .store
            .write(move |c| rows::add_tx(c, &s, &checked, now))
            .await?;
        self.announce(done);
        let board = self.board(scope.workflow_id).await?;
        Ok(ids
            .iter()
            .filter_map(|id| board.iter().find(|t| t.id == *id).cloned())
            .collect())
    }

    /// Claims task `id`, or (none given) the best open unblocked task the caller
    /// may take: assigned to it by name, then by role, then to anyone; then by
    /// priority, then the oldest. None: nothing to claim.
    pub async fn task_claim(&self, scope: &Scope, id: Option<i64>) -> Result<Option<TaskView>> {
        let (s, now) = (scope.clone(), self.clock.now_ms());
        let (got, done) = self
            .store
            .write(move |c| rows::claim_tx(c, &s, id, now))
            .await?;
        self.announce(done);
        match got {
            Some(id) => Ok(Some(self.one(scope.workflow_id, id, false).await?)),
            None => Ok(None),
        }
    }

    /// Moves a task (release, done with a result, failed with a reason, cancelled
    /// by the lead) or changes its body, notes and links. Contracts on tasks are
    /// asked first.
    pub async fn task_update(&self, scope: &Scope, u: Update) -> Result<Updated> {
        let asked = rows::Asked::new(scope, u).map_err(Error::invalid)?;
        if let Some(to) = asked.to
            && let Some(held) = self.govern(scope, &asked, to).await?
        {
            let task = self.one(scope.workflow_id, asked.id, false).await?;
            return Ok(Updated {
                task,
                held: Some(held),
            });
        }
        let (s, now) = (scope.clone(), self.clock.now_ms());
        let a = asked.clone();
        let done = self
            .store
            .write(move |c| rows::update_tx(c, &s, &a, now))
            .await?;
        self.announce(done);
        let task = self.one(scope.workflow_id, asked.id, false).await?;
        Ok(Updated { task, held: None })
    }

    /// The instance's tasks that pass `f` (with its history when one is named).
    pub async fn task_list(&self, scope: &Scope, f: Filter) -> Result<Vec<TaskView>> {
        if let Some(id) = f.id {
            return Ok(vec![self.one(scope.workflow_id, id, true).await?]);
        }
        let want = rows::Want::parse(&f, &scope.me).map_err(Error::invalid)?;
        let board = self.board(scope.workflow_id).await?;
        let listed = board.into_iter().filter(|t| want.passes(t));
        Ok(listed.map(TaskView::brief).collect())
    }

    /// Every task of an instance, oldest first (the board resource).
    pub async fn board(&self, workflow_id: i64) -> Result<Vec<TaskView>> {
        self.store
            .read(move |c| rows::board_tx(c, workflow_id))
            .await
    }

    /// The caller's instance's board with its counts (its resource).
    pub async fn board_view(&self, scope: &Scope) -> Result<Board> {
        let tasks = self.board(scope.workflow_id).await?;
        let mut counts = std::collections::BTreeMap::new();
        counts.insert(BLOCKED.to_owned(), 0);
        for s in TaskState::ALL {
            counts.insert(s.as_str().to_owned(), 0);
        }
        for t in &tasks {
            let key = if t.is_blocked() {
                BLOCKED
            } else {
                t.state.as_str()
            };
            *counts.entry(key.to_owned()).or_insert(0) += 1;
        }
        Ok(Board {
            workflow: scope.workflow.to_string(),
            counts,
            tasks: tasks.into_iter().map(TaskView::brief).collect(),
        })
    }

    /// One task of the instance, with its history if `history`.
    async fn one(&self, workflow_id: i64, id: i64, history: bool) -> Result<TaskView> {
        self.store
            .read(move |c| rows::one_tx(c, workflow_id, id, history))
            .await
    }

    /// Publishes what a committed write changed, and its posts.
    fn announce(&self, done: Done) {
        for (workflow_id, p) in &done.posted {
            self.messaging.announce(*workflow_id, p);
        }
        for (workflow_id, id, state, moved) in done.changed {
            self.events.publish(Event::TaskChanged {
                workflow_id,
                id,
                state,
                moved,
            });
        }
    }
}
