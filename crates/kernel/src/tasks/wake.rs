//! What a change of the board tells people, in the same transaction: its history
//! line, and a message in the inboxes of the agents that may take a task that has
//! become claimable (the scheduler's wake on delivery starts an idle one; the
//! inbox stays the record). An agent that holds a claim, or failed for good, is
//! not told.

use super::Done;
use super::rules::Assign;
use crate::messaging::{post_system_to, preview};
use domain::error::Result;
use domain::names::WorkflowRef;
use domain::states::AgentState;
use store::sql::{self, Connection, OptionalExtension};

/// Appends a line to task `id`'s history: `(who, what, why)` at `now`.
pub(crate) fn history_tx(
    c: &Connection,
    id: i64,
    (who, what, why): (&str, &str, Option<&str>),
    now: i64,
) -> Result<()> {
    c.execute(
        "INSERT INTO task_history (task_id, at, who, what, why) VALUES (?1, ?2, ?3, ?4, ?5)",
        sql::params![id, now, who, what, why],
    )?;
    Ok(())
}

/// The role of member `name` in the organisation instance `workflow_id` is in
/// (or is the board of), if any; none for a sub-agent of that name (made by
/// another agent, it is never the member its name would say).
pub(crate) fn role_of(c: &Connection, workflow_id: i64, name: &str) -> Result<Option<String>> {
    Ok(c.query_row(
        "SELECT m.role FROM org_members m JOIN workflows w ON w.id = ?1
         WHERE m.member = ?2 AND m.org = COALESCE(w.org,
               (SELECT o.name FROM orgs o WHERE o.workflow_id = w.id))
           AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.workflow_id = w.id AND a.name = ?2
                           AND a.parent_id IS NOT NULL)",
        sql::params![workflow_id, name],
        |r| r.get::<Option<String>>(0),
    )
    .optional()?
    .flatten())
}

/// The tasks that wait for task `id` and wait for nothing else now (it is done).
pub(crate) fn unblocked_by_tx(c: &Connection, id: i64) -> Result<Vec<i64>> {
    let mut st = c.prepare_cached(
        "SELECT t.id FROM task_deps d JOIN tasks t ON t.id = d.task_id
         WHERE d.dep_id = ?1 AND t.state = 'open'
           AND NOT EXISTS (SELECT 1 FROM task_deps e JOIN tasks x ON x.id = e.dep_id
                           WHERE e.task_id = t.id AND x.state <> 'done')
         ORDER BY t.id",
    )?;
    let ids = st
        .query_map([id], |r| r.get(0))?
        .collect::<sql::Result<_>>()?;
    Ok(ids)
}

/// The instance with this id.
pub(crate) fn workflow_tx(c: &Connection, workflow_id: i64) -> Result<Option<WorkflowRef>> {
    Ok(c.query_row(
        "SELECT name, tag FROM workflows WHERE id = ?1",
        [workflow_id],
        |r| {
            Ok(WorkflowRef {
                name: r.get(0)?,
                tag: r.get(1)?,
            })
        },
    )
    .optional()?)
}

/// Tells the agents of the instance that may take one of `ids` (those open and
/// unblocked), hold no claim and did not fail for good, other than `by` (who
/// gave it back; empty for none), in one message: `task 3 "title" can be taken`.
pub(crate) fn wake_tx(
    c: &Connection,
    (workflow_id, wf): (i64, &WorkflowRef),
    ids: &[i64],
    by: &str,
    now: i64,
    done: &mut Done,
) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut free: Vec<(i64, String, Option<String>)> = Vec::new();
    let mut st = c.prepare_cached(
        "SELECT t.id, t.title, t.assign FROM tasks t
         WHERE t.id = ?1 AND t.state = 'open' AND t.approval_id IS NULL
           AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks x ON x.id = d.dep_id
                           WHERE d.task_id = t.id AND x.state <> 'done')",
    )?;
    for id in ids {
        if let Some(row) = st
            .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?
        {
            free.push(row);
        }
    }
    if free.is_empty() {
        return Ok(());
    }
    let who = takers(c, workflow_id, &free, by)?;
    if who.is_empty() {
        return Ok(());
    }
    let text = match free.as_slice() {
        [(id, title, _)] => format!(
            "task {id} \"{}\" can be taken: task_claim takes it.",
            preview(title)
        ),
        many => {
            let ids: Vec<String> = many.iter().map(|(id, ..)| id.to_string()).collect();
            format!(
                "tasks {} can be taken: task_claim takes the best one for you.",
                ids.join(", ")
            )
        }
    };
    let posted = post_system_to(c, workflow_id, wf, &who, &text, now)?;
    done.posted.push((workflow_id, posted));
    Ok(())
}

/// The agents of the instance that may take one of `free` and should be told.
fn takers(
    c: &Connection,
    workflow_id: i64,
    free: &[(i64, String, Option<String>)],
    by: &str,
) -> Result<Vec<String>> {
    let agents: Vec<(String, AgentState)> = c
        .prepare_cached(
            "SELECT a.name, a.state FROM agents a WHERE a.workflow_id = ?1
               AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.workflow_id = ?1
                               AND t.state = 'claimed' AND t.owner = a.name)
             ORDER BY a.name",
        )?
        .query_map([workflow_id], |r| Ok((r.get(0)?, r.parse(1)?)))?
        .collect::<sql::Result<_>>()?;
    let rules: Vec<Assign> = free
        .iter()
        .map(|(.., a)| Assign::parse(a.as_deref()).unwrap_or(Assign::Any))
        .collect();
    let by_role = rules.iter().any(|r| matches!(r, Assign::Role(_)));
    let mut who = Vec::new();
    for (name, state) in agents {
        if state == AgentState::Failed || name.eq_ignore_ascii_case(by) {
            continue;
        }
        let role = if by_role {
            role_of(c, workflow_id, &name)?
        } else {
            None
        };
        if rules.iter().any(|r| r.admits(&name, role.as_deref())) {
            who.push(name);
        }
    }
    Ok(who)
}
