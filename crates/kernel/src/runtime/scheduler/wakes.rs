//! From deliveries to wakes, with bounded work however fast messages arrive.
//!
//! A burst of sends (a bulk import, `@all` to hundreds of agents) publishes far
//! more `Delivered` events than the scheduler can turn into store reads one by
//! one. So the event loop only notes who received something, per workflow, and
//! one task drains those notes: one read per workflow for everything noted since
//! its last pass. However many messages arrived, the work is one pass per batch.
//!
//! Missed events (a lagging listener) call for a rescan of everything owed. A
//! rescan reads every open inbox, so it is never run twice at once: a request
//! while one runs marks it to run once more when it ends.

use super::{Scheduler, Wake};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::Notify;

/// Recipients noted since the drain task's last pass, and the rescan flags.
#[derive(Default)]
pub(super) struct Wakes {
    noted: Mutex<Noted>,
    ready: Notify,
}

#[derive(Default)]
struct Noted {
    /// Workflow id → names of members that received something.
    recipients: HashMap<i64, HashSet<String>>,
    /// A rescan is running.
    rescanning: bool,
    /// Another rescan was asked for while one ran.
    rescan_again: bool,
}

impl Wakes {
    /// Notes a delivery; the drain task reads it on its next pass.
    pub(super) fn note(&self, workflow_id: i64, recipients: &[String]) {
        let mut n = self.noted.lock().unwrap();
        let set = n.recipients.entry(workflow_id).or_default();
        for r in recipients {
            if !set.contains(r) {
                set.insert(r.clone());
            }
        }
        drop(n);
        self.ready.notify_one();
    }

    fn take(&self) -> HashMap<i64, HashSet<String>> {
        std::mem::take(&mut self.noted.lock().unwrap().recipients)
    }

    /// True if the caller should start a rescan now (none is running).
    fn begin_rescan(&self) -> bool {
        let mut n = self.noted.lock().unwrap();
        if n.rescanning {
            n.rescan_again = true;
            return false;
        }
        n.rescanning = true;
        true
    }

    /// True if another rescan was asked for meanwhile (and is now begun).
    fn end_rescan(&self) -> bool {
        let mut n = self.noted.lock().unwrap();
        if std::mem::take(&mut n.rescan_again) {
            return true;
        }
        n.rescanning = false;
        false
    }
}

impl Scheduler {
    /// The drain task: turns noted deliveries into wakes, one read per workflow per pass.
    pub(super) fn spawn_wake_drain(self: &Arc<Self>) {
        let weak: Weak<Self> = Arc::downgrade(self);
        let wakes = self.wakes.clone();
        tokio::spawn(async move {
            loop {
                wakes.ready.notified().await;
                let Some(k) = weak.upgrade() else { return };
                for (workflow_id, names) in wakes.take() {
                    let names: Vec<String> = names.into_iter().collect();
                    let ids = match k.wakeable_agents(workflow_id, names).await {
                        Ok(ids) => ids,
                        Err(e) => {
                            // The store is the truth: read everything owed again.
                            tracing::warn!("deliveries not turned into wakes: {e}; rescanning");
                            k.request_rescan();
                            continue;
                        }
                    };
                    tracing::trace!(node = %k.base.node(), ?ids, "wakes");
                    for id in ids {
                        // The retry count stands: an agent that failed for good
                        // starts afresh (its count was dropped then), and one
                        // between a failure and its retry reads this message in
                        // the retry. (Dropping it here let a late wake for the
                        // message that failed restart the count: a retry too many.)
                        k.admit(id, Wake::Message, None).await;
                    }
                }
            }
        });
    }

    /// Stops the turn of an agent running here for an urgent message (as agent_pause
    /// stops it: its worktree committed, its conversation kept by its backend) and
    /// asks for its next run at once, which reads the message first. An agent not
    /// running here is woken by the message as by any other.
    pub(super) async fn interrupt(self: &Arc<Self>, workflow_id: i64, agent: &str) {
        let name = agent.to_owned();
        let id = self
            .base
            .store
            .read(move |c| crate::registry::agent_id_tx(c, workflow_id, &name))
            .await;
        let Ok(Some(id)) = id else { return };
        if self.workers.stop_run(id).await.is_some() {
            tracing::info!(agent, "turn stopped for an urgent message");
            self.admit(id, Wake::Message, None).await;
        }
    }

    /// Re-reads everything owed (after missed events), never two rescans at once.
    pub(crate) fn request_rescan(self: &Arc<Self>) {
        if !self.wakes.begin_rescan() {
            return;
        }
        let k = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = k.serve_owed().await {
                    tracing::error!("rescan failed: {e}");
                }
                if !k.wakes.end_rescan() {
                    return;
                }
            }
        });
    }
}
