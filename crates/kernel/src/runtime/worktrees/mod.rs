//! An agent's own git worktree (`workspace: worktree`, see `domain::workspace`):
//! made under the data dir (never in the user's tree) on a branch of its own,
//! checked before every run, committed after every run and, for a run killed
//! mid-way, at the next start; removed with its agent while its branch stays.
//!
//! Worktrees are this node's: they live in its data dir. Git runs as a bounded
//! subprocess ([`git`]) on no lock. A worktree whose folder or repository moved or
//! vanished fails the run with the reason; nothing is made again somewhere else.

mod agents;
mod commits;
mod git;
mod recover;

use domain::error::{Error, Result};
use domain::names::WorkflowRef;
use domain::workspace::{Worktree, default_branch};
use git::git;
use schemars::JsonSchema;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The worktrees of this node's agents, under `<data dir>/worktrees`.
pub struct Worktrees {
    root: PathBuf,
}

/// A worktree as agent_info shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorktreeInfo {
    /// The folder its runs work in.
    pub path: String,
    /// Its branch, in `repo`.
    pub branch: String,
    pub repo: String,
    /// The commit its branch was made from.
    pub base_commit: String,
    /// Its branch's latest commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// Commits on its branch since the base.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commits: Option<u64>,
    /// Bytes its files take on disk (git's own data is the repository's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_bytes: Option<u64>,
    /// Why git could not answer (the worktree or its repository is gone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A run's end, as its commit message says it.
pub struct RunNote<'a> {
    pub run_id: &'a str,
    pub trigger: &'a str,
    pub status: &'a str,
    pub final_text: Option<&'a str>,
}

