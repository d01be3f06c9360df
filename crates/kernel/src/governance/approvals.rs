//! Approvals as rows: who asks, for what, under which contracts, who may decide,
//! and how it ended. An approval is `pending` until enough approvers approve
//! (`approved`), one refuses (`denied`), its deadline passes (`timed_out`, then
//! allowed or refused as its contracts say) or the run that asked ended first
//! (`lost`: never approved by default). The lead (`user`) may decide any approval.

use crate::governance::contracts::{Decision, record_tx};
use domain::clock::fmt_ms;
use domain::contracts::{Approval, OnTimeout};
use domain::error::{Error, Result};
use domain::names::{LEAD, WorkflowRef};
use domain::states::ApprovalState;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use store::sql;
use store::sql::{Connection, OptionalExtension};

/// How many closed approvals approval_list shows besides the pending ones.
const RECENT_CLOSED: i64 = 20;

/// A new approval.
#[derive(Debug, Clone)]
pub struct NewApproval {
    pub workflow_id: i64,
    pub agent_id: i64,
    pub agent: String,
    pub run_id: Option<String>,
    pub event: String,
    pub detail: String,
    pub approval: Approval,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Vote {
    pub who: String,
    /// approve or deny
    pub decision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub at: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ApprovalView {
    /// Pass it to approval_decide.
    pub id: i64,
    pub workflow: String,
    /// The agent that asks.
    pub agent: String,
    /// tool_request or spend.
    pub event: String,
    /// What exactly: the tool and its command, path or URL; or the spend.
    pub what: String,
    pub contracts: Vec<String>,
    /// Who may decide (`user` is the lead, who may always decide).
    pub approvers: Vec<String>,
    /// How many approvals it needs.
    pub needed: usize,
    /// A vote of the members (require_votes): the share asked, e.g. "2/3"; they
    /// vote on its proposal with team_vote, and it is refused once too many voted
    /// against for it to pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vote: Option<String>,
    pub votes: Vec<Vote>,
    /// pending, approved, denied, timed_out or lost.
    pub state: domain::states::ApprovalState,
    /// What happens at the deadline: deny or allow.
    pub on_timeout: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub since: String,
    pub deadline: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
}

/// How an approval ended, for whoever waits on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    Pending,
    Allowed(String),
    Refused(String),
}

/// Keeps with approval `id` what it holds (done once it is approved).
pub fn set_held_tx(c: &Connection, id: i64, held: &str) -> Result<()> {
    c.execute("UPDATE approvals SET held = ?2 WHERE id = ?1", (id, held))?;
    Ok(())
}

/// What approval `id` holds, if anything.
pub fn held_of(c: &Connection, id: i64) -> Result<Option<String>> {
    Ok(
        c.query_row("SELECT held FROM approvals WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()?
        .flatten(),
    )
}

/// The pending approval of the instance that holds exactly `held`, if any.
pub fn pending_held(c: &Connection, workflow_id: i64, held: &str) -> Result<Option<i64>> {
    Ok(c.query_row(
        "SELECT id FROM approvals WHERE workflow_id = ?1 AND state = 'pending' AND held = ?2",
        (workflow_id, held),
        |r| r.get(0),
    )
    .optional()?)
}

/// Opens approval `a` at `now`, its deadline its timeout later.
pub fn insert_tx(c: &Connection, a: &NewApproval, now: i64) -> Result<i64> {
    let deadline = now + a.approval.timeout.as_millis() as i64;
    let id: i64 = c.query_row(
        "INSERT INTO approvals (workflow_id, agent_id, agent, run_id, event, detail, contracts, approvers, needed,
                                on_timeout, created_at, deadline, vote)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) RETURNING id",
        sql::params![
            a.workflow_id,
            a.agent_id,
            a.agent,
            a.run_id,
            a.event,
            a.detail,
            json(&a.approval.contracts),
            json(&a.approval.approvers),
            a.approval.count as i64,
            match a.approval.on_timeout {
                OnTimeout::Deny => "deny",
                OnTimeout::Allow => "allow",
            },
            now,
            deadline,
            a.approval.votes_text()
        ],
        |r| r.get(0),
    )?;
    record_tx(
        c,
        &Decision {
            approval_id: Some(id),
            ..Decision::new(
                a.workflow_id,
                &a.agent,
                &a.event,
                &a.detail,
                a.approval.contracts.clone(),
                "approval_requested",
            )
        },
        now,
    )?;
    Ok(id)
}

