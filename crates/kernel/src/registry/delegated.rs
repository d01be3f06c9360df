//! The agents an agent made (delegation): how many it may keep alive, counted in
//! the write that registers one, and all of them below it.

use domain::error::{Error, Result};
use store::sql;
use store::sql::Connection;

/// Refuses a sub-agent past its parent's `delegate.agents` (inside the write that
/// registers it, so two at once cannot both take the last place).
pub(super) fn room_tx(c: &Connection, parent: i64, most: u32) -> Result<()> {
    let alive: i64 = c.query_row(
        "SELECT count(*) FROM agents WHERE parent_id = ?1",
        [parent],
        |r| r.get(0),
    )?;
    if alive >= i64::from(most) {
        return Err(Error::conflict(format!(
            "delegate.agents: you have {alive} sub-agents alive, the most your definition \
             allows ({most}); delete one (team_agent_delete) or do the work yourself"
        )));
    }
    Ok(())
}

/// Before agent `id` is deleted: what it and the deleted agents below it spent is
/// handed up to the agent that made it, whose budget and share it still counts
/// against (a deleted sub-agent cannot make room for a fresh one's spending).
pub(crate) fn hand_spending_up_tx(c: &Connection, id: i64) -> Result<()> {
    c.execute(
        "UPDATE agents SET
           gone_tokens = gone_tokens + (SELECT CAST(coalesce(sum(input_tokens + output_tokens), 0) AS BIGINT) FROM runs WHERE agent_id = ?1)
                         + (SELECT gone_tokens FROM agents WHERE id = ?1),
           gone_usd = gone_usd + (SELECT coalesce(sum(cost_usd), 0) FROM runs WHERE agent_id = ?1)
                      + (SELECT gone_usd FROM agents WHERE id = ?1)
         WHERE id = (SELECT parent_id FROM agents WHERE id = ?1)",
        [id],
    )?;
    Ok(())
}

/// Whether `name` in instance `wid` is an agent another agent made: it is never
/// the member or approver its name would say.
pub(crate) fn is_sub_agent_tx(c: &Connection, wid: i64, name: &str) -> Result<bool> {
    Ok(c.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM agents WHERE workflow_id = ?1 AND name = ?2
                        AND parent_id IS NOT NULL)",
    )?
    .query_row((wid, name), |r| r.get(0))?)
}

/// The agents `id` made, and theirs, deepest first (a deletion goes in this order).
pub(crate) fn sub_agents(c: &Connection, id: i64) -> Result<Vec<i64>> {
    let mut out = Vec::new();
    let mut level = vec![id];
    while !level.is_empty() && out.len() < 10_000 {
        let mut next = Vec::new();
        for p in level {
            let mut st = c.prepare_cached("SELECT id FROM agents WHERE parent_id = ?1")?;
            let kids = st
                .query_map([p], |r| r.get(0))?
                .collect::<sql::Result<Vec<i64>>>()?;
            next.extend(kids);
        }
        out.extend(next.iter().copied());
        level = next;
    }
    out.reverse();
    Ok(out)
}