impl Worktrees {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            root: data_dir.join("worktrees"),
        }
    }

    /// Where an agent's worktree is.
    pub fn path(&self, wf: &WorkflowRef, agent: &str) -> PathBuf {
        self.root.join(&wf.name).join(&wf.tag).join(agent)
    }

    /// Makes the agent's worktree from the settings as given (`cwd` is the
    /// repository when `repo` is not given): the settings as made.
    pub async fn make(
        &self,
        wf: &WorkflowRef,
        agent: &str,
        w: &Worktree,
        cwd: Option<&Path>,
    ) -> Result<Worktree> {
        let path = self.path(wf, agent);
        let top = repository(w, cwd).await?;
        if path.starts_with(&top) {
            return Err(Error::invalid(format!(
                "workspace: agent-worker's data dir is inside the repository {}; worktrees go in \
                 the data dir, never in your tree: use a data dir outside it (--data-dir)",
                top.display()
            )));
        }
        let branch = w
            .branch
            .clone()
            .unwrap_or_else(|| default_branch(&wf.name, &wf.tag, agent));
        let base = w.base.clone().unwrap_or_else(|| "HEAD".to_owned());
        let commit = git(
            &top,
            &["rev-parse", "--verify", &format!("{base}^{{commit}}")],
            None,
        )
        .await
        .map_err(|_| {
            Error::invalid(format!(
                "workspace.base {base:?} is not a commit of {}: give a branch, tag or commit \
                     (an empty repository needs a first commit)",
                top.display()
            ))
        })?;
        let exists = format!("refs/heads/{branch}");
        if git::yes(&top, &["show-ref", "--verify", "--quiet", &exists], None)
            .await
            .map_err(Error::internal)?
        {
            return Err(Error::conflict(format!(
                "workspace: branch {branch} already exists in {}: give workspace.branch another \
                 name, or delete it (`git -C {} branch -D {branch}`) if its work is not wanted",
                top.display(),
                top.display()
            )));
        }
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| Error::internal(format!("cannot create {}: {e}", parent.display())))?;
        }
        let target = path.to_string_lossy();
        git(
            &top,
            &["worktree", "add", "-q", "-b", &branch, &target, &commit],
            None,
        )
        .await
        .map_err(|e| Error::internal(format!("cannot make the worktree: {e}")))?;
        Ok(Worktree {
            repo: Some(top),
            base: Some(base),
            branch: Some(branch),
            base_commit: Some(commit),
        })
    }

    /// The folder a run works in: the worktree, or the same subfolder of it that
    /// `cwd` is of the repository. Fails, naming why, when the worktree is not there
    /// or not on its branch.
    pub async fn run_folder(
        &self,
        wf: &WorkflowRef,
        agent: &str,
        w: &Worktree,
        cwd: Option<&Path>,
    ) -> Result<PathBuf> {
        let path = self.path(wf, agent);
        verify(&path, w).await.map_err(Error::conflict)?;
        let sub = match (cwd, &w.repo) {
            (Some(cwd), Some(top)) => cwd.strip_prefix(top).ok().map(|rel| path.join(rel)),
            _ => None,
        };
        Ok(sub.filter(|s| s.is_dir()).unwrap_or(path))
    }

    /// Commits everything a run left in the worktree: the new commit, or None when
    /// it left nothing.
    pub async fn commit(
        &self,
        wf: &WorkflowRef,
        agent: &str,
        note: &RunNote<'_>,
    ) -> std::result::Result<Option<String>, String> {
        let path = self.path(wf, agent);
        let message = message(agent, note);
        commit_all(&path, &author(wf, agent), &message).await
    }

    /// Removes the agent's worktree after committing what is in it; its branch stays
    /// unless `discard`. What became of its work, for the lead.
    pub async fn remove(
        &self,
        wf: &WorkflowRef,
        agent: &str,
        w: &Worktree,
        discard: bool,
    ) -> std::result::Result<String, String> {
        let path = self.path(wf, agent);
        let (Some(top), Some(branch)) = (&w.repo, &w.branch) else {
            return Ok("it had no worktree yet".to_owned());
        };
        if tokio::fs::try_exists(&path).await.unwrap_or(false) {
            let note = format!("{agent}: left uncommitted when it was deleted");
            commit_all(&path, &author(wf, agent), &note).await?;
            git(
                top,
                &["worktree", "remove", "--force", &path.to_string_lossy()],
                None,
            )
            .await?;
        } else {
            git(top, &["worktree", "prune"], None).await?;
        }
        if discard {
            git(top, &["branch", "-D", branch], None).await?;
            return Ok(format!("its worktree and branch {branch} were discarded"));
        }
        let commits = ahead(top, w).await.unwrap_or(0);
        Ok(format!(
            "its branch {branch} is kept in {} ({commits} commits past its base): merge it, or \
             discard it with `git -C {} branch -D {branch}`",
            top.display(),
            top.display()
        ))
    }

    /// What agent_info shows of the agent's worktree.
    pub async fn info(&self, wf: &WorkflowRef, agent: &str, w: &Worktree) -> WorktreeInfo {
        let path = self.path(wf, agent);
        let mut info = WorktreeInfo {
            path: path.display().to_string(),
            branch: w.branch.clone().unwrap_or_default(),
            repo: w
                .repo
                .as_ref()
                .map(|r| r.display().to_string())
                .unwrap_or_default(),
            base_commit: w.base_commit.clone().unwrap_or_default(),
            head: None,
            commits: None,
            disk_bytes: None,
            error: None,
        };
        if let Err(e) = verify(&path, w).await {
            info.error = Some(e);
            return info;
        }
        info.head = git(&path, &["rev-parse", "HEAD"], path.parent()).await.ok();
        if let Some(top) = &w.repo {
            info.commits = ahead(top, w).await.ok();
        }
        let folder = path.clone();
        info.disk_bytes = tokio::task::spawn_blocking(move || disk_bytes(&folder))
            .await
            .ok();
        info
    }

    /// What workflow_stop says of a worktree agent's branch: kept, and how to
    /// bring it back or discard it.
    pub async fn kept(&self, target: &str, w: &Worktree) -> String {
        let (Some(top), Some(branch)) = (&w.repo, &w.branch) else {
            return format!("{target}: no worktree yet");
        };
        let commits = ahead(top, w).await.unwrap_or(0);
        format!(
            "{target}: branch {branch} is kept in {} ({commits} commits past its base); merge it \
             with git, or agent_delete {{target: \"{target}\", discard: true}}",
            top.display()
        )
    }
}

