//! A worktree through its agent's life: made when the agent is registered (or
//! switched to one), removed with it (its branch kept unless discarded).

use super::Worktrees;
use crate::registry::config::AgentConfig;
use domain::error::{Error, Result};
use domain::names::WorkflowRef;
use domain::workspace::{Workspace, Worktree};
use std::path::Path;
use store::sql::OptionalExtension;

impl Worktrees {
    /// Makes the worktree a newly registered agent asked for and records it as
    /// made. On failure the agent is removed again, so its registration is refused
    /// with the reason (the repository is not one, the branch exists…).
    pub(crate) async fn make_worktree_of_new(
        &self,
        id: i64,
        wf: &WorkflowRef,
        name: &str,
        cwd: Option<&str>,
        config: &mut AgentConfig,
    ) -> Result<()> {
        let Workspace::Worktree(asked) = &config.workspace else {
            return Ok(());
        };
        match self
            .make((wf, name), asked, cwd.map(Path::new), false)
            .await
        {
            Ok(made) => {
                config.workspace = Workspace::Worktree(made);
                self.store_config(id, config).await
            }
            Err(e) => {
                self.base
                    .store
                    .write(move |c| {
                        crate::runtime::schedules::clear_tx(c, id)?;
                        c.execute("DELETE FROM agents WHERE id = ?1", [id])?;
                        Ok(())
                    })
                    .await?;
                Err(e)
            }
        }
    }

    /// agent_update's change of workspace, before the row is written: the
    /// workspace to store. Switching to a worktree makes one; switching back to
    /// shared removes it and keeps its branch.
    pub(crate) async fn change_workspace(
        &self,
        (id, wf, name): (i64, &WorkflowRef, &str),
        old: &Workspace,
        new: Workspace,
        cwd: Option<&str>,
    ) -> Result<Workspace> {
        if self.running.handle(id).is_some() && old != &new {
            return Err(Error::conflict(format!(
                "{name} is running; change its workspace when it is idle (agent_pause stops it)"
            )));
        }
        match (old, new) {
            (Workspace::Shared, Workspace::Shared) => Ok(Workspace::Shared),
            // Its own branch, kept when it last left a worktree, is taken up again.
            (Workspace::Shared, Workspace::Worktree(asked)) => Ok(Workspace::Worktree(
                self.make((wf, name), &asked, cwd.map(Path::new), true)
                    .await?,
            )),
            (Workspace::Worktree(w), Workspace::Shared) => {
                let note = self.remove(wf, name, w, false).await;
                tracing::info!(agent = %name, "it leaves its worktree: {note}");
                Ok(Workspace::Shared)
            }
            (Workspace::Worktree(w), Workspace::Worktree(asked)) if same(w, &asked) => {
                Ok(Workspace::Worktree(w.clone()))
            }
            (Workspace::Worktree(_), Workspace::Worktree(_)) => Err(Error::conflict(format!(
                "{name} has a worktree already; set its workspace to shared first (its branch is \
                 kept), then to the new worktree"
            ))),
        }
    }

    /// agent_delete: the agent's worktree goes (after a commit of what is in it);
    /// its branch stays unless `discard`. What became of it, for the lead.
    pub(crate) async fn remove_worktree_of(
        &self,
        wf: &WorkflowRef,
        name: &str,
        config: &AgentConfig,
        discard: bool,
    ) -> Result<Option<String>> {
        match &config.workspace {
            Workspace::Shared => Ok(None),
            Workspace::Worktree(w) => Ok(Some(self.remove(wf, name, w, discard).await)),
        }
    }

