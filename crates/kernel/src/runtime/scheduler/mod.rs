//! The scheduler: decides when an agent runs. Event-driven, never a polling loop.
//!
//! Sources of a run: a delivery (the `Delivered` event, at once), a schedule
//! (`every` after idle, `cron`), a retry after a failure, the end of an automatic
//! pause, a deferred message whose time came, and agent_ask (which goes straight to
//! the process manager). All but the ask pass through [`Scheduler::admit`]:
//!
//! - a running agent gets the wake remembered (one more run when this one ends);
//! - at most `limit` runs at once; the rest wait in a FIFO queue with one place per
//!   agent, so a busy agent cannot starve the others;
//! - the gate: a paused agent, a stopped or failed workflow, a message wake with
//!   nothing in the inbox, or a poll (an `every` schedule without a prompt of its
//!   own) with nothing waiting starts nothing; a guard that trips pauses the agent.
//!
//! After a run ([`Scheduler::after_run`], which the process manager calls before it
//! reports the run done): success clears the retry count; a failure is retried after
//! 1 s, 2 s and 4 s (the deliveries stay pending); auth and billing errors pause the
//! agent and resume it after 5 min, doubling to 1 h; a fourth failure marks the
//! agent failed (and its workflow run, if any). Every message to the lead about this
//! comes from `system` in the agent's channel.
//!
//! Timers live in one keyed map (a new deadline for a key replaces the old one) and
//! one task sleeps until the earliest. What must survive a restart is in the store
//! (schedules, automatic resumes, pending deliveries) and is re-armed at start.

mod fires;
mod gate;
mod outcome;
mod wakes;

use crate::events::Event;
use crate::messaging::broadcast::UNWRITTEN_EXISTS;
pub(crate) use crate::messaging::runs::open_deliveries;
use crate::runtime::base::Base;
use crate::runtime::runs::RunEnd;
use crate::runtime::spending::Spending;
use crate::runtime::workers::Workers;
use domain::error::Result;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use store::sql;
use tokio::sync::Notify;

/// Why a run is wanted. Message-like wakes start nothing when the inbox is empty.
pub use domain::states::Wake;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Timer {
    Retry(i64),
    Resume(i64),
    Schedule(i64),
    /// A deferred delivery of this agent comes due.
    Deferred(i64),
    /// Check whether a workflow run is done (debounced).
    Settle(i64),
}

struct Queued {
    agent_id: i64,
    wake: Wake,
    prompt: Option<String>,
}

/// What admission decided for a wake, before the gate reads the store.
#[derive(Debug, PartialEq)]
enum Admission {
    /// Nothing to add: a retry will read the inbox.
    Dropped,
    /// A start under way looks again once it is done.
    Recheck,
    /// The worker limit is reached: it waits in the queue (one place per agent).
    Queued,
    /// Marked starting: the gate decides, with the wake's prompt.
    Start(Option<String>),
}

/// What a finished run means for scheduling.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// Stopped: nothing follows.
    Nothing,
    /// The retry count starts over.
    Succeeded,
    /// Auth or billing: an automatic pause.
    Pause(domain::protocol::ErrorClass),
    /// Retried after this delay (the attempt's number).
    Retry(usize, Duration),
    /// Failed every retry (after this many attempts).
    Failed(usize),
}

#[derive(Default)]
struct State {
    queue: VecDeque<Queued>,
    /// Admitted but not yet registered with the process manager.
    starting: HashSet<i64>,
    /// Agents a message reached while they were `starting`: their admission looks
    /// again once it is done (it may have read the inbox before the message was
    /// there, and decided there was nothing to run).
    recheck: HashSet<i64>,
    /// Failed runs in a row per agent.
    attempts: HashMap<i64, usize>,
    timers: HashMap<Timer, i64>,
    /// Workflow runs whose completion is being watched.
    watched: HashSet<i64>,
}

