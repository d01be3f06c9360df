//! The `steps` rows of an instance: each step's state, read and changed inside
//! store jobs. A change names the state it expects, so two kernels (or a restart
//! and a late event) never move one step twice.

use domain::error::Result;
use domain::names::WorkflowRef;
use domain::states::StepState;
use domain::steps::StepDef;
use store::sql::{Connection, OptionalExtension};

/// One step's row.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub step: String,
    pub state: StepState,
    /// The indexes of its message and document events that happened.
    pub seen: Vec<usize>,
    pub message_id: Option<String>,
    pub run_id: Option<String>,
    pub reason: Option<String>,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
}

/// Every step row of an instance, in order.
pub(super) fn rows(c: &Connection, wid: i64) -> Result<Vec<Row>> {
    let mut st = c.prepare_cached(
        "SELECT step, state, seen, message_id, run_id, reason, started_at, ended_at
         FROM steps WHERE workflow_id = ?1 ORDER BY position",
    )?;
    let rows = st.query_map([wid], |r| {
        let seen: String = r.get(2)?;
        Ok(Row {
            step: r.get(0)?,
            state: r.parse(1)?,
            seen: seen.split(',').filter_map(|s| s.parse().ok()).collect(),
            message_id: r.get(3)?,
            run_id: r.get(4)?,
            reason: r.get(5)?,
            started_at: r.get(6)?,
            ended_at: r.get(7)?,
        })
    })?;
    Ok(rows.collect::<store::sql::Result<Vec<_>>>()?)
}

/// A run of the instance starts its graph afresh: every step waits, and the
/// prompts of the run before that nobody read are withdrawn (an agent must not
/// act on a stale step).
pub(super) fn reset(
    c: &Connection,
    wid: i64,
    steps: &[StepDef],
    trigger: &str,
    vars: &serde_json::Value,
) -> Result<()> {
    let prompts = step_messages(c, wid, "message_id IS NOT NULL")?;
    crate::messaging::withdraw_tx(c, wid, &prompts)?;
    c.execute("DELETE FROM steps WHERE workflow_id = ?1", [wid])?;
    for (i, s) in steps.iter().enumerate() {
        c.execute(
            "INSERT INTO steps (workflow_id, step, position, state) VALUES (?1, ?2, ?3, 'waiting')",
            (wid, &s.id, i as i64),
        )?;
    }
    let t = (!steps.is_empty()).then_some(trigger);
    let v = (!steps.is_empty()).then(|| vars.to_string());
    c.execute(
        "UPDATE workflows SET trigger_text = ?2, step_vars = ?3 WHERE id = ?1",
        (wid, t, v),
    )?;
    Ok(())
}

/// The instance as its steps' prompts need it.
pub(super) struct Instance {
    pub wref: WorkflowRef,
    /// The text its steps start from.
    pub trigger: String,
    /// The values its prompts are filled in with (params, setup outputs).
    pub vars: Option<domain::workflow_yaml::Vars>,
}

