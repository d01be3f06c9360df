//! Governance: the contracts in force, what they decided, and approvals as rows.
//!
//! This room sits just above the registry so that every room that acts on an
//! event can consult it: messaging (message contracts), context (doc_write), the
//! runtime (tool requests from workers, spend and run_end after a run, approval
//! decisions). It owns four tables and posts nothing itself: the room that acts
//! writes its announcement in the same transaction.
//!
//! - [`contracts`]: rows, hot-loaded into an in-memory set on every change (a
//!   send consults memory, never the store), and the decision log.
//! - [`approvals`]: a pending approval, its votes, its resolution; timers and
//!   waiting live in the runtime (`runtime::requests`).
//! - [`rates`]: what contracts with a rate let through, counted in the event's
//!   own transaction.

pub mod approvals;
#[cfg(test)]
mod approvals_tests;
pub mod contracts;
#[cfg(test)]
mod contracts_tests;
pub mod rates;

use domain::error::Result;
use store::sql::Connection;

/// Replaces instance `owner`'s own contracts (those of the file it runs now, from
/// `source`) with `contracts`, at `now`, inside the caller's store job.
pub(crate) fn replace_own_contracts_tx(
    c: &Connection,
    owner: i64,
    source: &str,
    contracts: &[(String, serde_json::Value)],
    now: i64,
) -> Result<()> {
    c.execute(
        "DELETE FROM contracts WHERE owner_workflow_id = ?1",
        [owner],
    )?;
    for (name, spec) in contracts {
        contracts::put_tx(c, Some(owner), source, spec, name, now)?;
    }
    Ok(())
}
