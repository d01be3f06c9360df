//! The scheduler: decides when an agent runs. Event-driven, never a polling loop.
//!
//! Sources of a run: a delivery (the `Delivered` event, at once), a schedule
//! (`every` after idle, `cron`), a retry after a failure, the end of an automatic
//! pause, a deferred message whose time came, and agent_ask (which goes straight to
//! the process manager). All but the ask pass through [`Kernel::admit`]:
//!
//! - a running agent gets the wake remembered (one more run when this one ends);
//! - at most `limit` runs at once; the rest wait in a FIFO queue with one place per
//!   agent, so a busy agent cannot starve the others;
//! - the gate: a paused agent, a stopped or failed workflow, or a message wake with
//!   nothing in the inbox starts nothing; a guard that trips pauses the agent.
//!
//! After a run ([`Kernel::after_run`], called by the process manager before it
//! reports the run done): success clears the retry count; a failure is retried after
//! 1 s, 2 s and 4 s (the deliveries stay pending); auth and billing errors pause the
//! agent and resume it after 5 min, doubling to 1 h; a fourth failure marks the
//! agent failed (and its workflow run, if any). Every message to the lead about this
//! comes from `system` in the agent's channel.
//!
//! Timers live in one keyed map (a new deadline for a key replaces the old one) and
//! one task sleeps until the earliest. What must survive a restart is in the store
//! (schedules, automatic resumes, pending deliveries) and is re-armed at start.

use crate::error::Result;
use crate::kernel::events::Event;
use crate::kernel::registry::config::AgentConfig;
use crate::kernel::registry::guards::{Budget, DEFAULT_MAX_HOPS, DEFAULT_RUNS_PER_HOUR};
use crate::kernel::runtime::runs::RunEnd;
use crate::kernel::{Kernel, clock::now_ms, messaging};
use crate::names::WorkflowRef;
use crate::worker::protocol::ErrorClass;
use rusqlite::{Connection, OptionalExtension};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// Retries after a failed run, and the wait before each.
pub const RETRY_DELAYS: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
];
/// The first automatic resume after an auth or billing pause, and the cap.
pub const PAUSE_FIRST: Duration = Duration::from_secs(5 * 60);
pub const PAUSE_MAX: Duration = Duration::from_secs(60 * 60);
/// Quiet time before a workflow run is called done (then checked again).
pub const SETTLE_DEBOUNCE: Duration = Duration::from_millis(1000);

/// Why a run is wanted. Message-like wakes start nothing when the inbox is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    Message,
    Retry,
    Resume,
    Schedule,
}

impl Wake {
    fn trigger(self) -> &'static str {
        match self {
            Wake::Message => "message",
            Wake::Retry => "retry",
            Wake::Resume => "resume",
            Wake::Schedule => "schedule",
        }
    }
    fn needs_inbox(self) -> bool {
        self != Wake::Schedule
    }
}

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
    /// Most runs at once (AGENT_WORKER_MAX_WORKERS, default cores × 2).
    pub limit: usize,
}

impl Scheduler {
    pub fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let limit = std::env::var("AGENT_WORKER_MAX_WORKERS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(cores * 2);
        Self {
            state: Mutex::default(),
            timer_wake: Arc::new(Notify::new()),
            limit,
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
                now_ms() + SETTLE_DEBOUNCE.as_millis() as i64,
            );
        }
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
    fn default() -> Self {
        Self::new()
    }
}

/// What the gate decided for one wake.
enum Gate {
    Go,
    Skip,
    Trip(String),
}

/// What the gate reads, in one snapshot.
struct GateFacts {
    /// Driven by a joined client: never started by the kernel.
    external: bool,
    name: String,
    workflow: WorkflowRef,
    workflow_id: i64,
    agent_state: String,
    workflow_state: String,
    open: i64,
    hops: i64,
    runs_last_hour: i64,
    agent_budget: Budget,
    workflow_budget: Budget,
    agent_tokens: u64,
    agent_cost: f64,
    workflow_tokens: u64,
    workflow_cost: f64,
}

