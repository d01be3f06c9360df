//! When a background kernel may stop by itself: no client for a while, and nothing
//! owed. Owed is anything that would be lost or late if it stopped now: a run in
//! progress, queued or starting, a retry or deferred message waiting, an armed
//! schedule, an agent paused until a later automatic resume, or a message a
//! kernel-run agent has not acknowledged. A message to an agent that is paused (by
//! the lead or a guard) or failed is not owed: nothing runs it until a client acts,
//! and it waits in the store either way (so a kernel whose last agent failed still
//! stops, instead of living on after its client and its data dir are gone).

use crate::messaging::broadcast::UNWRITTEN_EXISTS;
use crate::runtime::Runtime;
use domain::error::Result;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl Runtime {
    /// A client made a request (any authenticated MCP call).
    pub fn touch_client(&self) {
        self.last_client
            .store(self.base.clock.now_ms(), Ordering::Relaxed);
    }

    /// How long since a client's last request.
    pub fn client_idle_for(&self) -> Duration {
        let last = self.last_client.load(Ordering::Relaxed);
        Duration::from_millis((self.base.clock.now_ms() - last).max(0) as u64)
    }

    /// True when stopping now would lose or delay nothing (see the module docs).
    pub async fn owes_nothing(&self) -> Result<bool> {
        if self.workers.runs_in_progress() > 0 || self.scheduler.busy() {
            return Ok(false);
        }
        self.base.store
            .read(|c| {
                let owed: bool = c.query_row(
                    &format!(
                        "SELECT EXISTS (SELECT 1 FROM schedules)
                             OR EXISTS (SELECT 1 FROM agents WHERE state = 'paused' AND resume_at IS NOT NULL)
                             OR EXISTS (SELECT 1 FROM agents a WHERE a.backend NOT IN ('external', 'human')
                                   AND a.state NOT IN ('paused', 'failed') AND (EXISTS (
                                   SELECT 1 FROM deliveries d
                                    WHERE d.workflow_id = a.workflow_id AND d.recipient = a.name
                                      AND d.state <> 'acked') OR {UNWRITTEN_EXISTS}))"
                    ),
                    (),
                    |r| r.get(0),
                )?;
                Ok(!owed)
            })
            .await
    }
}
