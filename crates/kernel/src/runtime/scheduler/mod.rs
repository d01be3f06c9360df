//! The scheduler: decides when an agent runs. Event-driven, never a polling loop.
//!
//! Sources of a run: a delivery (the `Delivered` event, at once), a schedule
//! (`every` after idle, `cron`), a retry after a failure, the end of an automatic
//! pause, a deferred message whose time came, and agent_ask (which goes straight to
//! the process manager). All but the ask pass through [`Runtime::admit`](crate::runtime::Runtime):
//!
//! - a running agent gets the wake remembered (one more run when this one ends);
//! - at most `limit` runs at once; the rest wait in a FIFO queue with one place per
//!   agent, so a busy agent cannot starve the others;
//! - the gate: a paused agent, a stopped or failed workflow, a message wake with
//!   nothing in the inbox, or a poll (an `every` schedule without a prompt of its
//!   own) with nothing waiting starts nothing; a guard that trips pauses the agent.
//!
//! After a run ([`Runtime::after_run`](crate::runtime::Runtime), called by the process manager before it
//! reports the run done): success clears the retry count; a failure is retried after
//! 1 s, 2 s and 4 s (the deliveries stay pending); auth and billing errors pause the
//! agent and resume it after 5 min, doubling to 1 h; a fourth failure marks the
//! agent failed (and its workflow run, if any). Every message to the lead about this
//! comes from `system` in the agent's channel.
//!
//! Timers live in one keyed map (a new deadline for a key replaces the old one) and
//! one task sleeps until the earliest. What must survive a restart is in the store
//! (schedules, automatic resumes, pending deliveries) and is re-armed at start.

mod gate;
mod outcome;
mod wakes;

use crate::events::Event;
use crate::messaging::broadcast::UNWRITTEN_EXISTS;
use crate::runtime::Runtime;
use crate::timing::Clock;
use domain::error::Result;
pub(crate) use gate::open_deliveries;
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

pub struct Scheduler {
    state: Mutex<State>,
    /// Wakes the timer task when a deadline is set (it may be earlier than its sleep).
    timer_wake: Arc<Notify>,
    /// Deliveries noted for the wake drain, and the rescan's single flight.
    wakes: Arc<wakes::Wakes>,
    /// Most runs at once (AGENT_WORKER_MAX_WORKERS, default cores × 2).
    pub limit: usize,
    /// The kernel's clock, and the quiet time before a workflow run is called done.
    clock: Clock,
    settle_debounce: Duration,
}

impl Scheduler {
    pub fn new(clock: Clock, settle_debounce: Duration) -> Self {
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
            clock,
            settle_debounce,
        }
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
        let mut st = self.state.lock().unwrap();
        let due: Vec<Timer> = st
            .timers
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(t, _)| *t)
            .collect();
        for t in &due {
            st.timers.remove(t);
        }
        (due, st.timers.values().min().copied())
    }

    /// Whether any of these agents has work queued, starting or waiting for a retry.
    pub(crate) fn owes(&self, agent_ids: &[i64]) -> bool {
        let st = self.state.lock().unwrap();
        agent_ids.iter().any(|a| st.starting.contains(a))
            || st.queue.iter().any(|q| agent_ids.contains(&q.agent_id))
            || agent_ids.iter().any(|a| {
                st.timers.contains_key(&Timer::Retry(*a))
                    || st.timers.contains_key(&Timer::Deferred(*a))
            })
    }

    /// Whether anything is queued, starting, or waiting on a timer (other than a
    /// workflow's settle check): work that would be lost if the kernel stopped.
    pub(crate) fn busy(&self) -> bool {
        let st = self.state.lock().unwrap();
        !st.queue.is_empty()
            || !st.starting.is_empty()
            || st.timers.keys().any(|t| !matches!(t, Timer::Settle(_)))
    }

    pub(crate) fn watch(&self, workflow_id: i64, watched: bool) {
        let mut st = self.state.lock().unwrap();
        if watched {
            st.watched.insert(workflow_id);
        } else {
            st.watched.remove(&workflow_id);
            st.timers.remove(&Timer::Settle(workflow_id));
        }
    }

    /// Something happened in a workflow: check it once things are quiet.
    fn settle_soon(&self, workflow_id: i64) {
        let watched = self.state.lock().unwrap().watched.contains(&workflow_id);
        if watched {
            self.arm(
                Timer::Settle(workflow_id),
                self.clock.now_ms() + self.settle_debounce.as_millis() as i64,
            );
        }
    }

    /// Drops every agent's queued work and timers (this node was taken over: its
    /// agents run elsewhere now). Workflow settle checks stay.
    pub(crate) fn forget_all_agents(&self) {
        let mut st = self.state.lock().unwrap();
        st.queue.clear();
        st.attempts.clear();
        st.timers.retain(|t, _| matches!(t, Timer::Settle(_)));
    }

    pub(crate) fn forget_agent(&self, agent_id: i64) {
        let mut st = self.state.lock().unwrap();
        st.queue.retain(|q| q.agent_id != agent_id);
        st.attempts.remove(&agent_id);
        for t in [
            Timer::Retry(agent_id),
            Timer::Resume(agent_id),
            Timer::Schedule(agent_id),
            Timer::Deferred(agent_id),
        ] {
            st.timers.remove(&t);
        }
    }
}

