//! Contracts on tasks (`when: {event: task, state, title, agent}`): an agent's move
//! of a task is asked first; a `deny` refuses it, a `require_approval` holds it.
//! A held move leaves the task as it is, with the approval shown on it (nobody
//! claims it, only the lead moves it meanwhile); when the approval closes the move
//! is made (approved) or dropped (denied, timed out), and the mover is told either
//! way — as when the lead moves the task first or its claim is released. The
//! lead's own moves are not governed.

use super::rows::{self, Asked};
use super::wake::history_tx;
use super::{Done, Tasks};
use crate::Scope;
use crate::governance::approvals::{self, Ended, NewApproval};
use crate::governance::contracts::{Decision, in_force, record_tx};
use crate::messaging::post_system_to;
use crate::runtime::voting::{contract_list, open_approval_tx};
use domain::contracts::{self, Event as Ev};
use domain::error::{Error, Result};
use domain::names::SYSTEM;
use domain::states::TaskState;
use serde::{Deserialize, Serialize};
use store::sql::{self, Connection, OptionalExtension};

/// A held move, kept on the task until its approval closes.
#[derive(Debug, Serialize, Deserialize)]
struct HeldMove {
    by: String,
    state: TaskState,
    #[serde(default)]
    result: Option<serde_json::Value>,
    #[serde(default)]
    note: Option<String>,
}

/// What recording a verdict gives: posts, and Err (refused) or the approval held.
type Recorded = (
    Vec<crate::messaging::Posted>,
    std::result::Result<Option<(i64, Option<std::time::Duration>)>, String>,
);

impl Tasks {
    /// What contracts say of `scope.me` moving task `a.id` to `to`: Err when one
    /// refuses (or the move is not allowed at all), the held note when an
    /// approval must come first, None to go on.
    pub(super) async fn govern(
        &self,
        scope: &Scope,
        a: &Asked,
        to: TaskState,
    ) -> Result<Option<String>> {
        if scope.lead {
            return Ok(None);
        }
        let (s, id) = (scope.clone(), a.id);
        let checked = a.clone();
        let (title, seen) = self
            .store
            .read(move |c| {
                let cur = rows::current_tx(c, &s, id)?;
                rows::allowed(&s, &checked, &cur)?;
                Ok((held_by(c, id)?, (cur.state, cur.owner)))
            })
            .await?;
        let all = self.contracts.all();
        let v = contracts::decide(
            in_force(&all, scope.workflow_id, &scope.workflow),
            &Ev::Task {
                agent: &scope.me,
                state: to.as_str(),
                title: &title,
            },
        );
        if !v.any() {
            return Ok(None);
        }
        let held = serde_json::to_string(&HeldMove {
            by: scope.me.clone(),
            state: to,
            result: a.result.clone(),
            note: a.note.clone(),
        })
        .map_err(|e| Error::internal(e.to_string()))?;
        let (s, now) = (scope.clone(), self.clock.now_ms());
        let (posted, outcome) = self
            .store
            .write(move |c| {
                unchanged_tx(c, id, &seen)?;
                record_verdict_tx(c, &s, (id, &title, to), (&v, &held), now)
            })
            .await?;
        for p in &posted {
            self.messaging.announce(scope.workflow_id, p);
        }
        let Some((approval, asked)) = outcome.map_err(Error::forbidden)? else {
            return Ok(None);
        };
        if let Some(timeout) = asked {
            self.events.publish(crate::events::Event::ApprovalAsked {
                workflow_id: scope.workflow_id,
                id: approval,
            });
            if let Some(rt) = self.runtime.upgrade() {
                rt.approvals().arm(approval, timeout);
            }
            self.events.publish(crate::events::Event::TaskChanged {
                workflow_id: scope.workflow_id,
                id,
                state: self.one(scope.workflow_id, id, false).await?.state,
                moved: false,
            });
        }
        Ok(Some(format!(
            "a contract asks for approval {approval} first: task {id} stays as it is until it is \
             decided, then moves to {to} (or not), and you are told"
        )))
    }

