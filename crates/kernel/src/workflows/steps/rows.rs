//! The `steps` rows of an instance: each step's state, read and changed inside
//! store jobs. A change names the state it expects, so two kernels (or a restart
//! and a late event) never move one step twice.

use domain::clock::now_ms;
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

/// A run of the instance starts its graph afresh: every step waits.
pub(super) fn reset(c: &Connection, wid: i64, steps: &[StepDef], trigger: &str) -> Result<()> {
    c.execute("DELETE FROM steps WHERE workflow_id = ?1", [wid])?;
    for (i, s) in steps.iter().enumerate() {
        c.execute(
            "INSERT INTO steps (workflow_id, step, position, agent, state) VALUES (?1, ?2, ?3, ?4, 'waiting')",
            (wid, &s.id, i as i64, &s.agent),
        )?;
    }
    let t = (!steps.is_empty()).then_some(trigger);
    c.execute(
        "UPDATE workflows SET trigger_text = ?2 WHERE id = ?1",
        (wid, t),
    )?;
    Ok(())
}

/// The text the instance's steps start from, and the instance.
pub(super) fn instance(c: &Connection, wid: i64) -> Result<(String, WorkflowRef)> {
    Ok(c.query_row(
        "SELECT COALESCE(trigger_text, ''), name, tag FROM workflows WHERE id = ?1",
        [wid],
        |r| {
            Ok((
                r.get(0)?,
                WorkflowRef {
                    name: r.get(1)?,
                    tag: r.get(2)?,
                },
            ))
        },
    )?)
}

/// Moves a step from `from` to `to` (with a reason, the run that did it);
/// whether it was in `from`.
pub(super) fn change(
    c: &Connection,
    wid: i64,
    step: &str,
    from: StepState,
    to: StepState,
    reason: Option<&str>,
) -> Result<bool> {
    let now = now_ms();
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

/// A running step whose prompt a run read and acked (that run succeeded): done.
pub(super) fn finish_if_acked(c: &Connection, wid: i64, row: &Row, agent: &str) -> Result<bool> {
    let Some(mid) = &row.message_id else {
        return Ok(false);
    };
    let run: Option<Option<String>> = c
        .prepare_cached(
            "SELECT read_by FROM deliveries_done WHERE workflow_id = ?1 AND recipient = ?2 AND message_id = ?3",
        )?
        .query_row((wid, agent, mid), |r| r.get(0))
        .optional()?;
    let Some(run) = run else {
        return Ok(false);
    };
    // Acked by a run still in progress (it acked by hand): done once the run is
    // over and its final text is there.
    if let Some(r) = &run {
        let running: bool = c
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM runs WHERE id = ?1 AND status = 'running')",
            )?
            .query_row([r], |x| x.get(0))?;
        if running {
            return Ok(false);
        }
    }
    if !change(c, wid, &row.step, StepState::Running, StepState::Done, None)? {
        return Ok(false);
    }
    c.execute(
        "UPDATE steps SET run_id = ?3 WHERE workflow_id = ?1 AND step = ?2",
        (wid, &row.step, run),
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
