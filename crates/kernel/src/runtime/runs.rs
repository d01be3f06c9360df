//! The run records: one `runs` row per worker run, from spawn to outcome.
//!
//! A run ends in exactly one transaction ([`finish_tx`]) that also settles what the
//! run touched: its token is revoked, the deliveries it read are acked if it
//! succeeded or returned to pending if it did not (so a failed run loses nothing),
//! and the agent's state and resumable session are updated.

use crate::messaging::broadcast;
use crate::messaging::runs::{open_deliveries, settle_run_tx};
use domain::clock::fmt_ms;
use domain::error::Result;
use domain::protocol::{ErrorClass, Usage};
use domain::states::{RunStatus, Wake};
use schemars::JsonSchema;
use serde::Serialize;
use store::sql;
use store::sql::{Connection, OptionalExtension, Row};

/// How many runs agent_info shows.
pub const RECENT_RUNS: i64 = 10;

/// A run as tools show it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunView {
    pub id: String,
    /// Why it started: message (its inbox woke it), ask, schedule, retry or resume.
    pub trigger: String,
    /// What it was started with, in a line: its prompt, or the messages waiting
    /// in its inbox (how many, from whom, the first one's start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_summary: Option<String>,
    /// running, succeeded, failed, stopped or lost.
    pub status: domain::states::RunStatus,
    pub started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// auth, billing_quota, rate_limit, network, timeout, crash, stopped, lost or other.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
    /// The error in the backend's own words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub usage: Usage,
    /// The worker's private final text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
    /// The end of the worker's stderr, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// Tool calls the agent's permissions refused during the run (nothing of them
    /// happened).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub denials: Vec<Denial>,
    /// The commit of what it left in its agent's worktree (worktree agents).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The trace its spans are in, when traces are exported (OTLP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

/// A tool call refused by the agent's permissions.
#[derive(Debug, Clone, Serialize, serde::Deserialize, JsonSchema, PartialEq)]
pub struct Denial {
    /// The tool, in the backend's own name (write_file, Bash, run_shell_command…).
    pub tool: String,
    /// What it was for: the path or the command.
    pub detail: String,
    pub reason: String,
}

/// At most this many refusals are kept per run.
pub const MAX_DENIALS: usize = 50;

pub const RUN_COLUMNS: &str = "id, trigger, status, started_at, ended_at, exit_code, error_class, error, input_tokens, output_tokens, cost_usd, final_text, stderr_tail, denials, prompt_summary, commit_sha, trace_id";

pub fn run_row(r: &Row) -> sql::Result<RunView> {
    let started: i64 = r.get(3)?;
    let ended: Option<i64> = r.get(4)?;
    let status: RunStatus = r.parse(2)?;
    let stderr: Option<String> = r.get(12)?;
    Ok(RunView {
        id: r.get(0)?,
        trigger: r.get(1)?,
        started_at: fmt_ms(started),
        ended_at: ended.map(fmt_ms),
        duration_ms: ended.map(|e| e - started),
        exit_code: r.get(5)?,
        error_class: r.get(6)?,
        error: r.get(7)?,
        usage: Usage {
            input_tokens: r.get::<i64>(8)? as u64,
            output_tokens: r.get::<i64>(9)? as u64,
            cost_usd: r.get(10)?,
        },
        final_text: r.get(11)?,
        stderr: stderr.filter(|s| !s.is_empty() && status != RunStatus::Succeeded),
        denials: r
            .get::<Option<String>>(13)?
            .and_then(|d| serde_json::from_str(&d).ok())
            .unwrap_or_default(),
        prompt_summary: r.get(14)?,
        commit: r.get(15)?,
        trace_id: r.get(16)?,
        status,
    })
}

pub fn get_run(c: &Connection, id: &str) -> Result<Option<RunView>> {
    use store::sql::OptionalExtension;
    Ok(
        c.prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))?
            .query_row([id], run_row)
            .optional()?,
    )
}

pub fn recent_runs(c: &Connection, agent_id: i64, limit: i64) -> Result<Vec<RunView>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE agent_id = ?1 ORDER BY started_at DESC, id DESC LIMIT ?2"
    ))?;
    let rows = st
        .query_map((agent_id, limit), run_row)?
        .collect::<sql::Result<Vec<_>>>()?;
    Ok(rows)
}

