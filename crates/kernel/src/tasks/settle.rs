//! Claims whose holder is gone, released: the board watches the runtime's events
//! (an agent failed for good, changed or deleted, a run ended, a node taken over)
//! and settles on start too, since a killed kernel published nothing.
//!
//! A claim is released (back to open, its history saying why) when its agent no
//! longer exists, failed for good, or the run that claimed it ended (lost with its
//! kernel or node, or ended without finishing it: who may take it is told, the
//! agent too). A claim made without a run (the lead, a joined client) is its own.

use super::wake::{history_tx, wake_tx, workflow_tx};
use super::{Done, Tasks};
use crate::events::Event;
use domain::error::Result;
use domain::names::{LEAD, SYSTEM};
use domain::states::{AgentState, RunStatus, TaskState};
use std::sync::Arc;
use store::sql::{self, Connection};
use tokio::sync::broadcast::error::RecvError;

/// A claimed task and what its holder's rows say now.
struct Held {
    id: i64,
    workflow_id: i64,
    owner: String,
    /// The claiming run, if the claim was made in one.
    run_id: Option<String>,
    /// The claiming run's status, if it has a row.
    run: Option<RunStatus>,
    /// The owner's agent: its state, and its newest run's status.
    agent: Option<(AgentState, Option<RunStatus>)>,
    /// Whether an agent of that name exists in the task's instance (or, for an
    /// organisation's board, which agents of other instances claim, anywhere).
    anywhere: bool,
}

impl Held {
    /// Why the claim is released, if it is.
    fn release(&self) -> Option<String> {
        if self.owner.eq_ignore_ascii_case(LEAD) {
            return None;
        }
        match (&self.agent, self.run) {
            (_, Some(RunStatus::Lost)) => Some(format!(
                "{}'s run was lost (its kernel or node stopped)",
                self.owner
            )),
            (None, _) if !self.anywhere => Some(format!("{} was deleted", self.owner)),
            (Some((AgentState::Failed, _)), _) => Some(format!("{} failed for good", self.owner)),
            (_, Some(RunStatus::Running)) => None,
            _ => self
                .run_id
                .as_ref()
                .map(|r| format!("run {r} of {} ended without finishing it", self.owner)),
        }
    }

    /// Whether its owner may be told it can take the task again (its run ended).
    fn ended(&self) -> bool {
        self.run_id.is_some() && !matches!(self.run, Some(RunStatus::Lost | RunStatus::Running))
    }
}

/// The claimed tasks of instance `workflow_id` (every instance for None).
fn held_tx(c: &Connection, workflow_id: Option<i64>) -> Result<Vec<Held>> {
    let mut st = c.prepare_cached(
        "SELECT t.id, t.workflow_id, t.owner, t.run_id,
                (SELECT r.status FROM runs r WHERE r.id = t.run_id),
                a.state,
                (SELECT r.status FROM runs r WHERE r.agent_id = a.id
                  ORDER BY r.started_at DESC, r.id DESC LIMIT 1),
                EXISTS (SELECT 1 FROM agents x WHERE x.name = t.owner
                          AND (x.workflow_id = t.workflow_id
                               OR EXISTS (SELECT 1 FROM orgs o WHERE o.workflow_id = t.workflow_id)))
         FROM tasks t
         LEFT JOIN agents a ON a.id = COALESCE(
             (SELECT r.agent_id FROM runs r WHERE r.id = t.run_id),
             (SELECT y.id FROM agents y WHERE y.workflow_id = t.workflow_id AND y.name = t.owner))
         WHERE t.state = 'claimed' AND (?1 < 0 OR t.workflow_id = ?1)",
    )?;
    let status = |s: Option<String>| s.and_then(|s| s.parse::<RunStatus>().ok());
    let rows = st.query_map([workflow_id.unwrap_or(-1)], |r| {
        let agent: Option<String> = r.get(5)?;
        Ok(Held {
            id: r.get(0)?,
            workflow_id: r.get(1)?,
            owner: r.get::<Option<String>>(2)?.unwrap_or_default(),
            run_id: r.get(3)?,
            run: status(r.get(4)?),
            agent: agent
                .and_then(|a| a.parse::<AgentState>().ok())
                .map(|a| Ok::<_, sql::Error>((a, status(r.get(6)?))))
                .transpose()?,
            anywhere: r.get::<i64>(7)? != 0,
        })
    })?;
    Ok(rows.collect::<sql::Result<_>>()?)
}