/// The bytes of the files under `dir` (not following links; at most 100,000
/// entries are looked at, so a huge tree costs a bounded walk).
fn disk_bytes(dir: &Path) -> u64 {
    let (mut total, mut seen, mut stack) = (0u64, 0usize, vec![dir.to_owned()]);
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > 100_000 {
                return total;
            }
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) if m.is_file() => total += m.len(),
                _ => {}
            }
        }
    }
    total
}

/// The top folder of the repository the worktree is made from.
async fn repository(w: &Worktree, cwd: Option<&Path>) -> Result<PathBuf> {
    let from = w.repo.as_deref().or(cwd).ok_or_else(|| {
        Error::invalid(
            "workspace: a worktree is made from a git repository: give workspace.repo (a folder \
             in it) or the agent's cwd",
        )
    })?;
    let top = git(from, &["rev-parse", "--show-toplevel"], None)
        .await
        .map_err(|e| {
            Error::invalid(format!(
                "workspace.repo {} is not inside a git repository ({e}): run `git init` there, \
                 or give workspace.repo",
                from.display()
            ))
        })?;
    Ok(PathBuf::from(top))
}

/// The worktree is there, is a worktree of its own (not a folder of some other
/// repository) and is on its branch.
async fn verify(path: &Path, w: &Worktree) -> std::result::Result<(), String> {
    let branch = w.branch.as_deref().unwrap_or_default();
    let gone = |why: String| {
        format!(
            "the worktree {} of branch {branch} is gone or broken ({why}); its repository {} may \
             have moved or been deleted. Set the agent's workspace again (agent_update) to make a \
             new one",
            path.display(),
            w.repo
                .as_ref()
                .map(|r| r.display().to_string())
                .unwrap_or_default()
        )
    };
    if !tokio::fs::try_exists(path).await.unwrap_or(false) {
        return Err(gone("no such folder".to_owned()));
    }
    let top = git(path, &["rev-parse", "--show-toplevel"], path.parent())
        .await
        .map_err(gone)?;
    if Path::new(&top) != path {
        return Err(gone(format!("git answers for {top} there")));
    }
    let on = git(path, &["symbolic-ref", "--short", "HEAD"], path.parent())
        .await
        .map_err(gone)?;
    if on != branch {
        return Err(format!(
            "the worktree {} is on branch {on}, not on its own {branch}: check out {branch} there",
            path.display()
        ));
    }
    Ok(())
}

/// `git add -A` and a commit as `author` when anything changed.
async fn commit_all(
    path: &Path,
    author: &str,
    message: &str,
) -> std::result::Result<Option<String>, String> {
    let ceiling = path.parent();
    git(path, &["add", "-A"], ceiling).await?;
    if git::yes(path, &["diff", "--cached", "--quiet"], ceiling).await? {
        return Ok(None);
    }
    let args = [
        "commit",
        "-q",
        "--no-verify",
        "--author",
        author,
        "-m",
        message,
    ];
    git(path, &args, ceiling).await?;
    git(path, &["rev-parse", "HEAD"], ceiling).await.map(Some)
}

/// Commits on the worktree's branch since its base.
async fn ahead(top: &Path, w: &Worktree) -> std::result::Result<u64, String> {
    let (Some(base), Some(branch)) = (&w.base_commit, &w.branch) else {
        return Ok(0);
    };
    let range = format!("{base}..refs/heads/{branch}");
    let n = git(top, &["rev-list", "--count", &range], None).await?;
    n.parse().map_err(|e| format!("git rev-list --count: {e}"))
}

fn author(wf: &WorkflowRef, agent: &str) -> String {
    format!(
        "{agent} <{agent}@{}.{}.agent-worker.invalid>",
        wf.name, wf.tag
    )
}

/// `<agent>: <trigger>: <first line of its final text>`, and trailers naming the run.
fn message(agent: &str, note: &RunNote<'_>) -> String {
    let first = note
        .final_text
        .and_then(|t| t.lines().map(str::trim).find(|l| !l.is_empty()))
        .unwrap_or("(no final text)");
    let first: String = first.chars().take(72).collect();
    format!(
        "{agent}: {}: {first}\n\nAgent-Worker-Run: {}\nAgent-Worker-Status: {}\n",
        note.trigger, note.run_id, note.status
    )
}