/// The latest `per_agent` runs of each agent of a workflow instance, in one
/// read: (agent, run), each agent's newest first.
pub fn recent_of_workflow(
    c: &Connection,
    workflow_id: i64,
    per_agent: i64,
) -> Result<Vec<(String, RunView)>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS}, agent FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY agent_id \
         ORDER BY started_at DESC, id DESC) AS n FROM runs WHERE workflow_id = ?1) r \
         WHERE n <= ?2 ORDER BY agent, started_at DESC, id DESC"
    ))?;
    let rows = st
        .query_map((workflow_id, per_agent), |r| {
            // After the run's columns (run_row reads them by position).
            let agent: String = r.get(RUN_COLUMNS.split(',').count())?;
            Ok((agent, run_row(r)?))
        })?
        .collect::<sql::Result<Vec<_>>>()?;
    Ok(rows)
}

/// Totals over every run of an agent.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct RunTotals {
    pub runs: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub usage: Usage,
}

pub fn totals(c: &Connection, agent_id: i64) -> Result<RunTotals> {
    Ok(c.query_row(
        "SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'),
                count(*) FILTER (WHERE status IN ('failed', 'lost')),
                CAST(coalesce(sum(input_tokens), 0) AS BIGINT), CAST(coalesce(sum(output_tokens), 0) AS BIGINT), sum(cost_usd)
         FROM runs WHERE agent_id = ?1",
        [agent_id],
        |r| {
            Ok(RunTotals {
                runs: r.get(0)?,
                succeeded: r.get(1)?,
                failed: r.get(2)?,
                usage: Usage {
                    input_tokens: r.get::<i64>(3)? as u64,
                    output_tokens: r.get::<i64>(4)? as u64,
                    cost_usd: r.get(5)?,
                },
            })
        },
    )?)
}

/// The row written when a run starts.
pub struct NewRun<'a> {
    pub id: &'a str,
    pub agent_id: i64,
    pub workflow_id: i64,
    pub agent: &'a str,
    pub backend: &'a str,
    pub trigger: &'a str,
    /// The prompt it is started with, if any (else its inbox is summarised).
    pub prompt: Option<&'a str>,
    /// The node starting it: it must hold the agent's lease.
    pub node: &'a str,
    /// The trace of its span, when traces are exported.
    pub trace_id: Option<&'a str>,
    /// When it starts, by the kernel's clock.
    pub now: i64,
}

pub fn insert_tx(c: &Connection, r: &NewRun) -> Result<()> {
    // The lease, checked where it counts: in the write that records the run, after
    // every other node's writes (one write lock). An agent runs on one node, once.
    let mine: bool = c.query_row(
        "SELECT EXISTS (SELECT 1 FROM agents WHERE id = ?1 AND node = ?2)
            AND NOT EXISTS (SELECT 1 FROM runs WHERE agent_id = ?1 AND status = 'running')",
        sql::params![r.agent_id, r.node],
        |row| row.get(0),
    )?;
    if !mine {
        return Err(domain::error::Error::conflict(format!(
            "{} is not node {}'s to run now (its lease moved, or a run of it is in progress)",
            r.agent, r.node
        )));
    }
    // The run reads its inbox: its broadcasts become rows it can mark and settle.
    broadcast::write_own(c, r.workflow_id, r.agent, r.now)?;
    // A message's wake (or a poll's), checked where it counts too: the scheduler
    // decided on what it read before, and the run it waited for may have read and
    // acked the messages since; a run now would read nothing.
    let (message, poll) = (Wake::Message.as_str(), Wake::Poll.as_str());
    let nothing_waits = || -> Result<bool> {
        Ok(open_deliveries(c, r.workflow_id, r.agent, r.now)? == 0
            && (r.trigger == message || !crate::runtime::schedules::unseen(c, r.agent_id)?))
    };
    if (r.trigger == message || r.trigger == poll) && nothing_waits()? {
        return Err(domain::error::Error::conflict(format!(
            "nothing is waiting for {} any more: a run has read it",
            r.agent
        )));
    }
    // The run reads the recent channel: a poll owes it nothing posted before now.
    crate::runtime::schedules::mark_seen_tx(c, r.agent_id)?;
    let summary = prompt_summary_tx(c, r)?;
    c.execute(
        "INSERT INTO runs (id, agent_id, workflow_id, agent, backend, trigger, started_at, prompt_summary, trace_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        sql::params![
            r.id,
            r.agent_id,
            r.workflow_id,
            r.agent,
            r.backend,
            r.trigger,
            r.now,
            summary,
            r.trace_id
        ],
    )?;
    c.execute(
        "UPDATE agents SET state = 'running' WHERE id = ?1 AND state <> 'paused'",
        [r.agent_id],
    )?;
    Ok(())
}