impl State {
    /// Removes and returns the timers due at `now`, and the next deadline.
    fn due(&mut self, now: i64) -> (Vec<Timer>, Option<i64>) {
        let due: Vec<Timer> = self
            .timers
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(t, _)| *t)
            .collect();
        for t in &due {
            self.timers.remove(t);
        }
        (due, self.timers.values().min().copied())
    }

    /// Whether any of these agents has work queued, starting or waiting for a retry
    /// (or a deferred delivery).
    fn owes(&self, agent_ids: &[i64]) -> bool {
        agent_ids.iter().any(|a| self.starting.contains(a))
            || self.queue.iter().any(|q| agent_ids.contains(&q.agent_id))
            || agent_ids.iter().any(|a| {
                self.timers.contains_key(&Timer::Retry(*a))
                    || self.timers.contains_key(&Timer::Deferred(*a))
            })
    }

    /// Whether anything is queued, starting, or waiting on a timer other than a
    /// workflow's settle check.
    fn busy(&self) -> bool {
        !self.queue.is_empty()
            || !self.starting.is_empty()
            || self.timers.keys().any(|t| !matches!(t, Timer::Settle(_)))
    }

    /// Every agent's queued work, attempts and timers go; settle checks stay.
    fn forget_all_agents(&mut self) {
        self.queue.clear();
        self.attempts.clear();
        self.timers.retain(|t, _| matches!(t, Timer::Settle(_)));
    }

    /// One agent's queued work, attempts and timers go.
    fn forget_agent(&mut self, agent_id: i64) {
        self.queue.retain(|q| q.agent_id != agent_id);
        self.attempts.remove(&agent_id);
        for t in [
            Timer::Retry(agent_id),
            Timer::Resume(agent_id),
            Timer::Schedule(agent_id),
            Timer::Deferred(agent_id),
        ] {
            self.timers.remove(&t);
        }
    }

    /// Admission's bookkeeping for a wake of `agent_id` while `running` runs are
    /// in progress, at most `limit` at once.
    fn admit(&mut self, q: Queued, running: usize, limit: usize) -> Admission {
        let Queued {
            agent_id,
            wake,
            prompt,
        } = q;
        // A retry will read the inbox: nothing to add.
        if wake == Wake::Message && self.timers.contains_key(&Timer::Retry(agent_id)) {
            return Admission::Dropped;
        }
        // A start under way may have looked at the inbox before this message
        // was in it: it looks again when it is done.
        if wake == Wake::Message && self.starting.contains(&agent_id) {
            self.recheck.insert(agent_id);
            return Admission::Recheck;
        }
        if running + self.starting.len() >= limit {
            match self.queue.iter_mut().find(|q| q.agent_id == agent_id) {
                Some(q) => {
                    if q.prompt.is_none() && prompt.is_some() {
                        (q.wake, q.prompt) = (wake, prompt);
                    }
                }
                None => self.queue.push_back(Queued {
                    agent_id,
                    wake,
                    prompt,
                }),
            }
            return Admission::Queued;
        }
        self.starting.insert(agent_id);
        Admission::Start(prompt)
    }

    /// A start is done; whether a message came meanwhile (look again).
    fn started(&mut self, agent_id: i64) -> bool {
        self.starting.remove(&agent_id);
        self.recheck.remove(&agent_id)
    }

    /// The next queued wake, if there is room for it.
    fn next(&mut self, running: usize, limit: usize) -> Option<Queued> {
        if running + self.starting.len() >= limit {
            return None;
        }
        self.queue.pop_front()
    }

    /// What a run's end means, counting failures in a row (`delays` are the
    /// retries' waits: one more failure than there are fails for good).
    fn settle(&mut self, agent_id: i64, end: &RunEnd, delays: &[Duration]) -> Verdict {
        use domain::protocol::ErrorClass;
        if end.stopped() {
            return Verdict::Nothing;
        }
        if end.ok {
            self.attempts.remove(&agent_id);
            return Verdict::Succeeded;
        }
        let class = end.error_class.unwrap_or(ErrorClass::Other);
        if matches!(class, ErrorClass::Auth | ErrorClass::BillingQuota) {
            self.attempts.remove(&agent_id);
            return Verdict::Pause(class);
        }
        let n = self.attempts.entry(agent_id).or_default();
        *n += 1;
        let attempt = *n;
        if let Some(delay) = delays.get(attempt - 1) {
            return Verdict::Retry(attempt, *delay);
        }
        self.attempts.remove(&agent_id);
        Verdict::Failed(attempt)
    }
}

