//! Step workflows in motion: the graph of an instance's steps (its `step`
//! contracts, in force like any other) and their states (`steps` rows, `rows.rs`).
//!
//! A step starts by the kernel posting its prompt to its agent (from `system`,
//! the agent's name leading, in the same transaction that marks it running); the
//! scheduler wakes the agent as for any message. The step is done when the run
//! that read that message succeeded (its delivery acked), and failed when its
//! agent failed for good (retries spent). Everything that moves a step is read
//! from the store again, so a restart (or a missed event) only moves it later,
//! never twice: a step killed mid-run is read again by the agent's next run.
//!
//! What moves them, each from the workflows room's watch: a run's end
//! ([`Steps::run_ended`]), an agent failing ([`Steps::agent_failed`]), a message
//! or a document ([`Steps::posted`], [`Steps::document_written`]), the start of
//! the instance and the kernel's own start ([`Steps::recover`]).

mod results;
mod rows;
pub(super) mod start;
#[cfg(test)]
mod tests;
pub mod view;

use crate::governance::contracts::Contracts;
use crate::messaging::{self, Messaging};
use crate::timing::Clock;
use domain::contracts::{Then, When};
use domain::error::Result;
use domain::states::{StepState, TaskState};
use domain::steps::{self, Move, On, StepDef};
use results::{done_with_result, post_prompt};
use std::collections::BTreeMap;
use std::sync::Arc;
use store::Store;

/// The most messages read again, per instance, for its steps at a start.
const RESCAN: i64 = 10_000;

/// The steps of every step workflow of the store.
pub struct Steps {
    store: Store,
    /// The kernel's clock: when a step moved.
    clock: Clock,
    contracts: Arc<Contracts>,
    messaging: Arc<Messaging>,
    /// One move at a time on this kernel (the writes check states anyway).
    moving: tokio::sync::Mutex<()>,
}

/// Where an instance's graph stands, for its settling.
pub struct Outcome {
    /// The steps not over: those that wait for an event (and what for) and
    /// those whose run has not ended well yet.
    pub waiting: Vec<String>,
    /// The failed steps no step handles (`X.failed`), in words.
    pub failed: Vec<String>,
}

impl Steps {
    pub fn new(
        (store, clock): (Store, Clock),
        contracts: Arc<Contracts>,
        messaging: Arc<Messaging>,
    ) -> Self {
        Self {
            store,
            clock,
            contracts,
            messaging,
            moving: tokio::sync::Mutex::default(),
        }
    }

