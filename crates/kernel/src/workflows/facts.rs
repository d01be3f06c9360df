//! What the workflows room reads about an instance in one go: its row, each
//! agent's facts (for a status and for the idle check) and its open binding
//! proposals.

use super::AgentSummary;
use crate::runtime::scheduler::open_deliveries;
use crate::runtime::schedules::polls;
use domain::clock::fmt_ms;
use domain::error::Result;
use domain::protocol::Usage;
use domain::states::WorkflowState;
use store::sql;
use store::sql::Connection;

pub(super) struct Row {
    pub(super) state: WorkflowState,
    pub(super) reason: Option<String>,
    pub(super) started_at: Option<i64>,
    pub(super) ended_at: Option<i64>,
}

pub(super) fn workflow_row(c: &Connection, wid: i64) -> Result<Row> {
    Ok(c.query_row(
        "SELECT state, reason, started_at, ended_at FROM workflows WHERE id = ?1",
        [wid],
        |r| {
            Ok(Row {
                state: r.parse(0)?,
                reason: r.get(1)?,
                started_at: r.get(2)?,
                ended_at: r.get(3)?,
            })
        },
    )?)
}

/// One agent's facts for a status and for the idle check.
pub(super) struct AgentFacts {
    pub(super) id: i64,
    pub(super) summary: AgentSummary,
    /// A scheduled run is owed: others posted since its schedule last fired or it
    /// last ran.
    pub(super) schedule_owed: bool,
    /// Its schedule is a poll: it runs only when something waits for it.
    pub(super) polls: bool,
    /// A run of it is in progress, on whichever node runs it (by the store).
    pub(super) running: bool,
}

/// The facts of instance `wid`'s agents, their inboxes as they stand at `now`.
pub(super) fn agent_facts(c: &Connection, wid: i64, now: i64) -> Result<Vec<AgentFacts>> {
    let mut st = c.prepare(
        "SELECT a.id, a.name, a.backend, a.state, a.state_reason, a.resume_at, s.next_at,
                s.agent_id IS NOT NULL,
                (SELECT count(*) FROM runs r WHERE r.agent_id = a.id),
                (SELECT count(*) FROM runs r WHERE r.agent_id = a.id AND r.status IN ('failed', 'lost')),
                (SELECT CAST(coalesce(sum(input_tokens), 0) AS BIGINT) FROM runs r WHERE r.agent_id = a.id),
                (SELECT CAST(coalesce(sum(output_tokens), 0) AS BIGINT) FROM runs r WHERE r.agent_id = a.id),
                (SELECT sum(cost_usd) FROM runs r WHERE r.agent_id = a.id),
                a.node,
                EXISTS (SELECT 1 FROM runs r WHERE r.agent_id = a.id AND r.status = 'running'),
                s.kind, s.prompt
         FROM agents a LEFT JOIN schedules s ON s.agent_id = a.id
         WHERE a.workflow_id = ?1 ORDER BY a.id",
    )?;
    // (id, scheduled, running, polls, summary without the pending count)
    let rows = st
        .query_map([wid], |r| {
            let summary = AgentSummary {
                name: r.get(1)?,
                backend: r.get(2)?,
                state: r.parse(3)?,
                reason: r.get(4)?,
                resume_at: r.get::<Option<i64>>(5)?.map(fmt_ms),
                next_wake: r.get::<Option<i64>>(6)?.map(fmt_ms),
                runs: r.get(8)?,
                failed_runs: r.get(9)?,
                pending: 0,
                node: r.get(13)?,
                usage: Usage {
                    input_tokens: r.get::<i64>(10)? as u64,
                    output_tokens: r.get::<i64>(11)? as u64,
                    cost_usd: r.get(12)?,
                },
            };
            Ok((
                r.get::<i64>(0)?,
                r.get::<bool>(7)?,
                r.get::<bool>(14)?,
                polls(
                    &r.get::<Option<String>>(15)?.unwrap_or_default(),
                    r.get::<Option<String>>(16)?.as_deref(),
                ),
                summary,
            ))
        })?
        .collect::<sql::Result<Vec<_>>>()?;
    let mut out = Vec::new();
    for (id, scheduled, running, polls, mut summary) in rows {
        summary.pending = open_deliveries(c, wid, &summary.name, now)?;
        // A schedule starts no run of a member without a worker: it owes nothing.
        let schedule_owed = scheduled
            && !crate::registry::has_no_worker(&summary.backend)
            && crate::runtime::schedules::unseen(c, id)?;
        out.push(AgentFacts {
            id,
            schedule_owed,
            polls,
            running,
            summary,
        });
    }
    Ok(out)
}

pub(super) fn open_binding_proposals(c: &Connection, wid: i64) -> Result<i64> {
    Ok(c.query_row(
        "SELECT count(*) FROM proposals WHERE workflow_id = ?1 AND status = 'open' AND binding = 1",
        [wid],
        |r| r.get(0),
    )?)
}
