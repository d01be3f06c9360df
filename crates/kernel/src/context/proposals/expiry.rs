//! Expiry on time: a task sleeps until the next deadline and closes what is due,
//! even with nobody looking (and at start, for deadlines passed while down).

use super::*;
use store::sql;

/// System messages written in a job, with their workflow instance, to announce after commit.
pub(super) type Announcements = Vec<(i64, Posted)>;

/// Closes every open proposal of the whole kernel whose deadline has passed by
/// `now`. Runs in a store job; returns the posted messages and the next deadline
/// still ahead.
fn expire_due_tx(c: &Connection, now: i64) -> Result<(Announcements, Option<i64>)> {
    let due: Vec<(i64, i64, String, String)> = c
        .prepare_cached(
            "SELECT p.workflow_id, p.num, w.name, w.tag FROM proposals p JOIN workflows w ON w.id = p.workflow_id
             WHERE p.status = 'open' AND p.expires_at <= ?1",
        )?
        .query_map([now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<sql::Result<Vec<_>>>()?;
    let mut posted = Vec::new();
    for (wid, num, name, tag) in due {
        let wf = WorkflowRef { name, tag };
        let mut p = load(c, wid, num)?;
        // A held vote has no plurality winner: its approval's deadline decides.
        let winner = p.approval_id.is_none().then(|| p.expiry_winner()).flatten();
        p.close(c, (ProposalStatus::Expired, now), winner, "expiry")?;
        let agents = agent_names(c, wid)?;
        let text = format!(
            "{}{} \"{}\" expired at its deadline with {} of {} votes: {}{}.",
            mention_list(&p.involved(&agents)),
            p.id(),
            quote(&p.title),
            p.votes.len(),
            p.quorum,
            p.winner_text(),
            if p.winner.is_some() {
                " by plurality"
            } else {
                ""
            }
        );
        posted.push((wid, post_system(c, wid, &wf, text, now)?));
    }
    let next: Option<i64> = c
        .prepare_cached("SELECT min(expires_at) FROM proposals WHERE status = 'open'")?
        .query_row((), |r| r.get(0))?;
    Ok((posted, next))
}

impl Context {
    pub(super) fn announce_all(&self, posted: &[(i64, Posted)]) {
        for (wid, p) in posted {
            self.messaging.announce(*wid, p);
        }
    }

    /// Closes overdue proposals now; returns the next deadline.
    pub(crate) async fn expire_due(&self) -> Result<Option<i64>> {
        let now = self.clock.now_ms();
        let (posted, next) = self.store.write(move |c| expire_due_tx(c, now)).await?;
        self.announce_all(&posted);
        Ok(next)
    }

    /// Starts the task that expires proposals on time. It sleeps until the next
    /// deadline by the kernel's clock, wakes early when a proposal is created or a
    /// manual clock moves, and ends with the kernel.
    pub(crate) fn start_proposal_timer(self: &Arc<Self>) {
        let weak: Weak<Self> = Arc::downgrade(self);
        let wake = self.proposal_wake.clone();
        tokio::spawn(async move {
            loop {
                let Some(kernel) = weak.upgrade() else { return };
                let clock = kernel.clock.clone();
                let sleep = match kernel.expire_due().await {
                    Ok(Some(next)) => Duration::from_millis((next - clock.now_ms()).max(0) as u64),
                    Ok(None) => TIMER_MAX_SLEEP,
                    Err(e) => {
                        tracing::error!("expiring proposals failed: {e}");
                        Duration::from_secs(1)
                    }
                };
                drop(kernel);
                // A manual clock (a test's) wakes it when moved.
                tokio::select! {
                    _ = tokio::time::sleep(sleep.min(TIMER_MAX_SLEEP)) => {}
                    _ = wake.notified() => {}
                    _ = clock.moved() => {}
                }
            }
        });
    }
}