fn json<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

const COLUMNS: &str = "a.id, w.name, w.tag, a.agent, a.event, a.detail, a.contracts, a.approvers, a.needed, a.votes,
    a.state, a.on_timeout, a.reason, a.created_at, a.deadline, a.decided_at, a.workflow_id, a.run_id, a.agent_id,
    a.vote";

/// An approval row with what deciding needs beside the view.
pub struct Row {
    pub view: ApprovalView,
    pub workflow_id: i64,
    pub workflow: WorkflowRef,
    pub run_id: Option<String>,
    pub agent_id: i64,
    /// `view.state`, typed.
    pub state: ApprovalState,
    deadline_ms: i64,
}

impl Row {
    /// When it times out, in ms.
    pub fn deadline_ms(&self) -> i64 {
        self.deadline_ms
    }
}

fn row(r: &sql::Row<'_>) -> sql::Result<Row> {
    let wf = WorkflowRef {
        name: r.get(1)?,
        tag: r.get(2)?,
    };
    let deadline_ms: i64 = r.get(14)?;
    let state: ApprovalState = r.parse(10)?;
    Ok(Row {
        view: ApprovalView {
            id: r.get(0)?,
            workflow: wf.to_string(),
            agent: r.get(3)?,
            event: r.get(4)?,
            what: r.get(5)?,
            contracts: serde_json::from_str(&r.get::<String>(6)?).unwrap_or_default(),
            approvers: serde_json::from_str(&r.get::<String>(7)?).unwrap_or_default(),
            needed: r.get::<i64>(8)? as usize,
            votes: serde_json::from_str(&r.get::<String>(9)?).unwrap_or_default(),
            state,
            on_timeout: r.get(11)?,
            reason: r.get(12)?,
            since: fmt_ms(r.get(13)?),
            deadline: fmt_ms(deadline_ms),
            decided_at: r.get::<Option<i64>>(15)?.map(fmt_ms),
            vote: r.get(19)?,
        },
        workflow_id: r.get(16)?,
        workflow: wf,
        run_id: r.get(17)?,
        agent_id: r.get(18)?,
        state,
        deadline_ms,
    })
}

pub fn get(c: &Connection, id: i64) -> Result<Option<Row>> {
    Ok(c
        .query_row(
            &format!("SELECT {COLUMNS} FROM approvals a JOIN workflows w ON w.id = a.workflow_id WHERE a.id = ?1"),
            [id],
            row,
        )
        .optional()?)
}

/// Pending approvals and the latest closed ones, of one instance or all; for an
/// agent, only those it asked for or may decide.
pub fn list(
    c: &Connection,
    workflow_id: Option<i64>,
    member: Option<&str>,
) -> Result<Vec<ApprovalView>> {
    let mut out = Vec::new();
    for (cond, limit) in [
        ("a.state = 'pending'", 1000),
        ("a.state <> 'pending'", RECENT_CLOSED),
    ] {
        let mut st = c.prepare(&format!(
            "SELECT {COLUMNS} FROM approvals a JOIN workflows w ON w.id = a.workflow_id
             WHERE {cond} AND (a.workflow_id = ?1 OR ?1 IS NULL) ORDER BY a.id DESC LIMIT ?2"
        ))?;
        for r in st.query_map((workflow_id, limit), row)? {
            let r = r?;
            let mine = member.is_none_or(|m| {
                r.view.agent.eq_ignore_ascii_case(m)
                    || r.view.approvers.iter().any(|a| a.eq_ignore_ascii_case(m))
            });
            if mine {
                out.push(r.view);
            }
        }
    }
    Ok(out)
}

