//! The board's writes, each one store job: tasks added, claimed, moved; and what
//! a caller gave checked before the job runs.

use super::rules::{self, Assign, MAX_CLAIMS, Standing};
use super::wake::{history_tx, wake_tx};
use super::{Done, NewTask, Update};
use crate::Scope;
use domain::error::{Error, Result};
use domain::states::TaskState;
use store::sql::{self, Connection, OptionalExtension};

pub(super) use super::read::{Want, board_tx, one_tx};

/// A task checked, ready to write.
#[derive(Debug, Clone)]
pub(super) struct Row {
    title: String,
    body: Option<String>,
    assign: Option<String>,
    labels: String,
    priority: i64,
    schema: Option<String>,
}

/// A plan checked: its rows and their dependencies resolved.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    rows: Vec<Row>,
    deps: rules::Resolved,
}

impl Checked {
    /// Checks every task of `plan` (named `plan[i].field` when there are several).
    pub(crate) fn new(plan: Vec<NewTask>) -> std::result::Result<Self, String> {
        if plan.is_empty() {
            return Err("give a title (one task) or a plan (a list of tasks)".into());
        }
        if plan.len() > rules::MAX_PLAN {
            return Err(format!("plan: at most {} tasks", rules::MAX_PLAN));
        }
        let several = plan.len() > 1;
        let at = |i: usize, f: &str| {
            if several {
                format!("plan[{i}].{f}")
            } else {
                f.to_owned()
            }
        };
        let mut rows = Vec::new();
        for (i, t) in plan.iter().enumerate() {
            rows.push(check_one(t, &|f| at(i, f))?);
            if t.deps.len() > rules::MAX_DEPS {
                return Err(format!("{}: at most {}", at(i, "deps"), rules::MAX_DEPS));
            }
        }
        let names: Vec<Option<String>> = plan.iter().map(|t| t.name.clone()).collect();
        let deps: Vec<_> = plan.into_iter().map(|t| t.deps).collect();
        let deps = rules::resolve(&names, &deps)?;
        Ok(Self { rows, deps })
    }
}

fn check_one(t: &NewTask, at: &dyn Fn(&str) -> String) -> std::result::Result<Row, String> {
    let title = t.title.trim();
    if title.is_empty() {
        return Err(format!("{}: give the task a title", at("title")));
    }
    rules::within(&at("title"), title, rules::MAX_TITLE_CHARS)?;
    if let Some(b) = &t.body {
        rules::within(&at("body"), b, rules::MAX_BODY_CHARS)?;
    }
    let assign = Assign::parse(t.assign.as_deref()).map_err(|e| format!("{}{e}", prefix(at)))?;
    rules::check_list(
        &at("labels"),
        &t.labels,
        (rules::MAX_LABELS, rules::MAX_LABEL_CHARS),
    )?;
    if !(-1000..=1000).contains(&t.priority) {
        return Err(format!(
            "{}: from -1000 to 1000 (higher first)",
            at("priority")
        ));
    }
    let schema = match &t.result_schema {
        None => None,
        Some(s) => {
            rules::check_schema(s).map_err(|e| format!("{}{e}", prefix(at)))?;
            Some(rules::json_text(&at("result_schema"), s)?)
        }
    };
    Ok(Row {
        title: title.to_owned(),
        body: t.body.clone().filter(|b| !b.trim().is_empty()),
        assign: assign.stored(),
        labels: serde_json::to_string(&t.labels).unwrap_or_else(|_| "[]".into()),
        priority: t.priority,
        schema,
    })
}

/// `plan[i].` before a message that names its own field, for a plan.
fn prefix(at: &dyn Fn(&str) -> String) -> String {
    let x = at("x");
    x[..x.len() - 1].to_owned()
}

