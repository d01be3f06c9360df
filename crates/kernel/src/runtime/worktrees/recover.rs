//! At start, before any run: what runs killed mid-way left in their worktrees is
//! committed (marked so), and the worktrees of agents that no longer exist are
//! removed, their branches kept.

use super::git::{At, git};
use super::{RunNote, author, commit_all, verify};
use domain::error::Result;
use domain::names::WorkflowRef;
use domain::workspace::Worktree;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

impl super::Worktrees {
    /// Commits what killed runs left in this node's worktrees and prunes those of
    /// agents that are gone. Problems are logged: a broken worktree fails its
    /// agent's next run with the reason, not the kernel's start.
    pub(crate) async fn recover_worktrees(&self) -> Result<()> {
        let mut live: HashMap<PathBuf, (WorkflowRef, String, Worktree)> = HashMap::new();
        for (wf, agent, w) in self
            .worktree_agents(super::agents::Of::Node(self.base.node.clone()))
            .await?
        {
            live.insert(self.path(&wf, &agent), (wf, agent, w));
        }
        for (path, (wf, agent, w)) in &live {
            if !tokio::fs::try_exists(path).await.unwrap_or(false) {
                continue;
            }
            let note = RunNote {
                run_id: "(killed)",
                trigger: "recovered",
                status: "lost",
                final_text: Some("what a run killed mid-way left, committed at the next start"),
            };
            let message = super::message(agent, &note);
            let committed = match verify(path, w).await {
                Ok(at) => commit_all(at, &author(wf, agent), &message).await,
                Err(e) => Err(e),
            };
            match committed {
                Ok(Some(c)) => {
                    tracing::warn!(agent = %agent, commit = %c, "a killed run's edits are committed")
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(agent = %agent, "its worktree could not be committed: {e}")
                }
            }
        }
        for orphan in self.folders().await {
            if !live.contains_key(&orphan) {
                prune(&orphan).await;
            }
        }
        Ok(())
    }
}

impl super::Worktrees {
    /// Every agent folder under the root (`<workflow>/<tag>/<agent>`).
    async fn folders(&self) -> Vec<PathBuf> {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            let dirs = |p: &Path| -> Vec<PathBuf> {
                std::fs::read_dir(p)
                    .map(|rd| {
                        rd.flatten()
                            .map(|e| e.path())
                            .filter(|p| p.is_dir())
                            .collect()
                    })
                    .unwrap_or_default()
            };
            for wf in dirs(&root) {
                for tag in dirs(&wf) {
                    out.extend(dirs(&tag));
                }
            }
            out
        })
        .await
        .unwrap_or_default()
    }
}

/// The worktree of an agent that no longer exists: its leftovers committed, the
/// folder removed, the branch kept. Its git dir is taken from its `.git` file only
/// when the git dir points back at this folder (git's own record of it), so a
/// rewritten file cannot send the commit elsewhere.
async fn prune(path: &Path) {
    let Some(git_dir) = own_git_dir(path).await else {
        tracing::warn!(folder = %path.display(), "a worktree folder of no agent is not a worktree git knows; left alone");
        return;
    };
    let who = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let message = format!("{who}: left uncommitted when its agent was gone");
    let author = format!("{who} <{who}@agent-worker.invalid>");
    let at = At::Worktree {
        dir: path,
        git_dir: &git_dir,
    };
    if let Err(e) = commit_all(at, &author, &message).await {
        tracing::warn!(folder = %path.display(), "cannot commit a gone agent's worktree: {e}");
        return;
    }
    let common = git(
        at,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .await;
    let removed = match common {
        Ok(common) => {
            let target = path.to_string_lossy();
            git(
                At::Repo(Path::new(&common)),
                &["worktree", "remove", "--force", &target],
            )
            .await
        }
        Err(e) => Err(e),
    };
    match removed {
        Ok(_) => {
            tracing::info!(folder = %path.display(), "the worktree of a gone agent is removed; its branch is kept")
        }
        Err(e) => {
            tracing::warn!(folder = %path.display(), "cannot remove a gone agent's worktree: {e}")
        }
    }
}

/// The git dir a worktree folder's `.git` file names, if that git dir's own
/// `gitdir` file names this folder's `.git` back.
async fn own_git_dir(path: &Path) -> Option<PathBuf> {
    let dot_git = path.join(".git");
    let text = tokio::fs::read_to_string(&dot_git).await.ok()?;
    let named = PathBuf::from(text.strip_prefix("gitdir:")?.trim());
    let back = tokio::fs::read_to_string(named.join("gitdir")).await.ok()?;
    (Path::new(back.trim()) == dot_git).then_some(named)
}