fn gate_facts(c: &Connection, agent_id: i64) -> Result<Option<GateFacts>> {
    let now = now_ms();
    let row = c
        .query_row(
            "SELECT a.name, w.name, w.tag, w.id, a.state, w.state, w.hops, a.config, w.budget, a.backend
             FROM agents a JOIN workflows w ON w.id = a.workflow_id WHERE a.id = ?1",
            [agent_id],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    WorkflowRef {
                        name: r.get(1)?,
                        tag: r.get(2)?,
                    },
                    r.get::<_, i64>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, i64>(6)?,
                    r.get::<_, String>(7)?,
                    r.get::<_, String>(8)?,
                    r.get::<_, String>(9)?,
                ))
            },
        )
        .optional()?;
    let Some((name, workflow, wid, agent_state, workflow_state, hops, config, wbudget, backend)) =
        row
    else {
        return Ok(None);
    };
    let open = open_deliveries(c, wid, &name, now)?;
    let runs_last_hour: i64 = c.query_row(
        "SELECT count(*) FROM runs WHERE agent_id = ?1 AND started_at > ?2",
        (agent_id, now - 3_600_000),
        |r| r.get(0),
    )?;
    let config: AgentConfig = serde_json::from_str(&config).unwrap_or_default();
    let agent_budget = config.budget.unwrap_or_default();
    let workflow_budget: Budget = serde_json::from_str(&wbudget).unwrap_or_default();
    // Spending is summed only for a budget that limits it: most agents have none, and
    // the sum grows with the history.
    let spent = |budget: &Budget, column: &str, id: i64| -> Result<(u64, f64)> {
        if budget.max_tokens.is_none() && budget.max_cost_usd.is_none() {
            return Ok((0, 0.0));
        }
        Ok(c.query_row(
            &format!(
                "SELECT coalesce(sum(input_tokens + output_tokens), 0), sum(cost_usd) FROM runs WHERE {column} = ?1"
            ),
            [id],
            |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, Option<f64>>(1)?.unwrap_or(0.0))),
        )?)
    };
    let (agent_tokens, agent_cost) = spent(&agent_budget, "agent_id", agent_id)?;
    let (workflow_tokens, workflow_cost) = spent(&workflow_budget, "workflow_id", wid)?;
    Ok(Some(GateFacts {
        external: backend == crate::kernel::registry::EXTERNAL,
        name,
        workflow,
        workflow_id: wid,
        agent_state,
        workflow_state,
        open,
        hops,
        runs_last_hour,
        agent_budget,
        workflow_budget,
        agent_tokens,
        agent_cost,
        workflow_tokens,
        workflow_cost,
    }))
}

/// Deliveries an agent should handle now: pending, seen, or deferred and due.
pub(crate) fn open_deliveries(
    c: &Connection,
    workflow_id: i64,
    name: &str,
    now: i64,
) -> Result<i64> {
    Ok(c.prepare_cached(
        "SELECT count(*) FROM deliveries WHERE workflow_id = ?1 AND recipient = ?2 AND state <> 'acked'
           AND (state <> 'deferred' OR defer_until <= ?3)",
    )?
    .query_row((workflow_id, name, now), |r| r.get(0))?)
}

impl GateFacts {
    fn decide(&self, wake: Wake) -> Gate {
        if self.external
            || self.agent_state == "paused"
            || matches!(self.workflow_state.as_str(), "stopped" | "failed")
        {
            return Gate::Skip;
        }
        if wake.needs_inbox() && self.open == 0 {
            return Gate::Skip;
        }
        let b = self.agent_budget.or(&self.workflow_budget);
        let per_hour = b.max_runs_per_hour.unwrap_or(DEFAULT_RUNS_PER_HOUR) as i64;
        if self.runs_last_hour >= per_hour {
            return Gate::Trip(format!(
                "{} started {} runs in the last hour (max_runs_per_hour {per_hour})",
                self.name, self.runs_last_hour
            ));
        }
        let hops = b.max_hops.unwrap_or(DEFAULT_MAX_HOPS) as i64;
        if wake == Wake::Message && self.hops >= hops {
            return Gate::Trip(format!(
                "agents sent each other {} messages without a word from you (max_hops {hops}); this looks \
                 like a loop",
                self.hops
            ));
        }
        let agent = over_budget(
            &self.name,
            &self.agent_budget,
            self.agent_tokens,
            self.agent_cost,
        );
        let workflow = over_budget(
            &self.workflow.to_string(),
            &self.workflow_budget,
            self.workflow_tokens,
            self.workflow_cost,
        );
        match agent.or(workflow) {
            Some(why) => Gate::Trip(why),
            None => Gate::Go,
        }
    }
}

