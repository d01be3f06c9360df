//! What a member's deletion changes in the context, inside the runtime's
//! transaction: an instance's document owner that no longer exists would lock
//! everyone but the lead out, so the ownership goes. The context owns the
//! instance's document settings; only its code writes them.

use domain::error::Result;
use store::sql::Connection;

/// Member `member` of instance `workflow_id` is gone: it owns its documents no more.
pub(crate) fn forget_owner_tx(c: &Connection, workflow_id: i64, member: &str) -> Result<()> {
    c.execute(
        "UPDATE workflows SET document_owner = NULL WHERE id = ?1 AND document_owner = ?2 COLLATE NOCASE",
        (workflow_id, member),
    )?;
    Ok(())
}
