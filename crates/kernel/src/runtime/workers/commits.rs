//! Every run of a worktree agent ends in a commit on its branch (when it changed
//! anything): nothing is lost when a run fails, and the branch's history is the
//! team's history of that agent's work.

use super::Spec;
use super::Workers;
use crate::runtime::runs::RunEnd;
use crate::runtime::worktrees::RunNote;
use domain::workspace::Workspace;
use store::sql::OptionalExtension;

impl Workers {
    /// Commits what the run left in its agent's worktree; the commit, if any.
    /// A failure is logged and kept in the run's error: the edits stay in the
    /// worktree for the next commit.
    pub(in crate::runtime) async fn commit_run(&self, spec: &Spec, run_id: &str, end: &mut RunEnd) {
        let Workspace::Worktree(w) = &spec.config.workspace else {
            return;
        };
        let id = run_id.to_owned();
        let trigger: Option<String> = self
            .base
            .store
            .read(move |c| {
                Ok(
                    c.query_row("SELECT trigger FROM runs WHERE id = ?1", [id], |r| r.get(0))
                        .optional()?,
                )
            })
            .await
            .ok()
            .flatten();
        let note = RunNote {
            run_id,
            trigger: trigger.as_deref().unwrap_or("run"),
            status: end.status().as_str(),
            final_text: end.final_text.as_deref(),
        };
        match self
            .worktrees
            .commit(&spec.workflow, &spec.name, w, &note)
            .await
        {
            Ok(commit) => {
                if commit.is_some() {
                    self.base.events.publish(crate::events::Event::BranchMoved {
                        workflow_id: spec.workflow_id,
                        agent: spec.name.clone(),
                    });
                }
                end.commit = commit;
            }
            Err(e) => {
                tracing::warn!(run = %run_id, agent = %spec.name, "the run's edits could not be committed: {e}");
                let why = format!("its edits could not be committed on its branch: {e}");
                end.error = Some(match end.error.take() {
                    Some(earlier) => format!("{earlier}; {why}"),
                    None => why,
                });
            }
        }
    }
}
