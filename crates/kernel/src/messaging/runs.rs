//! What the runtime asks of messaging's tables around a run, inside the runtime's
//! own transaction: how many deliveries wait for an agent, what a run read settled
//! by how it ended, a taken-over agent's reads made pending again, a deleted
//! member's deliveries, status and cursors gone, and the hop count restarted when
//! the lead resumes an agent. Messaging owns these tables; only its code writes them.

use super::broadcast;
use super::inbox::{Settle, settle};
use domain::error::Result;
use store::sql::Connection;

/// Deliveries an agent should handle at `now`: pending, seen, or deferred and
/// due, and the broadcasts not yet written as its rows (pending).
pub(crate) fn open_deliveries(
    c: &Connection,
    workflow_id: i64,
    name: &str,
    now: i64,
) -> Result<i64> {
    let rows: i64 = c
        .prepare_cached(
            "SELECT count(*) FROM deliveries WHERE workflow_id = ?1 AND recipient = ?2 AND state <> 'acked'
               AND (state <> 'deferred' OR defer_until <= ?3)",
        )?
        .query_row((workflow_id, name, now), |r| r.get(0))?;
    Ok(rows + broadcast::unwritten(c, workflow_id, name)?)
}

/// A run of `agent` ended: what it read is acked after a success, pending again
/// otherwise (only one run per agent is ever active, so these are its own).
pub(crate) fn settle_run_tx(
    c: &Connection,
    workflow_id: i64,
    agent: &str,
    ok: bool,
    now: i64,
) -> Result<()> {
    if ok {
        settle(c, workflow_id, agent, Settle::Seen, now)?;
        return Ok(());
    }
    c.execute(
        "UPDATE deliveries SET state = 'pending', updated_at = ?3
         WHERE workflow_id = ?1 AND recipient = ?2 AND state = 'seen'",
        store::sql::params![workflow_id, agent, now],
    )?;
    Ok(())
}

/// An agent taken over from a node that is gone: what it had read is pending
/// again, for its new node's next run.
pub(crate) fn requeue_seen_tx(c: &Connection, workflow_id: i64, agent: &str) -> Result<()> {
    c.execute(
        "UPDATE deliveries SET state = 'pending'
          WHERE workflow_id = ?1 AND recipient = ?2 AND state = 'seen'",
        (workflow_id, agent),
    )?;
    Ok(())
}

/// A member deleted: its deliveries (open and done), its status and its read
/// cursor go with it.
pub(crate) fn forget_member_tx(c: &Connection, workflow_id: i64, member: &str) -> Result<()> {
    for table in ["deliveries", "deliveries_done"] {
        c.execute(
            &format!("DELETE FROM {table} WHERE workflow_id = ?1 AND recipient = ?2"),
            (workflow_id, member),
        )?;
    }
    c.execute(
        "DELETE FROM member_status WHERE workflow_id = ?1 AND member = ?2",
        (workflow_id, member),
    )?;
    c.execute(
        "DELETE FROM read_cursors WHERE workflow_id = ?1 AND reader = ?2",
        (workflow_id, member),
    )?;
    Ok(())
}

/// The lead resumed an agent (it looked): its instance's hop count starts over.
pub(crate) fn restart_hops_tx(c: &Connection, agent_id: i64) -> Result<()> {
    c.execute(
        "UPDATE workflows SET hops = 0 WHERE id = (SELECT workflow_id FROM agents WHERE id = ?1)",
        [agent_id],
    )?;
    Ok(())
}