    /// Approval `id` closed: the move it held is made (approved) or dropped.
    pub(crate) async fn approval_closed(&self, id: i64) -> Result<()> {
        let now = self.clock.now_ms();
        let done = self.store.write(move |c| closed_tx(c, id, now)).await?;
        self.announce(done);
        Ok(())
    }
}

/// Refuses a verdict on task `id` unless it is still as the check saw it (its
/// state and owner) with no move waiting: a release and another claim, or a
/// second move, may have come between the check and the write.
pub(super) fn unchanged_tx(
    c: &Connection,
    id: i64,
    (state, owner): &(TaskState, Option<String>),
) -> Result<()> {
    let same: bool = c
        .query_row(
            "SELECT 1 FROM tasks WHERE id = ?1 AND approval_id IS NULL AND state = ?2
               AND owner IS NOT DISTINCT FROM ?3",
            sql::params![id, state.as_str(), owner],
            |_| Ok(true),
        )
        .optional()?
        .unwrap_or(false);
    if same {
        return Ok(());
    }
    Err(Error::conflict(format!(
        "task {id} changed meanwhile; read it again with task_list"
    )))
}

/// The title of task `id`, unless a move of it already waits for an approval.
fn held_by(c: &Connection, id: i64) -> Result<String> {
    let (title, approval): (String, Option<i64>) = c.query_row(
        "SELECT title, approval_id FROM tasks WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    if let Some(a) = approval {
        return Err(Error::conflict(format!(
            "task {id} waits for approval {a} already; it moves once that is decided"
        )));
    }
    Ok(title)
}

/// Records a verdict on a move of task `id`: its notices, the refusal or the
/// approval that holds it (kept on the task), and the decision log.
fn record_verdict_tx(
    c: &Connection,
    s: &Scope,
    (id, title, to): (i64, &str, TaskState),
    (v, held): (&contracts::Verdict, &str),
    now: i64,
) -> Result<Recorded> {
    let (wid, me) = (s.workflow_id, &s.me);
    let detail = format!("task {id} \"{title}\" to {to}");
    let mut posted = Vec::new();
    for (contract, to) in &v.notify {
        let d = Decision::new(wid, me, "task", &detail, vec![contract.clone()], "notified");
        record_tx(c, &d, now)?;
        let text = format!("contract \"{contract}\": {me} moves {detail}.");
        posted.push(post_system_to(c, wid, &s.workflow, to, &text, now)?);
    }
    if let Some((contract, reason, _)) = &v.deny {
        let d = Decision {
            reason: Some(reason.clone()),
            ..Decision::new(wid, me, "task", &detail, vec![contract.clone()], "denied")
        };
        record_tx(c, &d, now)?;
        history_tx(c, id, (me, "refused", Some(reason)), now)?;
        let why = format!("contract \"{contract}\" refuses moving task {id} to {to}: {reason}");
        return Ok((posted, Err(why)));
    }
    let Some(a) = &v.approval else {
        return Ok((posted, Ok(None)));
    };
    let agent_id = crate::registry::agent_id_tx(c, wid, me)?.unwrap_or(0);
    let new = NewApproval {
        workflow_id: wid,
        agent_id,
        agent: me.clone(),
        run_id: None,
        event: "task".into(),
        detail: detail.clone(),
        approval: a.clone(),
    };
    let (approval, post) = open_approval_tx(c, &s.workflow, new, &detail, now, |n, a, few| {
        format!(
            "approval {n}: {me} moves {detail} (contract {}{few}); it moves when you approve with \
             approval_decide {{\"id\": {n}, \"decision\": \"approve\"}}, or not with \"deny\" (within {}).",
            contract_list(a),
            humantime::format_duration(a.timeout)
        )
    })?;
    // unchanged_tx saw the task as the check did, in this same job.
    c.execute(
        "UPDATE tasks SET approval_id = ?2, held = ?3, updated_at = ?4
         WHERE id = ?1 AND approval_id IS NULL",
        sql::params![id, approval, held, now],
    )?;
    history_tx(
        c,
        id,
        (me, "held", Some(&format!("approval {approval}: to {to}"))),
        now,
    )?;
    posted.push(post);
    Ok((posted, Ok(Some((approval, Some(a.timeout))))))
}