pub struct Scheduler {
    state: Mutex<State>,
    /// Wakes the timer task when a deadline is set (it may be earlier than its sleep).
    timer_wake: Arc<Notify>,
    /// Deliveries noted for the wake drain, and the rescan's single flight.
    wakes: Arc<wakes::Wakes>,
    /// Most runs at once (AGENT_WORKER_MAX_WORKERS, default cores × 2).
    pub limit: usize,
    /// The store, the clock (and the quiet time before a workflow run is called
    /// done in its timing), the process manager and the spend contracts.
    base: Arc<Base>,
    workers: Arc<Workers>,
    spending: Arc<Spending>,
    /// What else waits for a polling agent, above the runtime (set once).
    waiting: std::sync::OnceLock<Weak<dyn Waiting>>,
}

/// What may wait for an agent besides its inbox and the channel, kept above the
/// runtime (a task on a board it may take): an interval schedule that only polls
/// runs the agent when this says something waits. Asked inside the gate's read.
pub(crate) trait Waiting: Send + Sync {
    fn waiting_tx(&self, c: &store::sql::Connection, workflow_id: i64, agent: &str)
    -> Result<bool>;
}

impl Scheduler {
    pub(crate) fn new(base: Arc<Base>, workers: Arc<Workers>, spending: Arc<Spending>) -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let limit = std::env::var("AGENT_WORKER_MAX_WORKERS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(cores * 2);
        Self {
            state: Mutex::default(),
            timer_wake: Arc::new(Notify::new()),
            wakes: Arc::default(),
            limit,
            base,
            workers,
            spending,
            waiting: std::sync::OnceLock::new(),
        }
    }

    /// Names what else a poll asks about (set once, when the kernel is composed).
    pub(crate) fn waiting_with(&self, w: Weak<dyn Waiting>) {
        let _ = self.waiting.set(w);
    }

    fn arm(&self, t: Timer, at: i64) {
        self.state.lock().unwrap().timers.insert(t, at);
        self.timer_wake.notify_one();
    }

    fn disarm(&self, t: Timer) {
        self.state.lock().unwrap().timers.remove(&t);
    }

    /// Removes and returns the timers that are due, and the next deadline.
    fn due(&self, now: i64) -> (Vec<Timer>, Option<i64>) {
        self.state.lock().unwrap().due(now)
    }

    /// Whether any of these agents has work queued, starting or waiting for a retry.
    pub(crate) fn owes(&self, agent_ids: &[i64]) -> bool {
        self.state.lock().unwrap().owes(agent_ids)
    }

    /// Whether anything is queued, starting, or waiting on a timer (other than a
    /// workflow's settle check): work that would be lost if the kernel stopped.
    pub(crate) fn busy(&self) -> bool {
        self.state.lock().unwrap().busy()
    }

    /// Watches a workflow run's completion (checked once things are quiet), or
    /// stops watching it.
    pub(crate) fn watch_workflow(&self, workflow_id: i64, watched: bool) {
        {
            let mut st = self.state.lock().unwrap();
            if watched {
                st.watched.insert(workflow_id);
            } else {
                st.watched.remove(&workflow_id);
                st.timers.remove(&Timer::Settle(workflow_id));
            }
        }
        if watched {
            self.settle_soon(workflow_id);
        }
    }

    /// Something happened in a workflow: check it once things are quiet.
    fn settle_soon(&self, workflow_id: i64) {
        let watched = self.state.lock().unwrap().watched.contains(&workflow_id);
        if watched {
            self.arm(
                Timer::Settle(workflow_id),
                self.base.clock.now_ms() + self.base.timing.settle_debounce.as_millis() as i64,
            );
        }
    }

    /// Drops every agent's queued work and timers (this node was taken over: its
    /// agents run elsewhere now). Workflow settle checks stay.
    pub(crate) fn forget_all_agents(&self) {
        self.state.lock().unwrap().forget_all_agents();
    }

    pub(crate) fn forget_agent(&self, agent_id: i64) {
        self.state.lock().unwrap().forget_agent(agent_id);
    }
}

impl Scheduler {
    /// Starts the scheduler's two tasks (events, timers) and re-arms what the store
    /// says is owed: schedules, automatic resumes, deferred and pending deliveries,
    /// and workflow runs in progress.
    pub async fn start(self: &Arc<Self>) -> Result<()> {
        self.spawn_event_loop();
        self.spawn_wake_drain();
        self.spawn_timer_loop();
        self.serve_owed().await
    }