pub(super) fn instance(c: &Connection, wid: i64) -> Result<Instance> {
    let (trigger, name, tag, vars): (String, String, String, Option<String>) = c.query_row(
        "SELECT COALESCE(trigger_text, ''), name, tag, step_vars FROM workflows WHERE id = ?1",
        [wid],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    let vars = vars
        .and_then(|v| serde_json::from_str(&v).ok())
        .and_then(|v| domain::workflow_yaml::Vars::from_json(&v));
    Ok(Instance {
        wref: WorkflowRef { name, tag },
        trigger,
        vars,
    })
}

/// Moves a step from `from` to `to` at `now` (with a reason, the run that did
/// it); whether it was in `from`.
pub(super) fn change(
    c: &Connection,
    (wid, step): (i64, &str),
    from: StepState,
    to: StepState,
    reason: Option<&str>,
    now: i64,
) -> Result<bool> {
    let started = (to == StepState::Running).then_some(now);
    let ended = to.is_over().then_some(now);
    Ok(c.execute(
        "UPDATE steps SET state = ?4, reason = COALESCE(?5, reason),
           started_at = COALESCE(?6, started_at), ended_at = COALESCE(?7, ended_at)
         WHERE workflow_id = ?1 AND step = ?2 AND state = ?3",
        store::sql::params![
            wid,
            step,
            from.as_str(),
            to.as_str(),
            reason,
            started,
            ended
        ],
    )? > 0)
}

/// Records the message that carries a step's prompt.
pub(super) fn set_message(c: &Connection, wid: i64, step: &str, message_id: &str) -> Result<()> {
    c.execute(
        "UPDATE steps SET message_id = ?3 WHERE workflow_id = ?1 AND step = ?2",
        (wid, step, message_id),
    )?;
    Ok(())
}

/// What became of a running step's prompt.
pub(super) enum Acked {
    /// Not acknowledged yet, or by a run still in progress.
    No,
    /// Acknowledged by a run that succeeded, or by a member without a run: done.
    Done,
    /// Acknowledged by a run that then failed (or was lost): the prompt is
    /// consumed, so it must be posted again.
    Lost,
}

/// Whether a running step's prompt was acknowledged, and by a run that succeeded.
pub(super) fn acked(c: &Connection, wid: i64, row: &Row, agent: &str) -> Result<Acked> {
    let Some(mid) = &row.message_id else {
        return Ok(Acked::No);
    };
    let read_by: Option<Option<String>> = c
        .prepare_cached(
            "SELECT read_by FROM deliveries_done WHERE workflow_id = ?1 AND recipient = ?2 AND message_id = ?3",
        )?
        .query_row((wid, agent, mid), |r| r.get(0))
        .optional()?;
    let run = match read_by {
        None => return Ok(Acked::No),
        Some(None) => return Ok(Acked::Done),
        Some(Some(run)) => run,
    };
    let status: Option<domain::states::RunStatus> = c
        .prepare_cached("SELECT status FROM runs WHERE id = ?1")?
        .query_row([&run], |r| r.parse(0))
        .optional()?;
    Ok(match status {
        None | Some(domain::states::RunStatus::Running) => Acked::No,
        Some(domain::states::RunStatus::Succeeded) => Acked::Done,
        Some(_) => Acked::Lost,
    })
}

/// The unread prompts of failed steps are withdrawn.
pub(super) fn withdraw_failed(c: &Connection, wid: i64) -> Result<()> {
    let prompts = step_messages(c, wid, "state = 'failed' AND message_id IS NOT NULL")?;
    crate::messaging::withdraw_tx(c, wid, &prompts)
}

/// The prompts (message ids) of instance `wid`'s steps that match `which`.
fn step_messages(c: &Connection, wid: i64, which: &str) -> Result<Vec<String>> {
    Ok(c.prepare_cached(&format!(
        "SELECT message_id FROM steps WHERE workflow_id = ?1 AND {which}"
    ))?
    .query_map([wid], |r| r.get(0))?
    .collect::<store::sql::Result<_>>()?)
}

/// Replaces the message that carries a step's prompt, if it is still `old`.
pub(super) fn replace_message(
    c: &Connection,
    wid: i64,
    step: &str,
    old: &str,
    new: &str,
) -> Result<bool> {
    Ok(c.execute(
        "UPDATE steps SET message_id = ?4 WHERE workflow_id = ?1 AND step = ?2 AND message_id = ?3",
        (wid, step, old, new),
    )? > 0)
}

/// A running step is done, by `run_id` (None: acknowledged by a member).
pub(super) fn done(c: &Connection, wid: i64, row: &Row, now: i64) -> Result<bool> {
    let (from, to) = (StepState::Running, StepState::Done);
    if !change(c, (wid, &row.step), from, to, None, now)? {
        return Ok(false);
    }
    c.execute(
        "UPDATE steps SET run_id = (SELECT read_by FROM deliveries_done d
           WHERE d.workflow_id = ?1 AND d.message_id = steps.message_id LIMIT 1)
         WHERE workflow_id = ?1 AND step = ?2",
        (wid, &row.step),
    )?;
    Ok(true)
}

/// Adds event `k` to what step `step` has seen; whether it is new.
pub(super) fn see(c: &Connection, wid: i64, step: &str, k: usize) -> Result<bool> {
    let mark = format!("{k},");
    Ok(c.execute(
        "UPDATE steps SET seen = seen || ?3 WHERE workflow_id = ?1 AND step = ?2 AND state = 'waiting'
           AND instr(seen, ?4) = 0",
        (wid, step, &mark, format!(",{mark}")),
    )? > 0)
}

/// The final text of a step's run (empty when it gave none).
pub(super) fn output(c: &Connection, run_id: Option<&str>) -> Result<String> {
    let Some(run) = run_id else {
        return Ok(String::new());
    };
    let text: Option<Option<String>> = c
        .prepare_cached("SELECT final_text FROM runs WHERE id = ?1")?
        .query_row([run], |r| r.get(0))
        .optional()?;
    Ok(text.flatten().unwrap_or_default())
}
