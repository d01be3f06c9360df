//! What contracts with a rate count: the events each let through, per agent and
//! instance, within its window (`contract_hits`). Read and written inside the
//! transaction of the event itself, so two events of one agent never both pass
//! the last place, and a message refused for any reason never counts.
//!
//! Counts are kept by contract name: a workflow's own contract named like one of
//! the lead's shares its count (each is judged by its own rate), and an event counts
//! once per name. Rows older than the longest window (7 days) go as new ones come.

use domain::contracts::{self, Contract, Event, MAX_RATE_WINDOW};
use domain::error::Result;
use std::time::Duration;
use store::sql::{self, Connection};

/// The rate contracts among `contracts` that `e` matches and has passed: the
/// agent already had `more_than` events through them within their windows. Where
/// none of a name has passed, `e` counts now. Returns the names of the passed
/// ones, for [`contracts::decide_rated`].
pub fn count_tx<'c>(
    c: &Connection,
    workflow_id: i64,
    agent: &str,
    contracts: impl IntoIterator<Item = &'c Contract>,
    e: &Event<'_>,
    now: i64,
) -> Result<Vec<String>> {
    let rated = contracts::rated(contracts, e);
    if rated.is_empty() {
        return Ok(Vec::new());
    }
    c.prepare_cached("DELETE FROM contract_hits WHERE workflow_id = ?1 AND at <= ?2")?
        .execute_later(sql::params![workflow_id, now - window_ms(MAX_RATE_WINDOW)])?;
    let mut names: Vec<&str> = rated.iter().map(|k| k.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut past = Vec::new();
    for name in names {
        let mut passed = false;
        for k in rated.iter().filter(|k| k.name == name) {
            let Some(rate) = k.rate else { continue };
            let n = count(c, workflow_id, name, agent, now - window_ms(rate.within))?;
            passed |= n >= i64::from(rate.more_than);
        }
        if passed {
            past.push(name.to_owned());
        } else {
            c.prepare_cached(
                "INSERT INTO contract_hits (workflow_id, contract, agent, at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute_later(sql::params![workflow_id, name, agent, now])?;
        }
    }
    Ok(past)
}

/// The events `name` let through for `agent` since `since` (ms).
fn count(c: &Connection, workflow_id: i64, name: &str, agent: &str, since: i64) -> Result<i64> {
    Ok(c.prepare_cached(
        "SELECT count(*) FROM contract_hits
          WHERE workflow_id = ?1 AND contract = ?2 AND agent = ?3 AND at > ?4",
    )?
    .query_row(sql::params![workflow_id, name, agent, since], |r| r.get(0))?)
}

fn window_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
