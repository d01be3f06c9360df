//! The runs in progress, one per agent at most: the table only the methods of
//! [`Running`] lock (claiming an agent for a run, remembering a wake that arrives
//! during it, holding it for an approval, stopping it, forgetting it at its end).

use super::runs;
use domain::states::Wake;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

/// A hold on a worktree (what the worktrees hand out): kept by a run, opaque here.
type Held = tokio::sync::OwnedMutexGuard<()>;

/// What a claim found.
pub(crate) enum Claim {
    Claimed(RunHandle),
    /// A run is in progress.
    Busy,
    /// A run that started after the message has come and gone: its id.
    Served(String),
}

/// The kernel's table of runs in progress.
#[derive(Default)]
pub struct Running {
    /// The running workers, by agent id: locked only by the methods below.
    active: Mutex<HashMap<i64, Active>>,
    /// The latest run claimed for each agent (locked after `active`, never alone
    /// before it): whether a question was already served by a run since.
    latest: Mutex<HashMap<i64, String>>,
}

pub(crate) struct Active {
    pub(crate) run_id: String,
    pub(crate) stop: CancellationToken,
    pub(crate) done: watch::Receiver<bool>,
    pub(crate) progress: broadcast::Sender<String>,
    /// A wake arrived during the run: run once more when it ends (why, prompt).
    pub(crate) wake_again: Option<(Wake, Option<String>)>,
    /// The run's `held` flag and `denials`, shared with its spec.
    pub(crate) held: Arc<AtomicBool>,
    /// The file that holds the worker's own supervision of its CLI (in its scratch folder).
    pub(crate) held_file: PathBuf,
    pub(crate) denials: Arc<Mutex<Vec<runs::Denial>>>,
    /// A worktree agent's run holds its worktree until its end is committed and
    /// recorded: no sync or merge writes in it meanwhile.
    pub(crate) _worktree: Option<Held>,
}

impl Active {
    fn handle(&self) -> RunHandle {
        RunHandle {
            run_id: self.run_id.clone(),
            done: self.done.clone(),
            progress: self.progress.subscribe(),
        }
    }
}

/// A run in progress, as a caller waits on it.
pub struct RunHandle {
    pub run_id: String,
    done: watch::Receiver<bool>,
    pub progress: broadcast::Receiver<String>,
}

impl RunHandle {
    /// A run that has already ended: waiting on it returns at once.
    pub(crate) fn ended(run_id: String) -> Self {
        let (_, done) = watch::channel(true);
        let (_, progress) = broadcast::channel(1);
        Self {
            run_id,
            done,
            progress,
        }
    }

    /// Waits until the run has ended (its row is final) or `timeout` passes.
    pub fn wait(&self, timeout: Duration) -> impl Future<Output = bool> + Send + 'static {
        let mut done = self.done.clone();
        async move {
            tokio::time::timeout(timeout, done.wait_for(|d| *d))
                .await
                .is_ok_and(|r| r.is_ok())
        }
    }
}

impl Running {
    pub(crate) fn handle(&self, agent_id: i64) -> Option<RunHandle> {
        self.active
            .lock()
            .unwrap()
            .get(&agent_id)
            .map(Active::handle)
    }

    /// Marks the run of `agent_id` as held by an approval if it is `run_id`, and
    /// returns the file that tells its worker so (the caller writes it, unlocked).
    pub(crate) fn hold(&self, agent_id: i64, run_id: &str) -> Option<PathBuf> {
        let active = self.active.lock().unwrap();
        let a = active.get(&agent_id).filter(|a| a.run_id == run_id)?;
        a.held.store(true, Ordering::Relaxed);
        Some(a.held_file.clone())
    }

    /// The claimed run of `agent_id` holds its worktree until it ends.
    pub(crate) fn keep_worktree(&self, agent_id: i64, held: Held) {
        if let Some(a) = self.active.lock().unwrap().get_mut(&agent_id) {
            a._worktree = Some(held);
        }
    }

    /// The run of `agent_id` waits on no approval any more.
    pub(crate) fn release(&self, agent_id: i64) {
        if let Some(a) = self.active.lock().unwrap().get(&agent_id) {
            a.held.store(false, Ordering::Relaxed);
        }
    }

