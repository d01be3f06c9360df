//! A kept delivery is never lost to a crash. Each delivery records the node
//! acting on it; one still `received` whose node is gone (its lease ran out, or
//! its row was dropped by a takeover) or that this node left in its previous life
//! (killed before the action ended) is claimed by a live node, one guarded UPDATE
//! each so that only one claims it, and acted on again; its outcome says so. At a
//! kernel's start, then at each heartbeat on a shared store. The action's own
//! idempotence (one instance per start) stays the backstop.

use super::{Hooks, rows};
use domain::error::Result;
use std::sync::Arc;
use store::sql;

/// A delivery claimed: its row id, hook, sender's id, event, payload and the node
/// that left it.
type Claimed = (i64, String, String, Option<String>, String, Option<String>);

impl Hooks {
    /// Acts again on what this node's previous life left received, then (on a
    /// shared store) keeps looking, each heartbeat, for what gone nodes left.
    pub fn start_recovery(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        let every = crate::runtime::nodes::lease() / 5;
        let shared = !self.store.is_exclusive();
        tokio::spawn(async move {
            let mut since = me.upgrade().map(|h| h.started);
            loop {
                let Some(hooks) = me.upgrade() else { return };
                if let Err(e) = hooks.recover(since.take()).await {
                    tracing::warn!("deliveries left received were not recovered: {e}");
                }
                drop(hooks);
                if !shared {
                    return;
                }
                tokio::time::sleep(every).await;
            }
        });
    }

    /// Claims and acts on the deliveries left received by nodes that are gone and,
    /// with `since`, by this node before then: how many.
    pub async fn recover(self: &Arc<Self>, since: Option<i64>) -> Result<usize> {
        let node = self.runtime.node().to_owned();
        let claimed = self
            .store
            .write(move |c| claim_tx(c, &node, since.unwrap_or(i64::MIN)))
            .await?;
        let n = claimed.len();
        for (_, hook, delivery, event, payload, left_by) in claimed {
            let payload = serde_json::from_str(&payload).unwrap_or_default();
            let left_by = left_by.unwrap_or_else(|| "?".into());
            let note = format!(" (acted on again: node {left_by} stopped before it had acted)");
            tracing::warn!(
                hook,
                delivery,
                left_by,
                "a delivery left received is acted on again"
            );
            match rows::find(&self.store, hook.clone()).await? {
                Some(stored) => self.set_off(stored, (event, delivery), payload, note),
                None => {
                    let outcome = format!("failed: the hook is gone{note}");
                    rows::outcome(&self.store, (&hook, &delivery), &outcome).await?;
                }
            }
        }
        Ok(n)
    }
}

/// The deliveries left received (with their payload, held by no approval) by a
/// node that is not alive by the store's clock, or by `me` before `since`; each
/// claimed for `me` by an UPDATE guarded on the node that left it, so that of two
/// nodes looking at once only one acts.
fn claim_tx(c: &sql::Connection, me: &str, since: i64) -> Result<Vec<Claimed>> {
    let now = c.now_ms()?;
    let mut st = c.prepare(
        "SELECT d.id, d.hook, d.delivery, d.event, d.payload, d.node FROM hook_deliveries d
          WHERE d.outcome = 'received' AND d.payload IS NOT NULL AND d.approval_id IS NULL
            AND ((d.node = ?1 AND d.received_at < ?2)
              OR (d.node IS DISTINCT FROM ?1 AND NOT EXISTS (SELECT 1 FROM nodes n
                    WHERE n.name = d.node AND n.heartbeat_at + n.lease_ms >= ?3)))
          ORDER BY d.id",
    )?;
    let found: Vec<Claimed> = st
        .query_map(sql::params![me, since, now], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })?
        .collect::<sql::Result<_>>()?;
    let mut claimed = Vec::new();
    for d in found {
        let won = c.execute(
            "UPDATE hook_deliveries SET node = ?2
              WHERE id = ?1 AND outcome = 'received' AND node IS NOT DISTINCT FROM ?3",
            sql::params![d.0, me, d.5],
        )? > 0;
        if won {
            claimed.push(d);
        }
    }
    Ok(claimed)
}