/// Tells the mover that the move of task `id` held by an approval is dropped
/// (the lead moved the task, or its claim was released): `why`.
pub(super) fn dropped_tx(
    c: &Connection,
    (wid, wf): (i64, &domain::names::WorkflowRef),
    id: i64,
    why: &str,
    now: i64,
    done: &mut Done,
) -> Result<()> {
    let row: Option<(Option<i64>, Option<String>)> = c
        .query_row(
            "SELECT approval_id, held FROM tasks WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((Some(approval), Some(held))) = row else {
        return Ok(());
    };
    let Ok(m) = serde_json::from_str::<HeldMove>(&held) else {
        return Ok(());
    };
    let text = format!(
        "approval {approval} no longer holds your move of task {id} to {}: {why}",
        m.state
    );
    let p = post_system_to(c, wid, wf, &[m.by], &text, now)?;
    done.posted.push((wid, p));
    Ok(())
}

/// Makes or drops the moves whose approvals closed while nobody listened (a
/// restart, a lagged watch).
pub(super) fn closed_all_tx(c: &Connection, now: i64) -> Result<Done> {
    let ids: Vec<i64> = c
        .prepare_cached(
            "SELECT t.approval_id FROM tasks t JOIN approvals a ON a.id = t.approval_id
             WHERE a.state <> 'pending'",
        )?
        .query_map((), |r| r.get(0))?
        .collect::<sql::Result<_>>()?;
    let mut done = Done::default();
    for id in ids {
        let d = closed_tx(c, id, now)?;
        done.changed.extend(d.changed);
        done.posted.extend(d.posted);
    }
    Ok(done)
}

/// Makes or drops the move held by approval `approval`, once it is closed.
fn closed_tx(c: &Connection, approval: i64, now: i64) -> Result<Done> {
    let mut done = Done::default();
    let task: Option<(i64, i64, String)> = c
        .query_row(
            "SELECT id, workflow_id, held FROM tasks WHERE approval_id = ?1",
            [approval],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    let (Some((id, wid, held)), Some(row)) = (task, approvals::get(c, approval)?) else {
        return Ok(done);
    };
    if row.state == domain::states::ApprovalState::Pending {
        return Ok(done);
    }
    let Ok(m) = serde_json::from_str::<HeldMove>(&held) else {
        return Ok(done);
    };
    c.execute(
        "UPDATE tasks SET approval_id = NULL, held = NULL, updated_at = ?2 WHERE id = ?1",
        sql::params![id, now],
    )?;
    let s = Scope {
        workflow: row.workflow.clone(),
        workflow_id: wid,
        me: m.by.clone(),
        lead: false,
        run_id: None,
    };
    let outcome = match approvals::ended(&row) {
        Ended::Allowed(_) => {
            let a = Asked {
                id,
                to: Some(m.state),
                result: m.result,
                body: None,
                note: m.note,
                links: Vec::new(),
            };
            let cur = rows::current_tx(c, &s, id)?;
            match rows::allowed(&s, &a, &cur) {
                Ok(()) => {
                    rows::move_tx(c, &s, &a, (cur.state, m.state), now, &mut done)?;
                    format!("approval {approval} given: task {id} is {} now", m.state)
                }
                Err(e) => format!("approval {approval} given, but task {id} cannot move: {e}"),
            }
        }
        _ => {
            let why = format!("approval {approval} was {}", row.view.state);
            history_tx(c, id, (SYSTEM, "not moved", Some(&why)), now)?;
            done.changed
                .push((wid, id, rows::current_tx(c, &s, id)?.state, false));
            format!(
                "approval {approval} was not given: task {id} did not move to {}",
                m.state
            )
        }
    };
    let p = post_system_to(c, wid, &row.workflow, &[m.by], &outcome, now)?;
    done.posted.push((wid, p));
    // An open task the move no longer holds can be taken.
    if rows::current_tx(c, &s, id)?.state == TaskState::Open {
        super::wake::wake_tx(c, (wid, &row.workflow), &[id], "", now, &mut done)?;
    }
    Ok(done)
}
