//! The run records as the process manager reads them: one run, an instance's
//! latest, what an agent said to the lead after a question, and the runs a
//! previous kernel left in progress (closed as lost at start).

use super::Workers;
use crate::runtime::runs::{self, RunView};
use domain::error::{Error, Result};
use os::process;
use store::sql;

impl Workers {
    /// At start: runs a previous kernel left `running` are closed as lost, and any of
    /// their processes still alive are killed by group.
    pub(crate) async fn recover_runs(&self) -> Result<usize> {
        let node = self.base.node().to_owned();
        let orphans = self
            .base
            .store
            .read(move |c| runs::orphans(c, &node))
            .await?;
        if orphans.is_empty() {
            return Ok(0);
        }
        for o in &orphans {
            if let Some(pid) = o.pid
                && process::kill_stale_group(pid, o.pid_start)
            {
                tracing::warn!(run = %o.id, pid, "killed a worker left by the previous kernel");
            }
        }
        let ids: Vec<String> = orphans.iter().map(|o| o.id.clone()).collect();
        let n = ids.len();
        let now = self.base.clock.now_ms();
        self.base
            .store
            .write(move |c| runs::close_lost_tx(c, &ids, now))
            .await?;
        Ok(n)
    }

    pub async fn run_view(&self, run_id: &str) -> Result<RunView> {
        let id = run_id.to_owned();
        self.base
            .store
            .read(move |c| runs::get_run(c, &id))
            .await?
            .ok_or_else(|| Error::not_found(format!("no run {run_id}")))
    }

    /// The latest `per_agent` runs of each agent of a workflow instance (one read).
    pub async fn recent_runs(
        &self,
        workflow_id: i64,
        per_agent: i64,
    ) -> Result<Vec<(String, RunView)>> {
        self.base
            .store
            .read(move |c| runs::recent_of_workflow(c, workflow_id, per_agent))
            .await
    }

    /// Messages an agent sent to the lead after `after` (an ask's message id): DMs
    /// to `user` and messages that mention it.
    pub async fn replies_to(
        &self,
        workflow_id: i64,
        (agent, asker): (&str, &str),
        after: &str,
    ) -> Result<Vec<String>> {
        let (agent, after) = (agent.to_owned(), after.to_owned());
        let (asker, mention) = (asker.to_owned(), format!("\"{asker}\""));
        self.base
            .store
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT content FROM messages
                     WHERE workflow_id = ?1 AND sender = ?2 AND id > ?3
                       AND (to_member = ?4 OR instr(mentions, ?5) > 0)
                     ORDER BY id",
                )?;
                let rows = st
                    .query_map((workflow_id, &agent, &after, &asker, &mention), |r| {
                        r.get(0)
                    })?
                    .collect::<sql::Result<Vec<String>>>()?;
                Ok(rows)
            })
            .await
    }
}