/// Writes a checked plan in the caller's instance; the new ids in order.
pub(super) fn add_tx(c: &Connection, s: &Scope, p: &Checked, now: i64) -> Result<(Vec<i64>, Done)> {
    for (i, ids) in p.deps.existing.iter().enumerate() {
        for id in ids {
            let here: Option<i64> = c
                .query_row("SELECT workflow_id FROM tasks WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
                .optional()?;
            if here != Some(s.workflow_id) {
                let f = if p.rows.len() > 1 {
                    format!("plan[{i}].deps")
                } else {
                    "deps".into()
                };
                return Err(Error::invalid(format!(
                    "{f}: task {id} is not on the board of {}; task_list shows its tasks",
                    s.workflow
                )));
            }
        }
    }
    let live: i64 = c.query_row(
        "SELECT count(*) FROM tasks WHERE workflow_id = ?1
           AND state NOT IN ('done', 'failed', 'cancelled')",
        [s.workflow_id],
        |r| r.get(0),
    )?;
    if live + p.rows.len() as i64 > rules::MAX_LIVE_TASKS {
        return Err(Error::invalid(format!(
            "task_add: an instance holds at most {} tasks not done, failed or cancelled ({} holds \
             {live}); finish or cancel some first",
            rules::MAX_LIVE_TASKS,
            s.workflow
        )));
    }
    let mut ids = Vec::new();
    let mut done = Done::default();
    for r in &p.rows {
        let id: i64 = c.query_row(
            "INSERT INTO tasks (workflow_id, title, body, assign, labels, priority, result_schema,
                                created_by, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9) RETURNING id",
            sql::params![
                s.workflow_id,
                r.title,
                r.body,
                r.assign,
                r.labels,
                r.priority,
                r.schema,
                s.me,
                now
            ],
            |row| row.get(0),
        )?;
        history_tx(c, id, (&s.me, "added", None), now)?;
        ids.push(id);
        done.changed
            .push((s.workflow_id, id, TaskState::Open, true));
    }
    for (i, id) in ids.iter().enumerate() {
        let local = p.deps.local[i].iter().map(|&j| ids[j]);
        for dep in p.deps.existing[i].iter().copied().chain(local) {
            c.execute(
                "INSERT INTO task_deps (task_id, dep_id) VALUES (?1, ?2)",
                [id, &dep],
            )?;
        }
    }
    wake_tx(c, (s.workflow_id, &s.workflow), &ids, "", now, &mut done)?;
    Ok((ids, done))
}

/// The SQL that an open task `t` has no dependency that is not done.
const UNBLOCKED: &str = "NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks x ON x.id = d.dep_id
                          WHERE d.task_id = t.id AND x.state <> 'done')";

/// Claims task `id` (or the best one the caller may take) for the caller.
pub(super) fn claim_tx(
    c: &Connection,
    s: &Scope,
    id: Option<i64>,
    now: i64,
) -> Result<(Option<i64>, Done)> {
    if !s.lead {
        let held: Vec<i64> = c
            .prepare_cached(
                "SELECT id FROM tasks WHERE workflow_id = ?1 AND state = 'claimed' AND owner = ?2
                 ORDER BY id",
            )?
            .query_map(sql::params![s.workflow_id, s.me], |r| r.get(0))?
            .collect::<sql::Result<_>>()?;
        if let Some(id) = id.filter(|i| held.contains(i)) {
            return Err(Error::conflict(format!("you hold task {id} already")));
        }
        if held.len() as i64 >= MAX_CLAIMS {
            return Err(Error::conflict(format!(
                "you hold task {}: set it done or failed (or open, to give it back) with task_update \
                 before you claim another",
                held[0]
            )));
        }
    }
    let role = super::wake::role_of(c, s.workflow_id, &s.me)?;
    let pick = match id {
        Some(id) => {
            claimable_by(c, s, id, role.as_deref())?;
            Some(id)
        }
        None => best_tx(c, s, role.as_deref())?,
    };
    let Some(id) = pick else {
        return Ok((None, Done::default()));
    };
    let n = c.execute(
        "UPDATE tasks SET state = 'claimed', owner = ?3, run_id = ?4, updated_at = ?5
         WHERE id = ?1 AND workflow_id = ?2 AND state = 'open' AND approval_id IS NULL
           AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks x ON x.id = d.dep_id
                           WHERE d.task_id = ?1 AND x.state <> 'done')",
        sql::params![id, s.workflow_id, s.me, s.run_id, now],
    )?;
    if n == 0 {
        return Err(why_not(c, s.workflow_id, id)?);
    }
    let why = s.run_id.as_ref().map(|r| format!("run {r}"));
    history_tx(c, id, (&s.me, "claimed", why.as_deref()), now)?;
    let mut done = Done::default();
    done.changed
        .push((s.workflow_id, id, TaskState::Claimed, true));
    Ok((Some(id), done))
}