/// Releases the claims of instance `workflow_id` (every one for None) whose
/// holder is gone; the agents that may take them are told.
pub(crate) fn settle_tx(c: &Connection, workflow_id: Option<i64>, now: i64) -> Result<Done> {
    let mut done = Done::default();
    for h in held_tx(c, workflow_id)? {
        let Some(why) = h.release() else { continue };
        if let Some(wf) = workflow_tx(c, h.workflow_id)? {
            let dropped = format!("the claim was released ({why})");
            let at = (h.workflow_id, &wf);
            super::approval::dropped_tx(c, at, h.id, &dropped, now, &mut done)?;
        }
        let n = c.execute(
            "UPDATE tasks SET state = 'open', owner = NULL, run_id = NULL, approval_id = NULL,
                    held = NULL, updated_at = ?2
             WHERE id = ?1 AND state = 'claimed'",
            sql::params![h.id, now],
        )?;
        if n == 0 {
            continue;
        }
        history_tx(c, h.id, (SYSTEM, "released", Some(&why)), now)?;
        done.changed
            .push((h.workflow_id, h.id, TaskState::Open, true));
        if let Some(wf) = workflow_tx(c, h.workflow_id)? {
            let by = if h.ended() { "" } else { h.owner.as_str() };
            wake_tx(c, (h.workflow_id, &wf), &[h.id], by, now, &mut done)?;
        }
    }
    Ok(done)
}

/// A polling agent has work waiting when a task it may take is open and
/// unblocked and it holds no claim.
impl crate::runtime::scheduler::Waiting for Tasks {
    fn waiting_tx(&self, c: &Connection, workflow_id: i64, agent: &str) -> Result<bool> {
        let held: i64 = c.query_row(
            "SELECT count(*) FROM tasks WHERE workflow_id = ?1 AND state = 'claimed' AND owner = ?2",
            sql::params![workflow_id, agent],
            |r| r.get(0),
        )?;
        if held >= super::rules::MAX_CLAIMS {
            return Ok(false);
        }
        let role = super::wake::role_of(c, workflow_id, agent)?;
        Ok(super::rows::best_for(c, workflow_id, agent, role.as_deref())?.is_some())
    }
}

impl Tasks {
    /// Releases the claims whose holder is gone (every instance's for None, with
    /// the moves whose approvals closed unheard: at start, a killed kernel's runs
    /// were closed as lost just before); how many tasks changed.
    pub(crate) async fn settle(&self, workflow_id: Option<i64>) -> Result<usize> {
        // Most events free nothing: a read first keeps them off the writer.
        let owed = self
            .store
            .read(move |c| {
                let gone = held_tx(c, workflow_id)?
                    .iter()
                    .any(|h| h.release().is_some());
                Ok(gone || workflow_id.is_none())
            })
            .await?;
        if !owed {
            return Ok(0);
        }
        let now = self.clock.now_ms();
        let done = self
            .store
            .write(move |c| {
                let mut done = settle_tx(c, workflow_id, now)?;
                if workflow_id.is_none() {
                    let closed = super::approval::closed_all_tx(c, now)?;
                    done.changed.extend(closed.changed);
                    done.posted.extend(closed.posted);
                }
                Ok(done)
            })
            .await?;
        let n = done.changed.len();
        self.announce(done);
        Ok(n)
    }

    /// Watches the events that may free a claim or close an approval a move
    /// waits for, for as long as the room lives.
    pub(crate) fn start_watch(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        let mut rx = self.events.subscribe();
        tokio::spawn(async move {
            loop {
                let e = rx.recv().await;
                let Some(tasks) = me.upgrade() else { return };
                let r = match e {
                    Ok(Event::AgentFailed { workflow_id, .. })
                    | Ok(Event::AgentChanged { workflow_id, .. })
                    | Ok(Event::RunEnded { workflow_id, .. }) => {
                        tasks.settle(Some(workflow_id)).await.map(|_| ())
                    }
                    Ok(Event::ApprovalClosed { id, .. }) => tasks.approval_closed(id).await,
                    Ok(_) => Ok(()),
                    Err(RecvError::Lagged(_)) => tasks.settle(None).await.map(|_| ()),
                    Err(RecvError::Closed) => return,
                };
                if let Err(e) = r {
                    tracing::warn!("the task board did not settle: {e}");
                }
            }
        });
    }
}
