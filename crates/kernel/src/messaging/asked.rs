//! What other rooms ask messaging to write in their own transactions: messaging
//! owns the deliveries and the send guard's hop count, so their rules stay here.

use domain::error::Result;
use store::sql::Connection;

/// Withdraws the unread deliveries of messages `ids` of instance `wid` (a step's
/// prompt that no longer stands): they leave every inbox that has not read them,
/// and the results they asked for, if unanswered, are no longer awaited.
pub(crate) fn withdraw_tx(c: &Connection, wid: i64, ids: &[String]) -> Result<()> {
    let mut st =
        c.prepare_cached("DELETE FROM deliveries WHERE workflow_id = ?1 AND message_id = ?2")?;
    for id in ids {
        st.execute((wid, id))?;
        super::results::close_tx(c, wid, id)?;
    }
    Ok(())
}

/// Starts instance `wid`'s hop count afresh (a workflow run's start).
pub(crate) fn reset_hops_tx(c: &Connection, wid: i64) -> Result<()> {
    c.execute("UPDATE workflows SET hops = 0 WHERE id = ?1", [wid])?;
    Ok(())
}
