//! What contracts with a rate count: the events each let through, per agent and
//! instance, within its window (`contract_hits`). Read and written inside the
//! transaction of the event itself, so two events of one agent never both pass
//! the last place, and a message refused for any reason never counts.

use domain::contracts::{self, Contract, Event};
use domain::error::Result;
use std::time::Duration;
use store::sql::{self, Connection};

/// The rate contracts among `contracts` that `e` matches and has passed: the
/// agent already had `more_than` events through them within their windows. For the
/// others, `e` counts now. Returns the names of the passed ones, for
/// [`contracts::decide_rated`].
pub fn count_tx<'c>(
    c: &Connection,
    workflow_id: i64,
    agent: &str,
    contracts: impl IntoIterator<Item = &'c Contract>,
    e: &Event<'_>,
    now: i64,
) -> Result<Vec<String>> {
    let mut past = Vec::new();
    for k in contracts::rated(contracts, e) {
        let Some(rate) = k.rate else { continue };
        let since = now - window_ms(rate.within);
        c.prepare_cached(
            "DELETE FROM contract_hits
              WHERE workflow_id = ?1 AND contract = ?2 AND agent = ?3 AND at <= ?4",
        )?
        .execute_later(sql::params![workflow_id, k.name, agent, since])?;
        let n: i64 = c
            .prepare_cached(
                "SELECT count(*) FROM contract_hits
                  WHERE workflow_id = ?1 AND contract = ?2 AND agent = ?3 AND at > ?4",
            )?
            .query_row(sql::params![workflow_id, k.name, agent, since], |r| {
                r.get(0)
            })?;
        if n >= i64::from(rate.more_than) {
            past.push(k.name.clone());
        } else {
            c.prepare_cached(
                "INSERT INTO contract_hits (workflow_id, contract, agent, at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute_later(sql::params![workflow_id, k.name, agent, now])?;
        }
    }
    Ok(past)
}

fn window_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