/// Why `who` (an agent or a workflow instance) is over its token or cost budget.
fn over_budget(who: &str, budget: &Budget, tokens: u64, cost: f64) -> Option<String> {
    if let Some(t) = budget.max_tokens
        && tokens >= t
    {
        return Some(format!(
            "{who} used {tokens} tokens, its budget is {t} (max_tokens)"
        ));
    }
    if let Some(d) = budget.max_cost_usd
        && cost >= d
    {
        return Some(format!(
            "{who} used ${cost:.4}, its budget is ${d} (max_cost_usd)"
        ));
    }
    None
}

impl Kernel {
    /// Starts the scheduler's two tasks (events, timers) and re-arms what the store
    /// says is owed: schedules, automatic resumes, deferred and pending deliveries,
    /// and workflow runs in progress.
    pub async fn start_scheduler(self: &Arc<Self>) -> Result<()> {
        self.spawn_event_loop();
        self.spawn_timer_loop();
        self.serve_owed().await
    }

    /// Arms and serves everything the store says is owed. Idempotent (a deadline
    /// set again replaces itself), so it also recovers from missed events.
    async fn serve_owed(self: &Arc<Self>) -> Result<()> {
        let now = now_ms();
        let owed = self
            .store
            .read(move |c| {
                let ids = |sql: &str| -> Result<Vec<(i64, Option<i64>)>> {
                    let mut st = c.prepare(sql)?;
                    let rows = st
                        .query_map([now], |r| Ok((r.get(0)?, r.get(1)?)))?
                        .collect::<rusqlite::Result<Vec<_>>>()?;
                    Ok(rows)
                };
                Ok((
                    ids("SELECT agent_id, next_at FROM schedules WHERE ?1 IS NOT NULL")?,
                    ids("SELECT id, resume_at FROM agents WHERE state = 'paused' AND resume_at IS NOT NULL AND ?1 IS NOT NULL")?,
                    ids("SELECT DISTINCT a.id, NULL FROM agents a JOIN deliveries d
                           ON d.workflow_id = a.workflow_id AND d.recipient = a.name
                         WHERE d.state <> 'acked' AND (d.state <> 'deferred' OR d.defer_until <= ?1)")?,
                    ids("SELECT a.id, min(d.defer_until) FROM agents a JOIN deliveries d
                           ON d.workflow_id = a.workflow_id AND d.recipient = a.name
                         WHERE d.state = 'deferred' AND d.defer_until > ?1 GROUP BY a.id")?,
                    ids("SELECT id, NULL FROM workflows WHERE state IN ('running', 'completed', 'scheduled', 'blocked') AND ?1 IS NOT NULL")?,
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
                        // Off the loop, so a slow read never holds up other events.
                        let k2 = k.clone();
                        tokio::spawn(async move {
                            let Ok(ids) = k2.wakeable_agents(workflow_id, &recipients).await else {
                                return;
                            };
                            for id in ids {
                                // A new message gives a failed agent fresh attempts.
                                k2.scheduler.state.lock().unwrap().attempts.remove(&id);
                                k2.admit(id, Wake::Message, None).await;
                            }
                        });
                    }
                    Ok(Event::Posted { workflow_id, .. })
                    | Ok(Event::AgentChanged { workflow_id, .. })
                    | Ok(Event::RunEnded { workflow_id, .. }) => {
                        k.scheduler.settle_soon(workflow_id);
                    }
                    Ok(
                        Event::WorkflowSettled { .. }
                        | Event::WorkflowQuiet { .. }
                        | Event::AgentFailed { .. },
                    ) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        // Missed events: the store is the truth, so serve every open inbox.
                        tracing::warn!(missed = n, "scheduler lagged; re-reading open inboxes");
                        let k2 = k.clone();
                        tokio::spawn(async move {
                            if let Err(e) = k2.serve_owed().await {
                                tracing::error!("rescan failed: {e}");
                            }
                        });
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }

    fn spawn_timer_loop(self: &Arc<Self>) {
        let weak: Weak<Self> = Arc::downgrade(self);
        let wake = self.scheduler.timer_wake.clone();
        tokio::spawn(async move {
            loop {
                let Some(k) = weak.upgrade() else { return };
                let (due, next) = k.scheduler.due(now_ms());
                for t in due {
                    let k2 = k.clone();
                    tokio::spawn(async move { k2.on_timer(t).await });
                }
                drop(k);
                let sleep = next.map_or(Duration::from_secs(3600), |at| {
                    Duration::from_millis((at - now_ms()).clamp(0, 3_600_000) as u64)
                });
                tokio::select! {
                    _ = tokio::time::sleep(sleep) => {}
                    _ = wake.notified() => {}
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
    async fn wakeable_agents(&self, workflow_id: i64, names: &Arc<[String]>) -> Result<Vec<i64>> {
        let names = names.clone();
        self.store
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT id, name FROM agents WHERE workflow_id = ?1
                           AND backend <> 'external' AND state <> 'paused'",
                )?;
                // Recipients carry the members' stored names, so they match exactly.
                let wanted: HashSet<&str> = names.iter().map(String::as_str).collect();
                let mut ids = Vec::new();
                let mut rows = st.query([workflow_id])?;
                while let Some(r) = rows.next()? {
                    if wanted.contains(r.get_ref(1)?.as_str().unwrap_or_default()) {
                        ids.push(r.get(0)?);
                    }
                }
                Ok(ids)
            })
            .await
    }

    /// Asks for a run of an agent; see the module docs for what may happen instead.
    pub(crate) async fn admit(self: &Arc<Self>, agent_id: i64, wake: Wake, prompt: Option<String>) {
        if self
            .remember_wake(agent_id, wake.trigger(), prompt.as_deref())
            .is_some()
        {
            return;
        }
        {
            let mut st = self.scheduler.state.lock().unwrap();
            // A retry, or a start under way, will read the inbox: nothing to add.
            if wake == Wake::Message
                && (st.timers.contains_key(&Timer::Retry(agent_id))
                    || st.starting.contains(&agent_id))
            {
                return;
            }
            if self.runs_in_progress() + st.starting.len() >= self.scheduler.limit {
                match st.queue.iter_mut().find(|q| q.agent_id == agent_id) {
                    Some(q) => {
                        if q.prompt.is_none() && prompt.is_some() {
                            (q.wake, q.prompt) = (wake, prompt);
                        }
                    }
                    None => st.queue.push_back(Queued {
                        agent_id,
                        wake,
                        prompt,
                    }),
                }
                return;
            }
            st.starting.insert(agent_id);
        }
        let r = self.gate_and_start(agent_id, wake, prompt).await;
        self.scheduler
            .state
            .lock()
            .unwrap()
            .starting
            .remove(&agent_id);
        if let Err(e) = r {
            tracing::warn!(agent_id, "could not start a run: {e}");
        }
    }

    async fn gate_and_start(
        self: &Arc<Self>,
        agent_id: i64,
        wake: Wake,
        prompt: Option<String>,
    ) -> Result<()> {
        let Some(facts) = self.store.read(move |c| gate_facts(c, agent_id)).await? else {
            return Ok(()); // deleted
        };
        match facts.decide(wake) {
            Gate::Skip => Ok(()),
            Gate::Trip(why) => {
                self.pause_with_reason(
                    agent_id,
                    &facts.workflow,
                    facts.workflow_id,
                    &facts.name,
                    &format!("guard: {why}"),
                    None,
                )
                .await
            }
            Gate::Go => match self
                .start_run(agent_id, wake.trigger(), prompt.clone())
                .await
            {
                Ok(_) => Ok(()),
                // Started by someone else (an ask) between the check and here.
                Err(crate::error::Error::Conflict(_)) => {
                    self.remember_wake(agent_id, wake.trigger(), prompt.as_deref());
                    Ok(())
                }
                Err(e) => Err(e),
            },
        }
    }

    /// Starts queued runs while there is room.
    async fn drain_queue(self: &Arc<Self>) {
        loop {
            let next = {
                let mut st = self.scheduler.state.lock().unwrap();
                if self.runs_in_progress() + st.starting.len() >= self.scheduler.limit {
                    return;
                }
                st.queue.pop_front()
            };
            let Some(q) = next else { return };
            self.admit(q.agent_id, q.wake, q.prompt).await;
        }
    }

    /// Settles what a finished run means for scheduling. Called by the process
    /// manager once the run's row is final, before it reports the run done.
    pub(crate) async fn after_run(
        self: &Arc<Self>,
        agent_id: i64,
        workflow_id: i64,
        end: &RunEnd,
        again: Option<(String, Option<String>)>,
    ) {
        if let Err(e) = self.settle_outcome(agent_id, workflow_id, end, again).await {
            tracing::error!(agent_id, "settling a run's outcome failed: {e}");
        }
        self.drain_queue().await;
    }

    async fn settle_outcome(
        self: &Arc<Self>,
        agent_id: i64,
        workflow_id: i64,
        end: &RunEnd,
        again: Option<(String, Option<String>)>,
    ) -> Result<()> {
        if end.stopped() {
            return Ok(());
        }
        let now = now_ms();
        if end.ok {
            self.scheduler
                .state
                .lock()
                .unwrap()
                .attempts
                .remove(&agent_id);
            // Success: the automatic-pause backoff starts over; an `every` schedule
            // counts from now (it fires after this much idle time).
            let (every, deferred) = self
                .store
                .write(move |c| {
                    c.execute("UPDATE agents SET pauses = 0, state_reason = NULL WHERE id = ?1 AND (pauses <> 0 OR state_reason IS NOT NULL) AND state <> 'paused'", [agent_id])?;
                    let every: Option<String> = c
                        .query_row("SELECT spec FROM schedules WHERE agent_id = ?1 AND kind = 'every'", [agent_id], |r| r.get(0))
                        .optional()?;
                    let next = every
                        .and_then(|s| crate::schedule::Trigger::every(&s).ok())
                        .and_then(|t| t.next_after(now));
                    if let Some(n) = next {
                        c.execute("UPDATE schedules SET next_at = ?2 WHERE agent_id = ?1", (agent_id, n))?;
                    }
                    let deferred: Option<i64> = c.query_row(
                        "SELECT min(d.defer_until) FROM agents a JOIN deliveries d ON d.workflow_id = a.workflow_id
                           AND d.recipient = a.name WHERE a.id = ?1 AND d.state = 'deferred' AND d.defer_until > ?2",
                        (agent_id, now),
                        |r| r.get(0),
                    )?;
                    Ok((next, deferred))
                })
                .await?;
            if let Some(n) = every {
                self.scheduler.arm(Timer::Schedule(agent_id), n);
            }
            if let Some(d) = deferred {
                self.scheduler.arm(Timer::Deferred(agent_id), d);
            }
            if let Some((trigger, prompt)) = again {
                let wake = if trigger == "schedule" {
                    Wake::Schedule
                } else {
                    Wake::Message
                };
                self.admit(agent_id, wake, prompt).await;
            }
            return Ok(());
        }
        let class = end.error_class.unwrap_or(ErrorClass::Other);
        let error = end.error.clone().unwrap_or_else(|| "no error text".into());
        let (wf, name) = self.agent_names_of(agent_id).await?;
        if matches!(class, ErrorClass::Auth | ErrorClass::BillingQuota) {
            self.scheduler
                .state
                .lock()
                .unwrap()
                .attempts
                .remove(&agent_id);
            return self
                .pause_with_reason(
                    agent_id,
                    &wf,
                    workflow_id,
                    &name,
                    &format!("{}: {error}", class.as_str()),
                    Some(now),
                )
                .await;
        }
        let attempt = {
            let mut st = self.scheduler.state.lock().unwrap();
            let n = st.attempts.entry(agent_id).or_default();
            *n += 1;
            *n
        };
        if let Some(delay) = RETRY_DELAYS.get(attempt - 1) {
            tracing::info!(agent = %name, attempt, ?delay, "run failed; retrying");
            self.scheduler
                .arm(Timer::Retry(agent_id), now + delay.as_millis() as i64);
            return Ok(());
        }
        self.scheduler
            .state
            .lock()
            .unwrap()
            .attempts
            .remove(&agent_id);
        let reason = format!(
            "{name} failed {attempt} times in a row; the last error ({}): {error}",
            class.as_str()
        );
        let (wf2, reason2, name2) = (wf.clone(), reason.clone(), name.clone());
        let posted = self
            .store
            .write(move |c| {
                c.execute(
                    "UPDATE agents SET state = 'failed', state_reason = ?2 WHERE id = ?1 AND state <> 'paused'",
                    (agent_id, &reason2),
                )?;
                messaging::post_system(
                    c,
                    workflow_id,
                    &wf2,
                    format!(
                        "@user {reason2}. Its messages stay unread; a new message to @{name2} tries again, and \
                         agent_info shows its runs."
                    ),
                )
            })
            .await?;
        self.announce(workflow_id, &posted);
        self.events.publish(Event::AgentFailed {
            workflow_id,
            reason,
        });
        Ok(())
    }

    async fn agent_names_of(&self, agent_id: i64) -> Result<(WorkflowRef, String)> {
        self.store
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT w.name, w.tag, a.name FROM agents a JOIN workflows w ON w.id = a.workflow_id WHERE a.id = ?1",
                    [agent_id],
                    |r| Ok((WorkflowRef { name: r.get(0)?, tag: r.get(1)? }, r.get(2)?)),
                )?)
            })
            .await
    }

    /// Pauses an agent and tells the lead why. With `auto_from`, the pause is an
    /// automatic one (auth, billing): it resumes by itself after a backoff.
    async fn pause_with_reason(
        self: &Arc<Self>,
        agent_id: i64,
        wf: &WorkflowRef,
        workflow_id: i64,
        name: &str,
        reason: &str,
        auto_from: Option<i64>,
    ) -> Result<()> {
        let (wf2, reason2, name2) = (wf.clone(), reason.to_owned(), name.to_owned());
        let (posted, resume_at) = self
            .store
            .write(move |c| {
                let pauses: i64 = c.query_row("SELECT pauses FROM agents WHERE id = ?1", [agent_id], |r| r.get(0))?;
                let resume_at = auto_from.map(|now| {
                    let wait = PAUSE_FIRST
                        .saturating_mul(1u32 << pauses.clamp(0, 16) as u32)
                        .min(PAUSE_MAX);
                    now + wait.as_millis() as i64
                });
                c.execute(
                    "UPDATE agents SET state = 'paused', state_reason = ?2, resume_at = ?3,
                       pauses = pauses + ?4 WHERE id = ?1",
                    (agent_id, &reason2, resume_at, auto_from.is_some() as i64),
                )?;
                let then = match resume_at {
                    Some(at) => format!(
                        "It tries again by itself at {} (the wait doubles each time, up to 1 h); fix the cause and \
                         agent_resume {name2} to try now.",
                        crate::kernel::clock::fmt_ms(at)
                    ),
                    None => format!(
                        "It stays paused: raise the limit or agent_resume {name2} when you have looked (its unread \
                         messages wait)."
                    ),
                };
                let posted = messaging::post_system(
                    c,
                    workflow_id,
                    &wf2,
                    format!("@user {name2} is paused. {reason2}. {then}"),
                )?;
                Ok((posted, resume_at))
            })
            .await?;
        self.announce(workflow_id, &posted);
        tracing::warn!(agent = %name, %reason, "agent paused");
        if let Some(at) = resume_at {
            self.scheduler.arm(Timer::Resume(agent_id), at);
        }
        self.events.publish(Event::AgentChanged {
            workflow_id,
            name: name.to_owned(),
        });
        Ok(())
    }

    /// The end of an automatic pause: the agent runs again if it has work.
    async fn auto_resume(self: &Arc<Self>, agent_id: i64) -> Result<()> {
        let now = now_ms();
        let resumed = self
            .store
            .write(move |c| {
                Ok(c.execute(
                    "UPDATE agents SET state = 'idle', resume_at = NULL WHERE id = ?1 AND state = 'paused'
                       AND resume_at IS NOT NULL AND resume_at <= ?2",
                    (agent_id, now),
                )? > 0)
            })
            .await?;
        if resumed {
            self.admit(agent_id, Wake::Resume, None).await;
        }
        Ok(())
    }

    /// A manual resume: clears the reason and the automatic resume, gives the agent
    /// fresh attempts, restarts the hop count (the lead looked), and serves its inbox.
    pub(crate) async fn resumed(self: &Arc<Self>, agent_id: i64) -> Result<()> {
        self.scheduler.forget_agent(agent_id);
        self.store
            .write(move |c| {
                c.execute(
                    "UPDATE agents SET state_reason = NULL, resume_at = NULL WHERE id = ?1",
                    [agent_id],
                )?;
                c.execute(
                    "UPDATE workflows SET hops = 0 WHERE id = (SELECT workflow_id FROM agents WHERE id = ?1)",
                    [agent_id],
                )?;
                Ok(())
            })
            .await?;
        self.rearm_schedule(agent_id).await?;
        self.admit(agent_id, Wake::Resume, None).await;
        Ok(())
    }

    /// Drops an agent's queued work and timers (not its schedule row): it was paused,
    /// deleted or registered anew.
    pub(crate) fn scheduler_forget(&self, agent_id: i64) {
        self.scheduler.forget_agent(agent_id);
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
