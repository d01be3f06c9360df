//! Approvals in the runtime: a run waiting on one (kept alive, woken when it is
//! decided), deadlines (a timer per approval, re-armed after a restart), runs that
//! end first (their approvals are `lost`, never granted), approval_decide and
//! approval_list, and what a closed approval releases.

use crate::Caller;
use crate::context::proposals::held;
use crate::events::Event;
use crate::governance::approvals::{self, ApprovalView, Ended};
use crate::messaging;
use crate::registry::orgs;
use crate::runtime::base::{Base, Pause};
use crate::runtime::running::Running;
use domain::contracts;
use domain::error::{Error, Result};
use domain::names::{LEAD, WorkflowRef};
use domain::states::ApprovalState;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use store::sql;

/// Keeps a run alive while it waits, and forgets the wait however it ends.
struct Waiting<'a> {
    approvals: &'a Approvals,
    id: i64,
    agent_id: i64,
    held_file: Option<PathBuf>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        // A run may wait on several approvals at once (parallel tool calls): it is
        // held until the last of them ends.
        if self.approvals.unwait(self.id, self.agent_id) {
            return;
        }
        self.approvals.running.release(self.agent_id);
        if let Some(f) = self.held_file.take() {
            // Off the runtime's threads: a drop cannot await.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn_blocking(move || std::fs::remove_file(f));
            } else {
                let _ = std::fs::remove_file(f);
            }
        }
    }
}

/// How long after its deadline an approval's timer fires: the store's check
/// must find it due.
const PAST_DEADLINE: Duration = Duration::from_millis(20);

/// How long until a deadline (ms) at `now` (ms): none once it has passed.
fn due_in(deadline: i64, now: i64) -> Duration {
    Duration::from_millis(deadline.saturating_sub(now).max(0) as u64)
}

/// Writes the empty file that tells a worker its run is held, if the worker made
/// its scratch folder (a CLI's run); whether it did.
async fn writes_marker(f: &std::path::Path) -> bool {
    let in_a_folder = match f.parent() {
        Some(d) => tokio::fs::metadata(d).await.is_ok_and(|m| m.is_dir()),
        None => false,
    };
    in_a_folder && tokio::fs::write(f, b"").await.is_ok()
}

/// A merge approval, closed: what the held merge needs to go on or tell why not.
pub(crate) struct MergeClosed {
    pub id: i64,
    pub reason: Option<String>,
    pub workflow_id: i64,
    pub workflow: WorkflowRef,
    pub allowed: bool,
}

/// A run's wait on an approval: the waiter and its agent, by approval id.
type Waits = HashMap<i64, (i64, Arc<tokio::sync::Notify>)>;

/// Approvals in the runtime: the runs waiting on one (the table only its methods
/// lock), their deadlines, and what a closed approval releases.
pub struct Approvals {
    base: Arc<Base>,
    running: Arc<Running>,
    /// Tool requests waiting for an approval, by approval id (with the asking
    /// agent): woken when it is decided.
    waits: Mutex<Waits>,
    /// What follows a closed approval above this service (set once).
    follow: OnceLock<Box<dyn Follow>>,
}

/// What a closed approval releases above the approvals: a spending approval's
/// agents admitted again, a held merge carried out.
pub(crate) trait Follow: Send + Sync {
    /// A spending approval was given: these agents may run.
    fn spend_allowed(&self, agents: Vec<i64>) -> BoxFuture<'static, ()>;
    /// A merge waiting on an approval was decided.
    fn merge_closed(&self, m: MergeClosed) -> BoxFuture<'static, Result<()>>;
    /// Another node closed an approval: what its agents are owed is read again.
    fn rescan(&self);
}

impl Approvals {
    pub(crate) fn new(base: Arc<Base>, running: Arc<Running>) -> Self {
        Self {
            base,
            running,
            waits: Mutex::default(),
            follow: OnceLock::new(),
        }
    }

    /// Names what follows a closed approval (set once, when the runtime is composed).
    pub(crate) fn follow_with(&self, f: Box<dyn Follow>) {
        let _ = self.follow.set(f);
    }

    /// Forgets the wait on approval `id`; whether its agent still waits on another.
    fn unwait(&self, id: i64, agent_id: i64) -> bool {
        let mut waits = self.waits.lock().unwrap();
        waits.remove(&id);
        waits.values().any(|(agent, _)| *agent == agent_id)
    }

    /// Wakes the run waiting on approval `id`, if any.
    fn wake(&self, id: i64) {
        if let Some((_, n)) = self.waits.lock().unwrap().get(&id) {
            n.notify_waiters();
        }
    }