    /// Keeps a refusal the kernel made with the run of `agent_id` (at most
    /// [`runs::MAX_DENIALS`]).
    pub(crate) fn note_denial(&self, agent_id: i64, denial: runs::Denial) {
        let denials = match self.active.lock().unwrap().get(&agent_id) {
            Some(a) => a.denials.clone(),
            None => return,
        };
        let mut d = denials.lock().unwrap();
        if d.len() < runs::MAX_DENIALS {
            d.push(denial);
        }
    }

    /// Claims `agent_id` for the run `a` (its handle), unless it is running, or a
    /// run started after the message `after` already (it read that message, or
    /// failed before it could): then that run's id. One lock for the look and the
    /// claim, so a run that starts and ends in between cannot be missed.
    pub(crate) fn claim_unless_served(
        &self,
        agent_id: i64,
        a: Active,
        after: Option<&str>,
    ) -> Claim {
        let mut active = self.active.lock().unwrap();
        if active.contains_key(&agent_id) {
            return Claim::Busy;
        }
        let latest = self.latest.lock().unwrap();
        // Run and message ids are both UUIDv7 from one clock: time-ordered.
        if let (Some(after), Some(run)) = (after, latest.get(&agent_id))
            && run.as_str() > after
        {
            return Claim::Served(run.clone());
        }
        drop(latest);
        let h = a.handle();
        active.insert(agent_id, a);
        Claim::Claimed(h)
    }

    /// Remembers a wake that arrived during the run of `agent_id` (one more run
    /// when it ends; a prompt given fills one remembered without one).
    pub(crate) fn remember_wake(
        &self,
        agent_id: i64,
        wake: Wake,
        prompt: Option<&str>,
    ) -> Option<RunHandle> {
        let mut active = self.active.lock().unwrap();
        let a = active.get_mut(&agent_id)?;
        match (&mut a.wake_again, prompt) {
            (Some(w), Some(p)) if w.1.is_none() => *w = (wake, Some(p.to_owned())),
            (Some(_), _) => {}
            (None, p) => a.wake_again = Some((wake, p.map(str::to_owned))),
        }
        Some(a.handle())
    }

    /// Like [`Self::remember_wake`], but only if the run started before the message
    /// `message_id` (one lock for the look and the remembering).
    pub(crate) fn remember_wake_before(
        &self,
        agent_id: i64,
        wake: Wake,
        message_id: &str,
    ) -> Option<RunHandle> {
        let mut active = self.active.lock().unwrap();
        let a = active.get_mut(&agent_id)?;
        // Run and message ids are both UUIDv7 from one clock: time-ordered.
        if a.run_id.as_str() <= message_id && a.wake_again.is_none() {
            a.wake_again = Some((wake, None));
        }
        Some(a.handle())
    }

    /// The claimed run of `agent_id` has started (its row is written): the latest.
    pub(crate) fn started(&self, agent_id: i64, run_id: &str) {
        let _active = self.active.lock().unwrap();
        self.latest
            .lock()
            .unwrap()
            .insert(agent_id, run_id.to_owned());
    }

    /// Forgets a deleted agent's latest run.
    pub(crate) fn forget(&self, agent_id: i64) {
        let _active = self.active.lock().unwrap();
        self.latest.lock().unwrap().remove(&agent_id);
    }

    /// How many runs are in progress.
    pub(crate) fn count(&self) -> usize {
        self.active.lock().unwrap().len()
    }

    /// Whether any of these agents is running.
    pub(crate) fn any(&self, agent_ids: &[i64]) -> bool {
        let active = self.active.lock().unwrap();
        agent_ids.iter().any(|id| active.contains_key(id))
    }

    /// The agents running now.
    pub(crate) fn agent_ids(&self) -> Vec<i64> {
        self.active.lock().unwrap().keys().copied().collect()
    }

    /// Asks the run of `agent_id` to stop, forgetting any wake remembered for it:
    /// its id, and what says when it has been recorded.
    pub(crate) fn stop(&self, agent_id: i64) -> Option<(String, watch::Receiver<bool>)> {
        let mut active = self.active.lock().unwrap();
        let a = active.get_mut(&agent_id)?;
        a.wake_again = None;
        a.stop.cancel();
        Some((a.run_id.clone(), a.done.clone()))
    }

    /// The run of `agent_id` has ended: forgets it, and returns the wake that
    /// arrived meanwhile (run once more), if any.
    pub(crate) fn finish(&self, agent_id: i64) -> Option<(Wake, Option<String>)> {
        self.active
            .lock()
            .unwrap()
            .remove(&agent_id)
            .and_then(|a| a.wake_again)
    }
}

#[cfg(test)]
mod tests;
