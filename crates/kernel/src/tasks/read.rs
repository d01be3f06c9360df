//! The board's reads: an instance's tasks with what blocks them, one task with
//! its history, and task_list's filter.

use super::{Filter, HistoryLine, TaskView};
use domain::clock::fmt_ms;
use domain::error::{Error, Result};
use domain::states::TaskState;
use std::collections::HashMap;
use store::sql::{self, Connection};

/// How many tasks of an instance the board shows at most (the newest).
pub const MAX_BOARD: i64 = 2000;

const COLUMNS: &str = "id, title, body, state, owner, assign, labels, priority, result_schema,
                       result, links, approval_id, created_by, created_at, updated_at";

fn view(r: &sql::Row) -> sql::Result<TaskView> {
    let json = |t: Option<String>| t.and_then(|t| serde_json::from_str(&t).ok());
    let list = |t: String| serde_json::from_str(&t).unwrap_or_default();
    Ok(TaskView {
        id: r.get(0)?,
        title: r.get(1)?,
        body: r.get(2)?,
        state: r.parse(3)?,
        blocked_by: Vec::new(),
        deps: Vec::new(),
        owner: r.get(4)?,
        assign: r.get(5)?,
        labels: list(r.get(6)?),
        priority: r.get(7)?,
        result_schema: json(r.get(8)?),
        result: json(r.get(9)?),
        links: list(r.get(10)?),
        approval: r.get(11)?,
        created_by: r.get(12)?,
        created_at: fmt_ms(r.get(13)?),
        updated_at: fmt_ms(r.get(14)?),
        history: None,
    })
}

/// Every task of instance `workflow_id` (its newest [`MAX_BOARD`]), oldest first,
/// with its dependencies and those not done.
pub(crate) fn board_tx(c: &Connection, workflow_id: i64) -> Result<Vec<TaskView>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM (SELECT * FROM tasks WHERE workflow_id = ?1
                                ORDER BY id DESC LIMIT ?2) t ORDER BY id"
    );
    let mut tasks: Vec<TaskView> = c
        .prepare_cached(&sql)?
        .query_map(sql::params![workflow_id, MAX_BOARD], view)?
        .collect::<sql::Result<_>>()?;
    let mut deps: HashMap<i64, Vec<(i64, TaskState)>> = HashMap::new();
    let mut st = c.prepare_cached(
        "SELECT d.task_id, d.dep_id, x.state FROM task_deps d
         JOIN tasks t ON t.id = d.task_id JOIN tasks x ON x.id = d.dep_id
         WHERE t.workflow_id = ?1 ORDER BY d.dep_id",
    )?;
    let rows = st.query_map([workflow_id], |r| {
        Ok((r.get::<i64>(0)?, r.get::<i64>(1)?, r.parse::<TaskState>(2)?))
    })?;
    for row in rows {
        let (task, dep, state) = row?;
        deps.entry(task).or_default().push((dep, state));
    }
    for t in &mut tasks {
        for (dep, state) in deps.remove(&t.id).unwrap_or_default() {
            t.deps.push(dep);
            if state != TaskState::Done {
                t.blocked_by.push(dep);
            }
        }
    }
    Ok(tasks)
}

/// Task `id` of instance `workflow_id`, with its history if `history`.
pub(crate) fn one_tx(c: &Connection, workflow_id: i64, id: i64, history: bool) -> Result<TaskView> {
    let sql = format!("SELECT {COLUMNS} FROM tasks WHERE id = ?1 AND workflow_id = ?2");
    let mut t = c
        .prepare_cached(&sql)?
        .query_map([id, workflow_id], view)?
        .next()
        .transpose()?
        .ok_or_else(|| {
            Error::not_found(format!(
                "no task {id} here; task_list shows the board's tasks"
            ))
        })?;
    let mut st = c.prepare_cached(
        "SELECT d.dep_id, x.state FROM task_deps d JOIN tasks x ON x.id = d.dep_id
         WHERE d.task_id = ?1 ORDER BY d.dep_id",
    )?;
    for row in st.query_map([id], |r| Ok((r.get::<i64>(0)?, r.parse::<TaskState>(1)?)))? {
        let (dep, state) = row?;
        t.deps.push(dep);
        if state != TaskState::Done {
            t.blocked_by.push(dep);
        }
    }
    if history {
        t.history = Some(history_of(c, id)?);
    }
    Ok(t)
}

/// Task `id`'s history, oldest first.
pub(crate) fn history_of(c: &Connection, id: i64) -> Result<Vec<HistoryLine>> {
    let mut st = c.prepare_cached(
        "SELECT at, who, what, why FROM task_history WHERE task_id = ?1 ORDER BY id",
    )?;
    let lines = st
        .query_map([id], |r| {
            Ok(HistoryLine {
                at: fmt_ms(r.get(0)?),
                who: r.get(1)?,
                what: r.get(2)?,
                why: r.get(3)?,
            })
        })?
        .collect::<sql::Result<_>>()?;
    Ok(lines)
}

/// task_list's filter, checked.
pub(crate) struct Want {
    state: Option<TaskState>,
    blocked: bool,
    owner: Option<String>,
}

impl Want {
    /// Reads a filter; `mine` has become `owner` (the caller) already.
    pub(crate) fn parse(f: &Filter, _me: &str) -> std::result::Result<Self, String> {
        let (state, blocked) = match f.state.as_deref().map(str::trim) {
            None | Some("") => (None, false),
            Some(super::BLOCKED) => (None, true),
            Some(s) => (
                Some(s.parse::<TaskState>().map_err(|_| {
                    format!(
                        "state: {s:?} is not one of open, blocked, claimed, done, failed, cancelled"
                    )
                })?),
                false,
            ),
        };
        let owner = f
            .owner
            .as_deref()
            .map(|o| o.trim().trim_start_matches('@').to_owned());
        Ok(Self {
            state,
            blocked,
            owner: owner.filter(|o| !o.is_empty()),
        })
    }

    pub(crate) fn passes(&self, t: &TaskView) -> bool {
        self.state
            .is_none_or(|s| s == t.state && !(s == TaskState::Open && t.is_blocked()))
            && (!self.blocked || t.is_blocked())
            && self.owner.as_deref().is_none_or(|o| {
                t.owner
                    .as_deref()
                    .is_some_and(|x| x.eq_ignore_ascii_case(o))
            })
    }
}