    /// Waits until approval `id` is decided or its deadline passes, keeping the run
    /// alive meanwhile.
    pub(crate) async fn wait(&self, id: i64, agent_id: i64, run_id: &str) -> Result<Ended> {
        let notify = Arc::new(tokio::sync::Notify::new());
        self.waits
            .lock()
            .unwrap()
            .insert(id, (agent_id, notify.clone()));
        // Held for the kernel's supervision (a flag) and the worker's (a file in its
        // scratch folder, when the worker made one: a CLI's run).
        let held_file = match self.running.hold(agent_id, run_id) {
            Some(f) if writes_marker(&f).await => Some(f),
            _ => None,
        };
        let _waiting = Waiting {
            approvals: self,
            id,
            agent_id,
            held_file,
        };
        loop {
            let woken = notify.notified();
            let row = self.base.store.read(move |c| approvals::get(c, id)).await?;
            let Some(row) = row else {
                return Ok(Ended::Refused("it is gone".into()));
            };
            match approvals::ended(&row) {
                Ended::Pending => {}
                done => return Ok(done),
            }
            // The timer closes it at the deadline and wakes us; re-read now and then
            // in case a wake was missed.
            let _ = tokio::time::timeout(Duration::from_secs(5), woken).await;
        }
    }

    /// Closes approval `id` when its deadline passes (if nobody decided first).
    pub(crate) fn arm(self: &Arc<Self>, id: i64, after: Duration) {
        let k = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(after + PAST_DEADLINE).await;
            if let Some(k) = k.upgrade()
                && let Err(e) = k.expire(id).await
            {
                tracing::warn!(id, "could not close an approval at its deadline: {e}");
            }
        });
    }

    async fn expire(self: &Arc<Self>, id: i64) -> Result<()> {
        let now = self.base.clock.now_ms();
        let row = self
            .base
            .store
            .write(move |c| {
                let Some(r) = approvals::get(c, id)? else {
                    return Ok(None);
                };
                if !approvals::expire_tx(c, &r, now)? {
                    return Ok(None);
                }
                approvals::get(c, id)
            })
            .await?;
        if let Some(r) = row {
            self.closed(&r).await?;
        }
        Ok(())
    }

    /// At start: approvals of runs that did not survive the restart are lost; the
    /// others (spending) get their deadline timers again.
    pub(crate) async fn recover(self: &Arc<Self>) -> Result<()> {
        let now = self.base.clock.now_ms();
        let (lost, open) = self
            .base
            .store
            .write(move |c| {
                let lost = approvals::lose_orphans_tx(c, now)?;
                // The members' votes on the lost ones close with them.
                held::close_settled_tx(c, now)?;
                let mut st =
                    c.prepare("SELECT id, deadline FROM approvals WHERE state = 'pending'")?;
                let open: Vec<(i64, i64)> = st
                    .query_map((), |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<sql::Result<_>>()?;
                Ok((lost, open))
            })
            .await?;
        if lost > 0 {
            tracing::warn!(
                lost,
                "approvals asked by runs that ended with the previous kernel are lost"
            );
        }
        for (id, deadline) in open {
            self.arm(id, due_in(deadline, now));
        }
        Ok(())
    }

    /// A run ended: approvals it still waited for can no longer be granted.
    pub(crate) async fn lose_of(&self, run_id: &str) {
        let rid = run_id.to_owned();
        let now = self.base.clock.now_ms();
        match self
            .base
            .store
            .write(move |c| {
                let ids = approvals::lose_run_tx(c, &rid, now)?;
                Ok((ids, held::close_settled_tx(c, now)?))
            })
            .await
        {
            Ok((ids, posted)) => {
                for (wid, p) in &posted {
                    self.base.messaging.announce(*wid, p);
                }
                for id in ids {
                    self.wake(id);
                }
            }
            Err(e) => tracing::warn!(run = run_id, "could not close the run's approvals: {e}"),
        }
    }

    /// approval_decide: one approver's decision (the lead may decide any).
    pub async fn decide(
        self: &Arc<Self>,
        caller: &Caller,
        id: i64,
        approve: bool,
        reason: Option<String>,
    ) -> Result<ApprovalView> {
        if reason
            .as_ref()
            .is_some_and(|r| r.chars().count() > contracts::MAX_REASON_CHARS)
        {
            return Err(Error::invalid(format!(
                "reason is at most {} characters",
                contracts::MAX_REASON_CHARS
            )));
        }
        let (who, only) = match caller {
            Caller::Lead => (LEAD.to_owned(), None),
            Caller::Agent(a) if a.sub_agent => {
                return Err(Error::forbidden(format!(
                    "you are {}, made by another agent: a sub-agent never decides an approval \
                     (whatever its name); its approvers or the lead do",
                    a.name
                )));
            }
            Caller::Agent(a) => (a.name.clone(), Some(a.workflow_id)),
        };
        let now = self.base.clock.now_ms();
        let row = self
            .base
            .store
            .write(move |c| {
                if let Some(own) = only
                    && let Some(r) = approvals::get(c, id)?
                    && !orgs::acts_in_tx(c, own)?.contains(&r.workflow_id)
                {
                    return Err(Error::not_found(format!(
                        "no approval {id} in your workflow"
                    )));
                }
                let r = approvals::decide_tx(c, (id, &who, approve, reason.as_deref()), now)?;
                if r.view.vote.is_some() {
                    // The same vote on the members' proposal.
                    held::record_decision_tx(c, &r, (&who, approve, reason.as_deref()), now)?;
                }
                let posted = if r.view.state != ApprovalState::Pending {
                    Some(messaging::post_system(
                        c,
                        r.workflow_id,
                        &r.workflow,
                        format!(
                            "approval {id} ({} asked to use {}) is {}: {}.",
                            r.view.agent,
                            r.view.what,
                            r.view.state,
                            r.view.reason.clone().unwrap_or_default()
                        ),
                        now,
                    )?)
                } else {
                    None
                };
                Ok((r, posted))
            })
            .await?;
        let (r, posted) = row;
        if let Some(p) = &posted {
            self.base.messaging.announce(r.workflow_id, p);
        }
        if r.view.state != ApprovalState::Pending {
            self.closed(&r).await?;
        }
        Ok(r.view)
    }

    /// One approval as the lead sees it (None if there is no such approval).
    pub async fn view(&self, id: i64) -> Result<Option<ApprovalView>> {
        self.base
            .store
            .read(move |c| Ok(approvals::get(c, id)?.map(|r| r.view)))
            .await
    }

    /// approval_list: pending and recent approvals (an agent sees those it asked
    /// for or may decide, in its own instance).
    pub async fn list(
        &self,
        caller: &Caller,
        workflow: Option<&WorkflowRef>,
    ) -> Result<Vec<ApprovalView>> {
        let (wid, member) = match (caller, workflow) {
            (Caller::Agent(a), _) => (Some(a.workflow_id), Some(a.name.clone())),
            (Caller::Lead, Some(wf)) => (Some(self.base.registry.workflow_id(wf).await?), None),
            (Caller::Lead, None) => (None, None),
        };
        self.base
            .store
            .read(move |c| {
                let Some(own) = wid.filter(|_| member.is_some()) else {
                    return approvals::list(c, wid, member.as_deref());
                };
                let mut out = Vec::new();
                for w in orgs::acts_in_tx(c, own)? {
                    out.extend(approvals::list(c, Some(w), member.as_deref())?);
                }
                Ok(out)
            })
            .await
    }

    /// An approval was closed through another node: a run of this node that waits
    /// for it wakes, and a spending approval's agent is served (the store says
    /// whether it may run).
    pub(crate) fn closed_elsewhere(self: &Arc<Self>, id: i64) {
        self.wake(id);
        if let Some(f) = self.follow.get() {
            f.rescan();
        }
    }

    /// Approval `id` was closed by a vote of the members (a proposal): as if
    /// decided here.
    pub(crate) async fn decided(self: &Arc<Self>, id: i64) -> Result<()> {
        match self.base.store.read(move |c| approvals::get(c, id)).await? {
            Some(r) => self.closed(&r).await,
            None => Ok(()),
        }
    }

    /// What follows a closed approval: its waiter wakes; a spending approval lets
    /// the held agent run, or pauses it when refused.
    async fn closed(self: &Arc<Self>, r: &approvals::Row) -> Result<()> {
        self.wake(r.view.id);
        if r.view.vote.is_some() {
            // The members' proposal closes with it (if a vote did not close it).
            let id = r.view.id;
            let now = self.base.clock.now_ms();
            let closed = self
                .base
                .store
                .write(move |c| match approvals::get(c, id)? {
                    Some(r) => held::close_for_tx(c, &r, now),
                    None => Ok(None),
                })
                .await?;
            if let Some(p) = &closed {
                self.base.messaging.announce(r.workflow_id, p);
            }
        }
        self.base.events.publish(Event::ApprovalClosed {
            workflow_id: r.workflow_id,
            id: r.view.id,
        });
        if r.view.event == "merge" {
            let allowed = matches!(approvals::ended(r), Ended::Allowed(_));
            return match self.follow.get() {
                Some(f) => {
                    f.merge_closed(MergeClosed {
                        id: r.view.id,
                        reason: r.view.reason.clone(),
                        workflow_id: r.workflow_id,
                        workflow: r.workflow.clone(),
                        allowed,
                    })
                    .await
                }
                None => Ok(()),
            };
        }
        if r.view.event != "spend" {
            return Ok(());
        }
        match approvals::ended(r) {
            Ended::Allowed(_) => {
                let wid = r.workflow_id;
                let agents: Vec<i64> = self
                    .base
                    .store
                    .read(move |c| {
                        let mut st = c.prepare("SELECT id FROM agents WHERE workflow_id = ?1")?;
                        Ok(st
                            .query_map([wid], |r| r.get(0))?
                            .collect::<sql::Result<_>>()?)
                    })
                    .await?;
                if let Some(f) = self.follow.get() {
                    f.spend_allowed(agents).await;
                }
            }
            _ => {
                let reason = format!(
                    "approval {} to go on spending was not given ({})",
                    r.view.id,
                    r.view.reason.clone().unwrap_or_default()
                );
                let p = Pause::until_resumed(
                    r.agent_id,
                    (&r.workflow, r.workflow_id),
                    &r.view.agent,
                    &reason,
                );
                self.base.pause(p).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
impl Approvals {
    /// Whether a run waits on approval `id` now.
    fn is_waited(&self, id: i64) -> bool {
        self.waits.lock().unwrap().contains_key(&id)
    }
}

#[cfg(test)]
mod tests;
