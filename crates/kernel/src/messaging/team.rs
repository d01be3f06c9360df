//! Team awareness: members' self-reported status and the member list.
//!
//! Members of a workflow instance are its agents plus the lead (`user`), who can be
//! @mentioned and messaged like anyone else.

use crate::Scope;
use crate::messaging::Messaging;
use domain::clock::fmt_ms;
use domain::error::{Error, Result};
use domain::names::LEAD;
use schemars::JsonSchema;
use serde::Serialize;
use store::sql;
use store::sql::{Connection, OptionalExtension};
use store::{Isolation, WriteScope::Instance as instance};

pub const STATUS_STATES: &[&str] = &["idle", "busy", "blocked"];
const MAX_STATUS_TEXT: usize = 500;

#[derive(Debug, Clone, Default)]
pub struct StatusUpdate {
    pub task: Option<String>,
    pub state: Option<String>,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Status {
    pub member: String,
    /// idle, busy or blocked.
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub updated_at: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Member {
    pub name: String,
    /// The worker backend, or `lead` for the human side (`user`).
    pub backend: String,
    /// Self-reported state (idle, busy, blocked); present with include_status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub is_you: bool,
}

/// A member's self-reported status, if it ever set one.
pub(crate) fn read_status(
    c: &Connection,
    workflow_id: i64,
    member: &str,
) -> sql::Result<Option<Status>> {
    c.prepare_cached(
        "SELECT member, state, task, note, updated_at FROM member_status WHERE workflow_id = ?1 AND member = ?2",
    )?
    .query_row((workflow_id, member), |r| {
        Ok(Status { member: r.get(0)?, state: r.get(1)?, task: r.get(2)?, note: r.get(3)?, updated_at: fmt_ms(r.get(4)?) })
    })
    .optional()
}

fn check_text(what: &str, s: &Option<String>) -> Result<()> {
    if let Some(s) = s
        && s.chars().count() > MAX_STATUS_TEXT
    {
        return Err(Error::invalid(format!(
            "{what} is longer than {MAX_STATUS_TEXT} characters; keep it short"
        )));
    }
    Ok(())
}

impl Messaging {
    /// Merges the given fields into the caller's status. `state: idle` without a task
    /// clears the task.
    pub async fn my_status_set(&self, scope: &Scope, u: StatusUpdate) -> Result<Status> {
        if let Some(st) = &u.state
            && !STATUS_STATES.contains(&st.as_str())
        {
            return Err(Error::invalid(format!(
                "state {st:?} is not one of {}",
                STATUS_STATES.join(", ")
            )));
        }
        check_text("task", &u.task)?;
        check_text("note", &u.note)?;
        if u.task.is_none() && u.state.is_none() && u.note.is_none() {
            return Err(Error::invalid("nothing to set: give task, state or note"));
        }
        let (s, now) = (scope.clone(), self.clock.now_ms());
        // The member's status row of its instance.
        self.store
            .write_as(instance(scope.workflow_id), Isolation::Savepoint, move |c| {
                let (mut state, mut task, mut note) = read_status(c, s.workflow_id, &s.me)?
                    .map(|old| (old.state, old.task, old.note))
                    .unwrap_or(("idle".into(), None, None));
                let clears_task = u.state.as_deref() == Some("idle") && u.task.is_none();
                if let Some(x) = u.state {
                    state = x;
                }
                if u.task.is_some() {
                    task = u.task.filter(|t| !t.is_empty());
                } else if clears_task {
                    task = None;
                }
                if u.note.is_some() {
                    note = u.note.filter(|t| !t.is_empty());
                }
                c.execute(
                    "INSERT INTO member_status (workflow_id, member, state, task, note, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (workflow_id, member) DO UPDATE SET state = excluded.state, task = excluded.task,
                       note = excluded.note, updated_at = excluded.updated_at",
                    sql::params![s.workflow_id, s.me, state, task, note, now],
                )?;
                Ok(Status { member: s.me.clone(), state, task, note, updated_at: fmt_ms(now) })
            })
            .await
    }

    pub async fn team_members(&self, scope: &Scope, include_status: bool) -> Result<Vec<Member>> {
        let s = scope.clone();
        self.store
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT a.name, a.backend, ms.state, ms.task, ms.note FROM agents a
                     LEFT JOIN member_status ms ON ms.workflow_id = a.workflow_id AND ms.member = a.name
                     WHERE a.workflow_id = ?1 ORDER BY a.name",
                )?;
                let mut rows = st
                    .query_map([s.workflow_id], |r| {
                        Ok((r.get::<String>(0)?, r.get::<String>(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                    })?
                    .collect::<sql::Result<Vec<(String, String, Option<String>, Option<String>, Option<String>)>>>()?;
                let lead = read_status(c, s.workflow_id, LEAD)?;
                let (ls, lt, ln) = lead.map(|l| (Some(l.state), l.task, l.note)).unwrap_or_default();
                rows.push((LEAD.into(), "lead".into(), ls, lt, ln));
                Ok(rows
                    .into_iter()
                    .map(|(name, backend, state, task, note)| Member {
                        is_you: name.eq_ignore_ascii_case(&s.me),
                        state: include_status.then(|| state.unwrap_or_else(|| "idle".into())),
                        task: if include_status { task } else { None },
                        note: if include_status { note } else { None },
                        name,
                        backend,
                    })
                    .collect())
            })
            .await
    }
}