/// How a row ended (Pending while it is open and before its deadline).
pub fn ended(r: &Row) -> Ended {
    let reason = r.view.reason.clone().unwrap_or_default();
    match r.state {
        ApprovalState::Approved => Ended::Allowed(reason),
        ApprovalState::TimedOut if r.view.on_timeout == "allow" => Ended::Allowed(reason),
        ApprovalState::Pending => Ended::Pending,
        ApprovalState::Denied | ApprovalState::TimedOut | ApprovalState::Lost => {
            Ended::Refused(reason)
        }
    }
}

/// Closes `r` as `state` at `now`.
fn close_tx(
    c: &Connection,
    r: &Row,
    (state, now): (ApprovalState, i64),
    by: Option<&str>,
    reason: &str,
) -> Result<()> {
    c.execute(
        "UPDATE approvals SET state = ?2, reason = ?3, decided_at = ?4, decided_by = ?5 WHERE id = ?1 AND state = 'pending'",
        (r.view.id, state.as_str(), reason, now, by),
    )?;
    // The decision log says "refused" where the approval says "denied".
    let outcome = match state {
        ApprovalState::Denied => "refused",
        s => s.as_str(),
    };
    record_tx(
        c,
        &Decision {
            approval_id: Some(r.view.id),
            decided_by: by.map(str::to_owned),
            reason: Some(reason.to_owned()),
            ..Decision::new(
                r.workflow_id,
                &r.view.agent,
                &r.view.event,
                &r.view.what,
                r.view.contracts.clone(),
                outcome,
            )
        },
        now,
    )?;
    Ok(())
}

/// One approver's decision (`id`, `who`, approve or not, why) at `now`. Returns the
/// row as it is afterwards.
pub fn decide_tx(
    c: &Connection,
    (id, who, approve, reason): (i64, &str, bool, Option<&str>),
    now: i64,
) -> Result<Row> {
    let r = get(c, id)?
        .ok_or_else(|| Error::not_found(format!("no approval {id}; approval_list shows them")))?;
    expire_tx(c, &r, now)?;
    let r = get(c, id)?.expect("just read");
    if r.state != ApprovalState::Pending {
        return Err(Error::conflict(format!(
            "approval {id} is already {}{}; nothing to decide",
            r.view.state,
            r.view
                .reason
                .as_deref()
                .map(|x| format!(" ({x})"))
                .unwrap_or_default()
        )));
    }
    let is_lead = who == LEAD;
    if !is_lead && r.view.agent.eq_ignore_ascii_case(who) {
        return Err(Error::forbidden(format!(
            "approval {id} is your own request; another approver decides it"
        )));
    }
    if !is_lead && !r.view.approvers.iter().any(|a| a.eq_ignore_ascii_case(who)) {
        return Err(Error::forbidden(format!(
            "you are not an approver of approval {id}; its approvers: {}",
            r.view.approvers.join(", ")
        )));
    }
    let mut votes = r.view.votes.clone();
    votes.retain(|v| !v.who.eq_ignore_ascii_case(who));
    votes.push(Vote {
        who: who.to_owned(),
        decision: if approve { "approve" } else { "deny" }.into(),
        reason: reason.map(str::to_owned),
        at: fmt_ms(now),
    });
    c.execute(
        "UPDATE approvals SET votes = ?2 WHERE id = ?1",
        (id, json(&votes)),
    )?;
    // A vote of the members is decided by all who voted, the lead's word by the lead.
    let by = match &r.view.vote {
        Some(_) if !is_lead => tally(&votes),
        _ => who.to_owned(),
    };
    let why = |verb: &str| match reason {
        Some(x) => format!("{verb} by {by}: {x}"),
        None => format!("{verb} by {by}"),
    };
    let approvals = votes.iter().filter(|v| v.decision == "approve").count();
    // One refusal refuses, unless the members vote: then only enough refusals that
    // the rest can no longer carry it (the lead's word is final either way).
    let against = votes.len() - approvals;
    let refused = match &r.view.vote {
        Some(_) if !is_lead => against > r.view.approvers.len().saturating_sub(r.view.needed),
        _ => !approve,
    };
    if refused {
        close_tx(
            c,
            &r,
            (ApprovalState::Denied, now),
            Some(who),
            &why("refused"),
        )?;
    } else if (is_lead && approve) || approvals >= r.view.needed {
        close_tx(
            c,
            &r,
            (ApprovalState::Approved, now),
            Some(who),
            &why("approved"),
        )?;
    }
    Ok(get(c, id)?.expect("just written"))
}