    /// The instance's steps, from its contracts in force (memory, not the store).
    pub fn graph(&self, wid: i64) -> Vec<StepDef> {
        self.contracts
            .all()
            .iter()
            .filter(|s| s.owner == Some(wid))
            .filter_map(|s| match (&s.contract.when, &s.contract.then) {
                (
                    When::Step { on },
                    Then::Run {
                        step,
                        agent,
                        prompt,
                        result,
                    },
                ) => Some(StepDef {
                    id: step.clone(),
                    agent: agent.clone(),
                    on: on.clone(),
                    prompt: prompt.clone(),
                    result: result.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    /// Starts what can start and skips what never will, until nothing moves.
    pub async fn advance(&self, wid: i64) -> Result<()> {
        let defs = self.graph(wid);
        if defs.is_empty() {
            return Ok(());
        }
        let _one = self.moving.lock().await;
        let (rows, live) = self
            .store
            .read(move |c| {
                let live = super::facts::workflow_row(c, wid)?.state.is_live_run();
                Ok((rows::rows(c, wid)?, live))
            })
            .await?;
        if !live {
            return Ok(());
        }
        let (states, seen) = aligned(&defs, &rows);
        for m in steps::moves(&defs, &states, &seen) {
            match m {
                Move::Start(i) => self.start(wid, &defs, i).await?,
                Move::Skip(i, why) => self.skip(wid, &defs[i], &why).await?,
            }
        }
        Ok(())
    }

    /// Posts step `i`'s prompt to its agent and marks it running, in one
    /// transaction (only if it still waits). A prompt that cannot be filled in
    /// fails the step, with why.
    async fn start(&self, wid: i64, defs: &[StepDef], i: usize) -> Result<()> {
        let (defs, now) = (defs.to_vec(), self.clock.now_ms());
        let posted = self
            .store
            .write(move |c| {
                let inst = rows::instance(c, wid)?;
                let def = &defs[i];
                if !rows::change(
                    c,
                    (wid, &def.id),
                    StepState::Waiting,
                    StepState::Running,
                    None,
                    now,
                )? {
                    return Ok(None);
                }
                // Filled in, it is at most MAX_PROMPT: within what a post takes.
                let text = match prompt_of(c, wid, &defs, i, &inst) {
                    Ok(p) => format!("(step {}) {p}", def.id),
                    Err(e) => {
                        let why = format!("its prompt could not be filled in: {e}");
                        rows::change(
                            c,
                            (wid, &def.id),
                            StepState::Running,
                            StepState::Failed,
                            Some(&why),
                            now,
                        )?;
                        let note = format!("Step {} failed: {why}.", def.id);
                        return Ok(Some(messaging::post_system(c, wid, &inst.wref, note, now)?));
                    }
                };
                let posted = post_prompt(c, (wid, &inst.wref), def, &text, now)?;
                rows::set_message(c, wid, &def.id, &posted.result.id)?;
                Ok(Some(posted))
            })
            .await?;
        if let Some(p) = posted {
            self.messaging.announce(wid, &p);
        }
        Ok(())
    }

    async fn skip(&self, wid: i64, def: &StepDef, why: &str) -> Result<()> {
        let (id, why, now) = (def.id.clone(), why.to_owned(), self.clock.now_ms());
        let posted = self
            .store
            .write(move |c| {
                if !rows::change(
                    c,
                    (wid, &id),
                    StepState::Waiting,
                    StepState::Skipped,
                    Some(&why),
                    now,
                )? {
                    return Ok(None);
                }
                let wref = rows::instance(c, wid)?.wref;
                let text = format!("Step {id} will not run: {why}.");
                Ok(Some(messaging::post_system(c, wid, &wref, text, now)?))
            })
            .await?;
        if let Some(p) = posted {
            self.messaging.announce(wid, &p);
        }
        Ok(())
    }

    /// A run of `agent` ended: its running steps whose prompt it acked are done.
    pub async fn run_ended(&self, wid: i64, agent: &str) -> Result<()> {
        if !self.graph(wid).iter().any(|d| d.agent == agent) {
            return Ok(());
        }
        self.finish_acked(wid, Some(agent.to_owned())).await?;
        self.advance(wid).await
    }

    /// Running steps (of `agent`, or of every agent) whose prompt was acked: done
    /// when the run that acked it succeeded; posted again when that run failed
    /// (the prompt was consumed; the agent's retries, or its failing for good,
    /// decide the rest).
    async fn finish_acked(&self, wid: i64, agent: Option<String>) -> Result<()> {
        let (defs, now) = (self.graph(wid), self.clock.now_ms());
        let posted = self
            .store
            .write(move |c| {
                let mut posted = Vec::new();
                // A stopped or failed instance's steps stay as they are (no prompt
                // is posted again into it).
                if !super::facts::workflow_row(c, wid)?.state.is_live_run() {
                    return Ok(posted);
                }
                for row in rows::rows(c, wid)? {
                    let Some(i) = defs.iter().position(|d| d.id == row.step) else {
                        continue;
                    };
                    let def = &defs[i];
                    if row.state != StepState::Running
                        || agent.as_ref().is_some_and(|a| *a != def.agent)
                    {
                        continue;
                    }
                    match rows::acked(c, wid, &row, &def.agent)? {
                        rows::Acked::No => {}
                        rows::Acked::Done => done_with_result(c, wid, (&defs, i), &row, now)?,
                        rows::Acked::Lost => posted.push(repost(c, (wid, &defs, i), &row, now)?),
                    }
                }
                Ok(posted)
            })
            .await?;
        for p in posted.iter().flatten() {
            self.messaging.announce(wid, p);
        }
        Ok(())
    }

    /// `agent` failed for good: its running steps failed. Whether the instance
    /// has steps (else its run fails as a whole).
    pub async fn agent_failed(&self, wid: i64, agent: &str, reason: &str) -> Result<bool> {
        let defs = self.graph(wid);
        if defs.is_empty() {
            return Ok(false);
        }
        let ids: Vec<String> = defs
            .iter()
            .filter(|d| d.agent == agent)
            .map(|d| d.id.clone())
            .collect();
        let (reason, now) = (reason.to_owned(), self.clock.now_ms());
        self.store
            .write(move |c| {
                for id in &ids {
                    rows::change(
                        c,
                        (wid, id),
                        StepState::Running,
                        StepState::Failed,
                        Some(&reason),
                        now,
                    )?;
                }
                // Its prompts are withdrawn: a new message wakes the agent again, and
                // it must not act on a step that is over.
                rows::withdraw_failed(c, wid)?;
                Ok(())
            })
            .await?;
        self.advance(wid).await?;
        Ok(true)
    }

    /// A message was posted: the waiting steps it meets see it.
    pub async fn posted(&self, wid: i64, message_id: &str) -> Result<()> {
        let defs = self.graph(wid);
        if !defs
            .iter()
            .any(|d| d.on.iter().any(|e| matches!(e, On::Message { .. })))
        {
            return Ok(());
        }
        let id = message_id.to_owned();
        let seen = self
            .store
            .write(move |c| {
                use store::sql::OptionalExtension;
                let m: Option<(String, String)> = c
                    .query_row(
                        "SELECT sender, content FROM messages WHERE workflow_id = ?1 AND id = ?2",
                        (wid, &id),
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()?;
                let Some((from, text)) = m else {
                    return Ok(false);
                };
                see_all(c, wid, &defs, |e| {
                    from != domain::names::SYSTEM && e.message_matches(&from, &text)
                })
            })
            .await?;
        if seen {
            self.advance(wid).await
        } else {
            Ok(())
        }
    }

    /// A document was written through the kernel: the waiting steps it meets see it.
    pub async fn document_written(&self, wid: i64, file: &str) -> Result<()> {
        let defs = self.graph(wid);
        if !defs
            .iter()
            .any(|d| d.on.iter().any(|e| matches!(e, On::Document(_))))
        {
            return Ok(());
        }
        let file = file.to_owned();
        let seen = self
            .store
            .write(move |c| see_all(c, wid, &defs, |e| e.document_matches(&file)))
            .await?;
        if seen {
            self.advance(wid).await
        } else {
            Ok(())
        }
    }

    /// A task of the board changed: the waiting steps its title and new state meet
    /// see it.
    pub async fn task_changed(&self, wid: i64, id: i64, state: TaskState) -> Result<()> {
        let defs = self.graph(wid);
        if !defs
            .iter()
            .any(|d| d.on.iter().any(|e| matches!(e, On::Task { .. })))
        {
            return Ok(());
        }
        let seen = self
            .store
            .write(move |c| {
                use store::sql::OptionalExtension;
                let title: Option<String> = c
                    .query_row(
                        "SELECT title FROM tasks WHERE workflow_id = ?1 AND id = ?2",
                        (wid, id),
                        |r| r.get(0),
                    )
                    .optional()?;
                let Some(title) = title else {
                    return Ok(false);
                };
                see_all(c, wid, &defs, |e| e.task_matches(&title, state))
            })
            .await?;
        if seen {
            self.advance(wid).await
        } else {
            Ok(())
        }
    }

    /// At the kernel's start, or when events were missed: every live step
    /// instance's acked prompts are read again, then the graphs move on.
    pub async fn recover(&self) -> Result<()> {
        let ids: Vec<i64> = self
            .store
            .read(|c| {
                let mut st = c.prepare(
                    "SELECT DISTINCT s.workflow_id FROM steps s JOIN workflows w ON w.id = s.workflow_id
                     WHERE w.state IN ('running', 'completed', 'scheduled', 'blocked')
                       AND s.state IN ('waiting', 'running')",
                )?;
                let ids = st
                    .query_map((), |r| r.get(0))?
                    .collect::<store::sql::Result<Vec<i64>>>()?;
                Ok(ids)
            })
            .await?;
        for wid in ids {
            self.finish_acked(wid, None).await?;
            self.see_missed_messages(wid).await?;
            self.advance(wid).await?;
        }
        Ok(())
    }

    /// The messages posted since the instance started, for the waiting steps
    /// that wait for one (an event lost to a crash is a message still in the
    /// store; the newest [`RESCAN`] are read).
    async fn see_missed_messages(&self, wid: i64) -> Result<()> {
        let defs = self.graph(wid);
        if !defs
            .iter()
            .any(|d| d.on.iter().any(|e| matches!(e, On::Message { .. })))
        {
            return Ok(());
        }
        self.store
            .write(move |c| {
                let mut st = c.prepare(
                    "SELECT m.sender, m.content FROM messages m JOIN workflows w ON w.id = m.workflow_id
                     WHERE m.workflow_id = ?1 AND m.created_at >= COALESCE(w.started_at, 0) AND m.sender <> ?2
                     ORDER BY m.id DESC LIMIT ?3",
                )?;
                let msgs = st
                    .query_map((wid, domain::names::SYSTEM, RESCAN), |r| {
                        Ok((r.get::<String>(0)?, r.get::<String>(1)?))
                    })?
                    .collect::<store::sql::Result<Vec<_>>>()?;
                for (from, text) in msgs {
                    see_all(c, wid, &defs, |e| e.message_matches(&from, &text))?;
                }
                Ok(())
            })
            .await
    }

    /// Where the instance's graph stands; None when it has no steps.
    pub async fn outcome(&self, wid: i64) -> Result<Option<Outcome>> {
        let defs = self.graph(wid);
        if defs.is_empty() {
            return Ok(None);
        }
        let rows = self.store.read(move |c| rows::rows(c, wid)).await?;
        let (states, _) = aligned(&defs, &rows);
        let failed = steps::unhandled_failures(&defs, &states)
            .into_iter()
            .map(|i| {
                let why = rows
                    .iter()
                    .find(|r| r.step == defs[i].id)
                    .and_then(|r| r.reason.clone())
                    .unwrap_or_default();
                format!("step {} ({}) failed: {why}", defs[i].id, defs[i].agent)
            })
            .collect();
        let waiting = defs
            .iter()
            .zip(&states)
            .filter_map(|(d, s)| match s {
                StepState::Waiting => Some(format!("{} ({})", d.id, steps::on_words(&d.on))),
                StepState::Running => Some(format!("{} (its run, by {})", d.id, d.agent)),
                _ => None,
            })
            .collect();
        Ok(Some(Outcome { waiting, failed }))
    }
}

/// The states and seen events of `defs`, from their rows (a step without a row waits).
fn aligned(defs: &[StepDef], rows: &[rows::Row]) -> (Vec<StepState>, Vec<Vec<usize>>) {
    defs.iter()
        .map(|d| match rows.iter().find(|r| r.step == d.id) {
            Some(r) => (r.state, r.seen.clone()),
            None => (StepState::Waiting, Vec::new()),
        })
        .unzip()
}

/// Marks every waiting step's events that `meets` as seen; whether any was new.
fn see_all(
    c: &store::sql::Connection,
    wid: i64,
    defs: &[StepDef],
    meets: impl Fn(&On) -> bool,
) -> Result<bool> {
    let mut any = false;
    for d in defs {
        for (k, e) in d.on.iter().enumerate() {
            if e.is_seen() && meets(e) {
                any |= rows::see(c, wid, &d.id, k)?;
            }
        }
    }
    Ok(any)
}

/// The most a step's prompt may take once filled in (the rest is cut, and says
/// where the whole is).
const MAX_PROMPT: usize = 512 * 1024;

/// Step `i`'s prompt filled in: the instance's params and setup outputs, and
/// `${{ trigger }}`, `${{ previous.output }}` (what the steps it waits for ended
/// with) and `${{ steps.<id> }}` (a step not done yet is empty).
fn prompt_of(
    c: &store::sql::Connection,
    wid: i64,
    defs: &[StepDef],
    i: usize,
    inst: &rows::Instance,
) -> Result<String> {
    let mut vars = inst.vars.clone().ok_or_else(|| {
        domain::error::Error::internal("the instance's step values are missing; run it again")
    })?;
    let rows = rows::rows(c, wid)?;
    let mut outputs = BTreeMap::new();
    for r in &rows {
        outputs.insert(r.step.clone(), rows::output(c, r.run_id.as_deref())?);
    }
    for (id, out) in &outputs {
        vars.set_output(&format!("steps.{id}"), out.clone());
    }
    vars.set_output("trigger", inst.trigger.clone());
    let before: Vec<&str> = defs[i].on.iter().filter_map(On::step).collect();
    let previous = match before.as_slice() {
        [one] => outputs.get(*one).cloned().unwrap_or_default(),
        many => many
            .iter()
            .map(|s| {
                format!(
                    "step {s}:\n{}",
                    outputs.get(*s).cloned().unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("\n\n"),
    };
    vars.set_output("previous.output", previous);
    let mut text = domain::workflow_yaml::interpolate(&defs[i].prompt, &vars)
        .map_err(|e| domain::error::Error::invalid(format!("steps.{}.prompt: {e}", defs[i].id)))?;
    if text.len() > MAX_PROMPT {
        let mut end = MAX_PROMPT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("\n[cut here: each step's whole output is its run's final text, agent-worker://runs/{id}]");
    }
    Ok(text)
}

/// A step's prompt, consumed by a run that failed, posted again (filled in again
/// from the same outputs), unless a newer one was posted meanwhile.
fn repost(
    c: &store::sql::Connection,
    (wid, defs, i): (i64, &[StepDef], usize),
    row: &rows::Row,
    now: i64,
) -> Result<Option<messaging::Posted>> {
    let Some(old) = &row.message_id else {
        return Ok(None);
    };
    let inst = rows::instance(c, wid)?;
    let text = format!(
        "(step {}) {}",
        defs[i].id,
        prompt_of(c, wid, defs, i, &inst)?
    );
    let posted = post_prompt(c, (wid, &inst.wref), &defs[i], &text, now)?;
    // The consumed prompt's ask goes: the new one is the step's.
    messaging::results::close_tx(c, wid, old)?;
    if !rows::replace_message(c, wid, &row.step, old, &posted.result.id)? {
        return Err(domain::error::Error::conflict(
            "the step's prompt was posted again meanwhile",
        ));
    }
    Ok(Some(posted))
}