/// Refuses a claim of task `id` the caller may not take (its assign rule).
fn claimable_by(c: &Connection, s: &Scope, id: i64, role: Option<&str>) -> Result<()> {
    let assign: Option<Option<String>> = c
        .query_row(
            "SELECT assign FROM tasks WHERE id = ?1 AND workflow_id = ?2",
            [id, s.workflow_id],
            |r| r.get(0),
        )
        .optional()?;
    let Some(assign) = assign else {
        return Err(not_found(s, id));
    };
    let rule = Assign::parse(assign.as_deref()).unwrap_or(Assign::Any);
    if !s.lead && !rule.admits(&s.me, role) {
        return Err(Error::forbidden(format!(
            "task {id} is for {}; task_claim without an id takes one that is for you",
            assign.unwrap_or_default()
        )));
    }
    Ok(())
}

/// The best open, unblocked task for the caller: assigned by name, then by role,
/// then to anyone; then the highest priority; then the oldest.
fn best_tx(c: &Connection, s: &Scope, role: Option<&str>) -> Result<Option<i64>> {
    best_for(c, s.workflow_id, &s.me, role)
}

/// [`best_tx`] for member `me` of instance `workflow_id`.
pub(super) fn best_for(
    c: &Connection,
    workflow_id: i64,
    me: &str,
    role: Option<&str>,
) -> Result<Option<i64>> {
    let role = role.map(|r| format!("role:{r}"));
    let sql = format!(
        "SELECT t.id FROM tasks t
         WHERE t.workflow_id = ?1 AND t.state = 'open' AND t.approval_id IS NULL
           AND (t.assign IS NULL OR t.assign = ?2 OR t.assign = ?3) AND {UNBLOCKED}
         ORDER BY CASE WHEN t.assign = ?2 THEN 0 WHEN t.assign IS NULL THEN 2 ELSE 1 END,
                  t.priority DESC, t.id
         LIMIT 1"
    );
    Ok(
        c.query_row(&sql, sql::params![workflow_id, me, role], |r| r.get(0))
            .optional()?,
    )
}

/// Why task `id` could not be claimed: its state, its owner, what blocks it.
fn why_not(c: &Connection, workflow_id: i64, id: i64) -> Result<Error> {
    let t = one_tx(c, workflow_id, id, false)?;
    Ok(match (t.state, &t.owner) {
        (TaskState::Claimed, Some(o)) => Error::conflict(format!(
            "task {id} is claimed by {o}; task_claim without an id takes another"
        )),
        (TaskState::Open, _) if !t.blocked_by.is_empty() => Error::conflict(format!(
            "task {id} is blocked by {:?} (not done yet); task_claim without an id takes one that is not",
            t.blocked_by
        )),
        (TaskState::Open, _) => Error::conflict(format!(
            "task {id} waits for approval {}; claim it once that is decided",
            t.approval.unwrap_or_default()
        )),
        (state, _) => Error::conflict(format!("task {id} is {state}: nothing to claim")),
    })
}

pub(super) fn not_found(s: &Scope, id: i64) -> Error {
    Error::not_found(format!(
        "no task {id} on the board of {}; task_list shows its tasks",
        s.workflow
    ))
}

/// A task_update checked before its job: the state it asks for, its texts.
#[derive(Debug, Clone)]
pub(crate) struct Asked {
    pub(crate) id: i64,
    pub(crate) to: Option<TaskState>,
    pub(crate) result: Option<serde_json::Value>,
    pub(crate) body: Option<String>,
    pub(crate) note: Option<String>,
    pub(crate) links: Vec<String>,
}