impl Default for Scheduler {
    /// On the system clock with production's delays.
    fn default() -> Self {
        let t = crate::timing::Timing::default();
        Self::new(Clock::system(), t.settle_debounce)
    }
}

impl Runtime {
    /// Starts the scheduler's two tasks (events, timers) and re-arms what the store
    /// says is owed: schedules, automatic resumes, deferred and pending deliveries,
    /// and workflow runs in progress.
    pub async fn start_scheduler(self: &Arc<Self>) -> Result<()> {
        self.spawn_event_loop();
        self.spawn_wake_drain();
        self.spawn_timer_loop();
        self.serve_owed().await
    }

    /// Arms and serves everything the store says is owed to this node's agents.
    /// Idempotent (a deadline set again replaces itself), so it also recovers from
    /// missed events.
    async fn serve_owed(self: &Arc<Self>) -> Result<()> {
        let now = self.clock.now_ms();
        let me = self.node().to_owned();
        let owed = self
            .store
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
            self.scheduler.arm(Timer::Schedule(a), at.unwrap_or(now));
        }
        for (a, at) in resumes {
            self.scheduler.arm(Timer::Resume(a), at.unwrap_or(now));
        }
        for (a, at) in deferred {
            self.scheduler.arm(Timer::Deferred(a), at.unwrap_or(now));
        }
        for (w, _) in workflows {
            self.scheduler.watch(w, true);
            self.scheduler.settle_soon(w);
        }
        for (a, _) in pending {
            self.admit(a, Wake::Message, None).await;
        }
        Ok(())
    }

    fn spawn_event_loop(self: &Arc<Self>) {
        let weak: Weak<Self> = Arc::downgrade(self);
        let mut rx = self.events.subscribe();
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
                        k.scheduler.settle_soon(workflow_id);
                        // Noted, not read here: the drain task reads in batches.
                        k.scheduler.wakes.note(workflow_id, &recipients);
                    }
                    Ok(Event::Posted { workflow_id, .. })
                    | Ok(Event::AgentChanged { workflow_id, .. })
                    | Ok(Event::RunEnded { workflow_id, .. })
                    | Ok(Event::ApprovalAsked { workflow_id, .. })
                    | Ok(Event::ApprovalClosed { workflow_id, .. }) => {
                        k.scheduler.settle_soon(workflow_id);
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
        let wake = self.scheduler.timer_wake.clone();
        let clock = self.clock.clone();
        tokio::spawn(async move {
            loop {
                let Some(k) = weak.upgrade() else { return };
                let (due, next) = k.scheduler.due(clock.now_ms());
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
                self.events.publish(Event::WorkflowQuiet { workflow_id: w });
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
        let me = self.node().to_owned();
        self.store
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

    /// Drops an agent's queued work and timers (not its schedule row): it was paused,
    /// deleted or registered anew.
    pub(crate) fn scheduler_forget(&self, agent_id: i64) {
        self.scheduler.forget_agent(agent_id);
    }

    /// Drops every agent's queued work and timers (this node was taken over).
    pub(crate) fn scheduler_forget_all(&self) {
        self.scheduler.forget_all_agents();
    }

    pub(crate) fn arm_schedule(&self, agent_id: i64, at: Option<i64>) {
        match at {
            Some(at) => self.scheduler.arm(Timer::Schedule(agent_id), at),
            None => self.scheduler.disarm(Timer::Schedule(agent_id)),
        }
    }

    pub(crate) fn watch_workflow(&self, workflow_id: i64, watched: bool) {
        self.scheduler.watch(workflow_id, watched);
        if watched {
            self.scheduler.settle_soon(workflow_id);
        }
    }

    /// Whether the scheduler still owes any of these agents a run.
    pub(crate) fn owes_runs(&self, agent_ids: &[i64]) -> bool {
        self.scheduler.owes(agent_ids)
    }
}