/// A run's start in a line: its prompt, or what waits in the agent's inbox.
fn prompt_summary_tx(c: &Connection, r: &NewRun) -> Result<Option<String>> {
    const LEN: usize = 160;
    let clip = |s: &str| -> String {
        let one = s.split_whitespace().collect::<Vec<_>>().join(" ");
        match one.char_indices().nth(LEN) {
            Some((i, _)) => format!("{}…", &one[..i]),
            None => one,
        }
    };
    if let Some(p) = r.prompt.filter(|p| !p.trim().is_empty()) {
        return Ok(Some(format!("prompt: {}", clip(p))));
    }
    let (n, senders, first): (i64, Option<String>, Option<String>) = c.query_row(
        SUMMARY,
        sql::params![r.workflow_id, r.agent, r.now],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )?;
    Ok((n > 0).then(|| {
        format!(
            "{n} message{} in its inbox from {}: {}",
            if n == 1 { "" } else { "s" },
            senders.unwrap_or_default().replace(',', ", "),
            clip(&first.unwrap_or_default())
        )
    }))
}

/// The count of `?2`'s due deliveries in instance `?1` at `?3`, their senders, and
/// the oldest one's text. Messages are joined by `+ 0` for the reason
/// `messaging::inbox::READ` gives.
pub(crate) const SUMMARY: &str = "
    SELECT count(*), group_concat(DISTINCT m.sender),
           (SELECT m2.content FROM deliveries d2 JOIN messages m2
               ON m2.workflow_id = d2.workflow_id + 0 AND m2.id = d2.message_id
             WHERE d2.workflow_id = ?1 AND d2.recipient = ?2 AND d2.state <> 'acked'
               AND (d2.state <> 'deferred' OR d2.defer_until <= ?3)
             ORDER BY d2.message_id LIMIT 1)
      FROM deliveries d JOIN messages m ON m.workflow_id = d.workflow_id + 0 AND m.id = d.message_id
     WHERE d.workflow_id = ?1 AND d.recipient = ?2 AND d.state <> 'acked'
       AND (d.state <> 'deferred' OR d.defer_until <= ?3)";

pub fn set_pid_tx(c: &Connection, id: &str, pid: u32, start: Option<u64>) -> Result<()> {
    c.execute(
        "UPDATE runs SET pid = ?2, pid_start = ?3 WHERE id = ?1",
        sql::params![id, pid, start.map(|s| s as i64)],
    )?;
    Ok(())
}

/// How a run ended, as the process manager saw it.
#[derive(Debug, Clone, Default)]
pub struct RunEnd {
    pub ok: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub error_class: Option<ErrorClass>,
    pub error: Option<String>,
    pub usage: Usage,
    pub final_text: Option<String>,
    pub session_id: Option<String>,
    /// The backend's count for the whole session, when it reports one.
    pub session_total: Option<Usage>,
    pub stderr_tail: String,
    pub denials: Vec<Denial>,
    /// The commit of what it left in its agent's worktree.
    pub commit: Option<String>,
}

impl RunEnd {
    /// Ended on purpose (pause, delete, shutdown), not by failing.
    pub fn stopped(&self) -> bool {
        self.error_class == Some(ErrorClass::Stopped)
    }

    /// The run's final status: succeeded, stopped or failed.
    pub fn status(&self) -> RunStatus {
        if self.ok {
            RunStatus::Succeeded
        } else if self.stopped() {
            RunStatus::Stopped
        } else {
            RunStatus::Failed
        }
    }
}

/// Whose spending [`spent`] sums.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Spender {
    /// An agent with the agents it made (delegation), theirs, and so on: its
    /// sub-agents spend from its budget.
    Agent(i64),
    /// Only the agents it made and theirs (their share, `delegate.budget`).
    SubAgents(i64),
    Workflow(i64),
}