    /// A workflow agent's worktree: the one it has when run again with the same
    /// settings, else a new one (then true).
    pub(crate) async fn worktree_for(
        &self,
        wf: &WorkflowRef,
        name: &str,
        asked: &Worktree,
        cwd: Option<&str>,
    ) -> Result<(Worktree, bool)> {
        let (w, n) = (wf.clone(), name.to_owned());
        let stored: Option<String> = self
            .base
            .store
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT a.config FROM agents a JOIN workflows w ON w.id = a.workflow_id
                      WHERE w.name = ?1 AND w.tag = ?2 AND a.name = ?3",
                    (&w.name, &w.tag, &n),
                    |r| r.get(0),
                )
                .optional()?)
            })
            .await?;
        let stored: Option<AgentConfig> = stored.and_then(|c| serde_json::from_str(&c).ok());
        if let Some(AgentConfig {
            workspace: Workspace::Worktree(made),
            ..
        }) = stored
            && made.base_commit.is_some()
            && same(&made, asked)
        {
            return Ok((made, false));
        }
        let made = self
            .make((wf, name), asked, cwd.map(Path::new), false)
            .await?;
        Ok((made, true))
    }

    /// Discards a worktree and its branch made a moment ago for a start that was
    /// refused (it holds nothing yet).
    pub(crate) async fn discard_worktree(&self, wf: &WorkflowRef, name: &str, w: &Worktree) {
        let note = self.remove(wf, name, w, true).await;
        tracing::info!(agent = %name, "a refused start's worktree: {note}");
    }

    /// The branches of an instance's worktree agents, as workflow_stop tells them.
    pub(crate) async fn kept_branches(&self, workflow_id: i64) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for (wf, agent, w) in self.worktree_agents(Of::Instance(workflow_id)).await? {
            let target = format!("{agent}@{}:{}", wf.name, wf.tag);
            out.push(self.kept(&target, &w).await);
        }
        Ok(out)
    }

    /// The worktree agents of a node, or of an instance: where they are, their
    /// names and their worktrees' settings.
    pub(crate) async fn worktree_agents(
        &self,
        of: Of,
    ) -> Result<Vec<(WorkflowRef, String, Worktree)>> {
        let rows: Vec<(String, String, String, String)> = self
            .base
            .store
            .read(move |c| {
                let sql = |filter: &str| {
                    format!(
                        "SELECT w.name, w.tag, a.name, a.config FROM agents a
                           JOIN workflows w ON w.id = a.workflow_id
                          WHERE {filter} ORDER BY w.name, w.tag, a.name"
                    )
                };
                let row = |r: &store::sql::Row| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?));
                let rows = match &of {
                    Of::Node(n) => c
                        .prepare(&sql("a.node = ?1"))?
                        .query_map([n], row)?
                        .collect::<store::sql::Result<Vec<_>>>()?,
                    Of::Instance(id) => c
                        .prepare(&sql("a.workflow_id = ?1"))?
                        .query_map([id], row)?
                        .collect::<store::sql::Result<Vec<_>>>()?,
                };
                Ok(rows)
            })
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(name, tag, agent, config)| {
                let config: AgentConfig = serde_json::from_str(&config).ok()?;
                match config.workspace {
                    Workspace::Worktree(w) => Some((WorkflowRef { name, tag }, agent, w)),
                    Workspace::Shared => None,
                }
            })
            .collect())
    }

    async fn store_config(&self, id: i64, config: &AgentConfig) -> Result<()> {
        let json = serde_json::to_string(config).map_err(|e| Error::internal(e.to_string()))?;
        self.base
            .store
            .write(move |c| {
                c.execute("UPDATE agents SET config = ?2 WHERE id = ?1", (id, &json))?;
                Ok(())
            })
            .await
    }
}

/// Whose worktree agents [`Worktrees::worktree_agents`] lists.
pub(crate) enum Of {
    Node(String),
    Instance(i64),
}

/// The settings asked for are those the worktree was made with (what was not
/// asked for is the default it was made with).
fn same(made: &Worktree, asked: &Worktree) -> bool {
    let agrees = |a: &Option<String>, m: &Option<String>| a.is_none() || a == m;
    agrees(&asked.base, &made.base)
        && agrees(&asked.branch, &made.branch)
        && (asked.repo.is_none() || asked.repo == made.repo)
}