    /// Arms and serves everything the store says is owed to this node's agents.
    /// Idempotent (a deadline set again replaces itself), so it also recovers from
    /// missed events.
    async fn serve_owed(self: &Arc<Self>) -> Result<()> {
        let now = self.base.clock.now_ms();
        let me = self.base.node().to_owned();
        let owed = self
            .base.store
            .read(move |c| {
                // `?1` is this node, `?2` now: every query names both.
                let ids = |sql: &str| -> Result<Vec<(i64, Option<i64>)>> {
                    let rows = c
                        .prepare(sql)?
                        .query_map(sql::params![me, now], |r| Ok((r.get(0)?, r.get(1)?)))?
                        .collect::<sql::Result<Vec<_>>>()?;
                    Ok(rows)
                };
                Ok((
                    ids("SELECT s.agent_id, s.next_at FROM schedules s JOIN agents a ON a.id = s.agent_id
                          WHERE a.node = ?1 AND CAST(?2 AS BIGINT) > 0")?,
                    ids("SELECT id, resume_at FROM agents WHERE state = 'paused' AND resume_at IS NOT NULL
                           AND node = ?1 AND CAST(?2 AS BIGINT) > 0")?,
                    // Per agent, the first open delivery is enough (a join would visit
                    // every open delivery: millions after a bulk import).
                    ids(&format!("SELECT a.id, NULL FROM agents a WHERE a.node = ?1 AND (EXISTS (
                           SELECT 1 FROM deliveries d
                            WHERE d.workflow_id = a.workflow_id AND d.recipient = a.name
                              AND d.state <> 'acked' AND (d.state <> 'deferred' OR d.defer_until <= ?2))
                           OR {UNWRITTEN_EXISTS})"))?,
                    ids("SELECT a.id, min(d.defer_until) FROM agents a JOIN deliveries d
                           ON d.workflow_id = a.workflow_id AND d.recipient = a.name
                         WHERE d.state = 'deferred' AND d.defer_until > ?2 AND a.node = ?1
                         GROUP BY a.id")?,
                    // The runs of workflows whose agents this node runs.
                    ids("SELECT w.id, NULL FROM workflows w WHERE w.state IN ('running', 'completed', 'scheduled', 'blocked')
                           AND EXISTS (SELECT 1 FROM agents a WHERE a.workflow_id = w.id AND a.node = ?1)
                           AND CAST(?2 AS BIGINT) > 0")?,
                ))
            })
            .await?;
        let (schedules, resumes, pending, deferred, workflows) = owed;
        for (a, at) in schedules {
            self.arm(Timer::Schedule(a), at.unwrap_or(now));
        }
        for (a, at) in resumes {
            self.arm(Timer::Resume(a), at.unwrap_or(now));
        }
        for (a, at) in deferred {
            self.arm(Timer::Deferred(a), at.unwrap_or(now));
        }
        for (w, _) in workflows {
            self.watch_workflow(w, true);
        }
        for (a, _) in pending {
            self.admit(a, Wake::Message, None).await;
        }
        Ok(())
    }

    fn spawn_event_loop(self: &Arc<Self>) {
        let weak: Weak<Self> = Arc::downgrade(self);
        let mut rx = self.base.events.subscribe();
        tokio::spawn(async move {
            loop {
                let ev = rx.recv().await;
                let Some(k) = weak.upgrade() else { return };
                match ev {
                    Ok(Event::Delivered {
                        workflow_id,
                        recipients,
                        ..
                    }) => {
                        k.settle_soon(workflow_id);
                        // Noted, not read here: the drain task reads in batches.
                        k.wakes.note(workflow_id, &recipients);
                    }
                    Ok(Event::Urgent { workflow_id, agent }) => {
                        // Not in this loop: the stop waits for the run's end.
                        tokio::spawn(async move { k.interrupt(workflow_id, &agent).await });
                    }
                    Ok(Event::Posted { workflow_id, .. })
                    | Ok(Event::AgentChanged { workflow_id, .. })
                    | Ok(Event::RunEnded { workflow_id, .. })
                    | Ok(Event::ApprovalAsked { workflow_id, .. })
                    | Ok(Event::ApprovalClosed { workflow_id, .. }) => {
                        k.settle_soon(workflow_id);
                    }
                    Ok(
                        Event::WorkflowSettled { .. }
                        | Event::RunStarted { .. }
                        | Event::WorkflowQuiet { .. }
                        | Event::AgentFailed { .. }
                        | Event::DocumentChanged { .. }
                        | Event::BranchMoved { .. }
                        | Event::Notice { .. }
                        | Event::Acked { .. }
                        | Event::FeedbackGiven { .. }
                        | Event::TaskChanged { .. }
                        | Event::ContractsChanged,
                    ) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        // Missed events: the store is the truth, so serve every open inbox.
                        tracing::debug!(missed = n, "scheduler lagged; re-reading open inboxes");
                        k.request_rescan();
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }

    fn spawn_timer_loop(self: &Arc<Self>) {
        let weak: Weak<Self> = Arc::downgrade(self);
        let wake = self.timer_wake.clone();
        let clock = self.base.clock.clone();
        tokio::spawn(async move {
            loop {
                let Some(k) = weak.upgrade() else { return };
                let (due, next) = k.due(clock.now_ms());
                for t in due {
                    let k2 = k.clone();
                    tokio::spawn(async move { k2.on_timer(t).await });
                }
                drop(k);
                let sleep = next.map_or(Duration::from_secs(3600), |at| {
                    Duration::from_millis((at - clock.now_ms()).clamp(0, 3_600_000) as u64)
                });
                // A manual clock (a test's) wakes it when moved.
                tokio::select! {
                    _ = tokio::time::sleep(sleep) => {}
                    _ = wake.notified() => {}
                    _ = clock.moved() => {}
                }
            }
        });
    }

    async fn on_timer(self: &Arc<Self>, t: Timer) {
        let r = match t {
            Timer::Retry(a) => {
                self.admit(a, Wake::Retry, None).await;
                Ok(())
            }
            Timer::Deferred(a) => {
                self.admit(a, Wake::Message, None).await;
                Ok(())
            }
            Timer::Resume(a) => self.auto_resume(a).await,
            Timer::Schedule(a) => self.fire_schedule(a).await,
            Timer::Settle(w) => {
                self.base
                    .events
                    .publish(Event::WorkflowQuiet { workflow_id: w });
                Ok(())
            }
        };
        if let Err(e) = r {
            tracing::error!(?t, "timer failed: {e}");
        }
    }

    /// The ids of the recipients a delivery could start a run of: agents (not the
    /// lead), not external, not paused. One read per message, however many
    /// recipients. (The gate checks again; this only spares it the common cases.)
    async fn wakeable_agents(&self, workflow_id: i64, names: Vec<String>) -> Result<Vec<i64>> {
        let me = self.base.node().to_owned();
        self.base.store
            .read(move |c| {
                // This node's agents only: another node wakes its own (it hears of the
                // delivery from the bus).
                let mut st = c.prepare_cached(
                    "SELECT id, name FROM agents WHERE workflow_id = ?1 AND node = ?2 AND state <> 'paused'",
                )?;
                // Recipients carry the members' stored names, so they match exactly.
                let wanted: HashSet<&str> = names.iter().map(String::as_str).collect();
                let mut ids = Vec::new();
                let mut rows = st.query(sql::params![workflow_id, me])?;
                while let Some(r) = rows.next()? {
                    if wanted.contains(r.get_ref(1)?.as_str().unwrap_or_default()) {
                        ids.push(r.get(0)?);
                    }
                }
                Ok(ids)
            })
            .await
    }

    pub(crate) fn arm_schedule(&self, agent_id: i64, at: Option<i64>) {
        match at {
            Some(at) => self.arm(Timer::Schedule(agent_id), at),
            None => self.disarm(Timer::Schedule(agent_id)),
        }
    }
}

impl crate::runtime::workers::AfterRun for Scheduler {
    fn settle_run(
        self: Arc<Self>,
        agent_id: i64,
        workflow_id: i64,
        end: RunEnd,
        again: Option<(Wake, Option<String>)>,
    ) -> futures::future::BoxFuture<'static, ()> {
        // Boxed: a run that ends may start the next one, a cycle of futures the
        // compiler cannot see through without a named type.
        Box::pin(async move { self.after_run(agent_id, workflow_id, &end, again).await })
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod timer_tests;