/// An agent and the agents below it (delegation), as a recursive CTE `tree(id)`.
const TREE: &str = "WITH RECURSIVE tree(id) AS (SELECT CAST(?1 AS BIGINT) UNION ALL \
                    SELECT a.id FROM agents a JOIN tree t ON a.parent_id = t.id) ";

/// What the deleted agents below the tree's agents spent (handed up at each deletion).
const GONE_TOKENS: &str = "(SELECT CAST(coalesce(sum(gone_tokens), 0) AS BIGINT) FROM agents WHERE id IN (SELECT id FROM tree))";
const GONE_USD: &str =
    "(SELECT coalesce(sum(gone_usd), 0) FROM agents WHERE id IN (SELECT id FROM tree))";

/// What runs have used so far: (input + output tokens, cost in US dollars).
pub(crate) fn spent(c: &Connection, who: Spender) -> Result<(u64, f64)> {
    let (sql, id) = match who {
        Spender::Agent(id) => {
            return sum_of(
                c,
                &format!(
                    "{TREE}SELECT (SELECT CAST(coalesce(sum(input_tokens + output_tokens), 0) AS BIGINT) FROM runs WHERE agent_id IN (SELECT id FROM tree)) + {GONE_TOKENS},
                            (SELECT coalesce(sum(cost_usd), 0) FROM runs WHERE agent_id IN (SELECT id FROM tree)) + {GONE_USD}"
                ),
                id,
            );
        }
        Spender::SubAgents(id) => {
            return sum_of(
                c,
                &format!(
                    "{TREE}SELECT (SELECT CAST(coalesce(sum(input_tokens + output_tokens), 0) AS BIGINT) FROM runs WHERE agent_id IN (SELECT id FROM tree) AND agent_id <> ?1) + {GONE_TOKENS},
                            (SELECT coalesce(sum(cost_usd), 0) FROM runs WHERE agent_id IN (SELECT id FROM tree) AND agent_id <> ?1) + {GONE_USD}"
                ),
                id,
            );
        }
        Spender::Workflow(id) => (
            "SELECT CAST(coalesce(sum(input_tokens + output_tokens), 0) AS BIGINT), coalesce(sum(cost_usd), 0) FROM runs WHERE workflow_id = ?1",
            id,
        ),
    };
    sum_of(c, sql, id)
}

fn sum_of(c: &Connection, sql: &str, id: i64) -> Result<(u64, f64)> {
    Ok(c.prepare_cached(sql)?
        .query_row([id], |r| Ok((r.get::<i64>(0)? as u64, r.get::<f64>(1)?)))?)
}

