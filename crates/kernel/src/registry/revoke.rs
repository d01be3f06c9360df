//! Tokens revoked by what the runtime does, inside its transaction: a run's token
//! when the run ends (or is closed as lost), every token of an agent deleted. The
//! registry owns the `tokens` table; only its code writes it.

use domain::error::Result;
use store::sql::Connection;

/// Revokes the token minted for run `run_id`, at `now`.
pub(crate) fn run_tx(c: &Connection, run_id: &str, now: i64) -> Result<()> {
    c.execute(
        "UPDATE tokens SET revoked_at = ?2 WHERE run_id = ?1 AND revoked_at IS NULL",
        (run_id, now),
    )?;
    Ok(())
}

/// Revokes every token of agent `agent_id`, at `now`.
pub(crate) fn agent_tx(c: &Connection, agent_id: i64, now: i64) -> Result<()> {
    c.execute(
        "UPDATE tokens SET revoked_at = ?2 WHERE agent_id = ?1 AND revoked_at IS NULL",
        (agent_id, now),
    )?;
    Ok(())
}