impl Asked {
    pub(crate) fn new(_s: &Scope, u: Update) -> std::result::Result<Self, String> {
        let to = match u.state.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            None => None,
            Some(t) => Some(t.parse::<TaskState>().map_err(|_| {
                format!("state: {t:?} is not one of open, done, failed, cancelled")
            })?),
        };
        if let Some(b) = &u.body {
            rules::within("body", b, rules::MAX_BODY_CHARS)?;
        }
        let note = u.note.filter(|n| !n.trim().is_empty());
        if let Some(n) = &note {
            rules::within("note", n, rules::MAX_NOTE_CHARS)?;
        }
        rules::check_list("links", &u.links, (rules::MAX_LINKS, rules::MAX_LINK_CHARS))?;
        if to == Some(TaskState::Failed) && note.is_none() {
            return Err("note: say why the task failed".into());
        }
        if u.result.is_some() && to != Some(TaskState::Done) {
            return Err("result: give it with state done".into());
        }
        if let Some(r) = &u.result {
            rules::json_text("result", r)?;
        }
        if to.is_none() && u.body.is_none() && note.is_none() && u.links.is_empty() {
            return Err("give a state, a note, a body or links to change".into());
        }
        Ok(Self {
            id: u.id,
            to,
            result: u.result,
            body: u.body,
            note,
            links: u.links,
        })
    }
}

/// The task as an update finds it: state, owner, creator, schema, links, the
/// approval a move of it waits for.
pub(super) struct Current {
    pub(super) state: TaskState,
    pub(super) approval: Option<i64>,
    pub(super) owner: Option<String>,
    pub(super) created_by: String,
    pub(super) schema: Option<String>,
    pub(super) links: Vec<String>,
}

pub(super) fn current_tx(c: &Connection, s: &Scope, id: i64) -> Result<Current> {
    c.query_row(
        "SELECT state, owner, created_by, result_schema, links, approval_id FROM tasks
         WHERE id = ?1 AND workflow_id = ?2",
        [id, s.workflow_id],
        |r| {
            Ok(Current {
                state: r.parse(0)?,
                owner: r.get(1)?,
                created_by: r.get(2)?,
                schema: r.get(3)?,
                links: serde_json::from_str(&r.get::<String>(4)?).unwrap_or_default(),
                approval: r.get(5)?,
            })
        },
    )
    .optional()?
    .ok_or_else(|| not_found(s, id))
}

/// Checks a move or an edit against the task as it is now: Err says why not.
pub(super) fn allowed(s: &Scope, a: &Asked, cur: &Current) -> Result<()> {
    let by = rules::standing(&s.me, s.lead, cur.owner.as_deref());
    if let Some(to) = a.to {
        rules::transition(a.id, cur.state, to, by).map_err(Error::conflict)?;
        if let Some(n) = cur.approval.filter(|_| !s.lead) {
            return Err(Error::conflict(format!(
                "task {} waits for approval {n} already; it moves once that is decided",
                a.id
            )));
        }
        if to == TaskState::Done
            && let Some(schema) = &cur.schema
        {
            let Some(result) = &a.result else {
                return Err(Error::invalid(format!(
                    "result: task {} asks for a result (its result_schema); give it with state done",
                    a.id
                )));
            };
            let schema: serde_json::Value = serde_json::from_str(schema).unwrap_or_default();
            rules::check_result(&schema, result).map_err(Error::invalid)?;
        }
    } else if cur.state.is_final() && (a.body.is_some() || !a.links.is_empty()) {
        return Err(Error::conflict(format!(
            "task {} is {}: only a note may be added now",
            a.id, cur.state
        )));
    } else if by == Standing::Other && !cur.created_by.eq_ignore_ascii_case(&s.me) {
        return Err(Error::forbidden(format!(
            "task {} is not yours: its owner, its creator or the lead changes it",
            a.id
        )));
    }
    Ok(())
}