/// Why an agent that another made may not run now: one of the agents above it
/// (its parent, theirs, ...) has used its own budget, with what it made, or the
/// share it gave them (`delegate.budget`). None for an agent nobody made.
pub(crate) fn delegation_over(c: &Connection, agent_id: i64) -> Result<Option<String>> {
    let mut at = agent_id;
    for _ in 0..=domain::delegate::MAX_DEPTH {
        let up: Option<(i64, String, String)> = c
            .prepare_cached(
                "SELECT p.id, p.name, p.config FROM agents a JOIN agents p ON p.id = a.parent_id WHERE a.id = ?1",
            )?
            .query_row([at], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        let Some((parent, name, config)) = up else {
            return Ok(None);
        };
        let config: crate::registry::config::AgentConfig =
            serde_json::from_str(&config).unwrap_or_default();
        if let Some(b) = config
            .budget
            .filter(|b| b.max_tokens.is_some() || b.max_cost_usd.is_some())
        {
            let (t, u) = spent(c, Spender::Agent(parent))?;
            if let Some(why) = over(
                &format!("{name} with its sub-agents"),
                b.max_tokens,
                b.max_cost_usd,
                (t, u),
                "budget",
            ) {
                return Ok(Some(why));
            }
        }
        if let Some(s) = config.delegate.and_then(|d| d.budget) {
            let (t, u) = spent(c, Spender::SubAgents(parent))?;
            if let Some(why) = over(
                &format!("the sub-agents of {name}"),
                s.max_tokens,
                s.max_cost_usd,
                (t, u),
                "delegate.budget",
            ) {
                return Ok(Some(why));
            }
        }
        at = parent;
    }
    Ok(None)
}

/// Why `who` is over a token or cost limit (`field`.max_tokens, .max_cost_usd).
pub(crate) fn over(
    who: &str,
    tokens: Option<u64>,
    usd: Option<f64>,
    (t, u): (u64, f64),
    field: &str,
) -> Option<String> {
    if let Some(max) = tokens
        && t >= max
    {
        return Some(format!(
            "{who} used {t} tokens, the limit is {max} ({field}.max_tokens)"
        ));
    }
    if let Some(max) = usd
        && u >= max
    {
        return Some(format!(
            "{who} used ${u:.4}, the limit is ${max} ({field}.max_cost_usd)"
        ));
    }
    None
}

/// Closes a run and settles everything it touched, in one transaction.
pub fn finish_tx(
    c: &Connection,
    run_id: &str,
    agent_id: i64,
    workflow_id: i64,
    agent: &str,
    (end, now): (&RunEnd, i64),
) -> Result<()> {
    let status = end.status();
    let ended = c.execute(
        "UPDATE runs SET status = ?2, ended_at = ?3, exit_code = ?4, signal = ?5, error_class = ?6,
                error = ?7, input_tokens = ?8, output_tokens = ?9, cost_usd = ?10, final_text = ?11,
                stderr_tail = ?12, denials = ?13, commit_sha = ?14
         WHERE id = ?1 AND status = 'running'",
        sql::params![
            run_id,
            status.as_str(),
            now,
            end.exit_code,
            end.signal,
            end.error_class.map(ErrorClass::as_str),
            end.error,
            end.usage.input_tokens as i64,
            end.usage.output_tokens as i64,
            end.usage.cost_usd,
            end.final_text,
            end.stderr_tail,
            (!end.denials.is_empty())
                .then(|| serde_json::to_string(&end.denials).ok())
                .flatten(),
            end.commit,
        ],
    )?;
    crate::registry::revoke::run_tx(c, run_id, now)?;
    if ended == 0 {
        // Closed as lost already: its node was taken over, and what it had read is
        // another node's to settle now.
        return Ok(());
    }
    // What the run read is settled by its outcome: acked after success, pending
    // again otherwise. Only one run per agent is ever active, so these are its own.
    settle_run_tx(c, workflow_id, agent, end.ok, now)?;
    c.execute(
        "UPDATE agents SET state = 'idle' WHERE id = ?1 AND state = 'running'",
        [agent_id],
    )?;
    if end.ok
        && let Some(s) = &end.session_id
    {
        let total = end
            .session_total
            .and_then(|u| serde_json::to_string(&u).ok());
        c.execute(
            "UPDATE agents SET session_id = ?2, session_usage = ?3 WHERE id = ?1",
            (agent_id, s, total),
        )?;
    }
    Ok(())
}

/// A run a previous kernel left `running`.
pub struct Orphan {
    pub id: String,
    pub pid: Option<u32>,
    pub pid_start: Option<u64>,
}

pub fn orphans(c: &Connection, node: &str) -> Result<Vec<Orphan>> {
    let mut st = c.prepare(
        "SELECT r.id, r.pid, r.pid_start FROM runs r JOIN agents a ON a.id = r.agent_id
          WHERE r.status = 'running' AND a.node = ?1",
    )?;
    let rows = st
        .query_map([node], |r| {
            Ok(Orphan {
                id: r.get(0)?,
                pid: r.get::<Option<i64>>(1)?.map(|p| p as u32),
                pid_start: r.get::<Option<i64>>(2)?.map(|p| p as u64),
            })
        })?
        .collect::<sql::Result<Vec<_>>>()?;
    Ok(rows)
}

/// Closes runs left by a kernel that stopped (this node's previous life, or a node
/// taken over) as `lost`. Their deliveries go back to pending by the restart rule;
/// their tokens die with them; their agents are idle.
pub fn close_lost_tx(c: &Connection, ids: &[String], now: i64) -> Result<()> {
    for id in ids {
        c.execute(
            "UPDATE agents SET state = 'idle'
              WHERE state = 'running' AND id = (SELECT agent_id FROM runs WHERE id = ?1)",
            [id],
        )?;
        c.execute(
            "UPDATE runs SET status = 'lost', ended_at = ?2, error_class = 'lost',
                    error = 'the kernel running it stopped while this run was in progress'
             WHERE id = ?1",
            (id, now),
        )?;
        crate::registry::revoke::run_tx(c, id, now)?;
    }
    Ok(())
}