/// "a vote of the members (for: a, b; against: c)".
fn tally(votes: &[Vote]) -> String {
    let of = |d: &str| {
        let names: Vec<&str> = votes
            .iter()
            .filter(|v| v.decision == d)
            .map(|v| v.who.as_str())
            .collect();
        if names.is_empty() {
            "nobody".to_owned()
        } else {
            names.join(", ")
        }
    };
    format!(
        "a vote of the members (for: {}; against: {})",
        of("approve"),
        of("deny")
    )
}

/// Closes a pending approval whose deadline passed by `now` (its `on_timeout`
/// decides). Returns whether it did.
pub fn expire_tx(c: &Connection, r: &Row, now: i64) -> Result<bool> {
    if r.state != ApprovalState::Pending || r.deadline_ms > now {
        return Ok(false);
    }
    let then = if r.view.on_timeout == "allow" {
        "allowed"
    } else {
        "refused"
    };
    close_tx(
        c,
        r,
        (ApprovalState::TimedOut, now),
        None,
        &format!("nobody decided in time, so it was {then}"),
    )?;
    Ok(true)
}

/// Pending approvals asked by a run that is over: they can no longer be granted
/// (closed at `now`).
pub fn lose_run_tx(c: &Connection, run_id: &str, now: i64) -> Result<Vec<i64>> {
    let mut st = c.prepare(&format!(
        "SELECT {COLUMNS} FROM approvals a JOIN workflows w ON w.id = a.workflow_id
         WHERE a.state = 'pending' AND a.run_id = ?1"
    ))?;
    let rows: Vec<Row> = st.query_map([run_id], row)?.collect::<sql::Result<_>>()?;
    for r in &rows {
        close_tx(
            c,
            r,
            (ApprovalState::Lost, now),
            None,
            "the run that asked ended before a decision; it was not done",
        )?;
    }
    Ok(rows.iter().map(|r| r.view.id).collect())
}

/// Pending approvals asked by runs that are no longer running (after a restart),
/// closed at `now`.
pub fn lose_orphans_tx(c: &Connection, now: i64) -> Result<usize> {
    let runs: Vec<String> = c
        .prepare(
            "SELECT DISTINCT a.run_id FROM approvals a WHERE a.state = 'pending' AND a.run_id IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = a.run_id AND r.status = 'running')",
        )?
        .query_map((), |r| r.get(0))?
        .collect::<sql::Result<_>>()?;
    let mut n = 0;
    for r in runs {
        n += lose_run_tx(c, &r, now)?.len();
    }
    Ok(n)
}

/// The earliest deadline of a pending approval (for the timer).
pub fn next_deadline(c: &Connection) -> Result<Option<(i64, i64)>> {
    Ok(c.query_row(
        "SELECT id, deadline FROM approvals WHERE state = 'pending' ORDER BY deadline LIMIT 1",
        (),
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()?)
}

/// Whether a spend approval for these contracts was granted to this agent (or, for
/// a workflow-wide contract, to anyone in the instance), and whether one is open.
pub fn spend_state(
    c: &Connection,
    workflow_id: i64,
    agent_id: Option<i64>,
    contracts: &[String],
) -> Result<(bool, bool)> {
    let key = json(contracts);
    let q = |state_cond: &str| -> Result<bool> {
        Ok(c.query_row(
            &format!(
                "SELECT EXISTS (SELECT 1 FROM approvals WHERE workflow_id = ?1 AND event = 'spend' AND contracts = ?2
                   AND (agent_id = ?3 OR ?3 IS NULL) AND {state_cond})"
            ),
            sql::params![workflow_id, key, agent_id],
            |r| r.get(0),
        )?)
    };
    Ok((
        q("(state = 'approved' OR (state = 'timed_out' AND on_timeout = 'allow'))")?,
        q("state = 'pending'")?,
    ))
}