/// Applies a checked update (contracts have allowed it) in one job.
pub(super) fn update_tx(c: &Connection, s: &Scope, a: &Asked, now: i64) -> Result<Done> {
    let cur = current_tx(c, s, a.id)?;
    allowed(s, a, &cur)?;
    let mut done = Done::default();
    // A claim made without a run is held by the owner's run that changes it.
    if let Some(run) = &s.run_id
        && cur.state == TaskState::Claimed
        && rules::standing(&s.me, s.lead, cur.owner.as_deref()) == Standing::Owner
    {
        c.execute(
            "UPDATE tasks SET run_id = ?2 WHERE id = ?1",
            sql::params![a.id, run],
        )?;
    }
    if a.to.is_none() {
        let lines: i64 = c.query_row(
            "SELECT count(*) FROM task_history WHERE task_id = ?1",
            [a.id],
            |r| r.get(0),
        )?;
        if lines >= rules::MAX_HISTORY {
            return Err(Error::invalid(format!(
                "note: task {} keeps at most {} history lines; put more in its body",
                a.id,
                rules::MAX_HISTORY
            )));
        }
    }
    if a.body.is_some() || !a.links.is_empty() {
        let mut links = cur.links.clone();
        for l in &a.links {
            if !links.contains(l) {
                links.push(l.clone());
            }
        }
        if links.len() > rules::MAX_LINKS {
            return Err(Error::invalid(format!(
                "links: a task keeps at most {}",
                rules::MAX_LINKS
            )));
        }
        c.execute(
            "UPDATE tasks SET body = COALESCE(?2, body), links = ?3, updated_at = ?4 WHERE id = ?1",
            sql::params![
                a.id,
                a.body,
                serde_json::to_string(&links).unwrap_or_default(),
                now
            ],
        )?;
    }
    match a.to {
        Some(to) => move_tx(c, s, a, (cur.state, to), now, &mut done)?,
        None => {
            history_tx(c, a.id, (&s.me, "noted", a.note.as_deref()), now)?;
            done.changed.push((s.workflow_id, a.id, cur.state, false));
        }
    }
    Ok(done)
}

/// Moves task `a.id` from `from` to `to` (checked), with its history, and wakes
/// who may take what it frees.
pub(super) fn move_tx(
    c: &Connection,
    s: &Scope,
    a: &Asked,
    (from, to): (TaskState, TaskState),
    now: i64,
    done: &mut Done,
) -> Result<()> {
    let why = format!("{} moved the task to {to}", s.me);
    super::approval::dropped_tx(c, (s.workflow_id, &s.workflow), a.id, &why, now, done)?;
    let result = a.result.as_ref().map(|r| r.to_string());
    let keep_owner = matches!(to, TaskState::Done | TaskState::Failed);
    let n = c.execute(
        "UPDATE tasks SET state = ?3, result = COALESCE(?4, result),
                owner = CASE WHEN ?5 = 1 THEN COALESCE(owner, ?6) ELSE NULL END,
                run_id = CASE WHEN ?5 = 1 THEN run_id ELSE NULL END,
                approval_id = NULL, held = NULL, updated_at = ?7
         WHERE id = ?1 AND state = ?2",
        sql::params![
            a.id,
            from.as_str(),
            to.as_str(),
            result,
            keep_owner as i64,
            s.me,
            now
        ],
    )?;
    if n == 0 {
        return Err(Error::conflict(format!(
            "task {} changed meanwhile; read it again with task_list",
            a.id
        )));
    }
    let what = if to == TaskState::Open {
        "released"
    } else {
        to.as_str()
    };
    history_tx(c, a.id, (&s.me, what, a.note.as_deref()), now)?;
    done.changed.push((s.workflow_id, a.id, to, true));
    // Who gives a task back is not told of it; who finishes one may take the next.
    let (freed, by) = match to {
        TaskState::Open => (vec![a.id], s.me.as_str()),
        TaskState::Done => (super::wake::unblocked_by_tx(c, a.id)?, ""),
        _ => (Vec::new(), ""),
    };
    wake_tx(c, (s.workflow_id, &s.workflow), &freed, by, now, done)
}
