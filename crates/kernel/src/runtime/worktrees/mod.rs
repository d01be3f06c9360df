//! An agent's own git worktree (`workspace: worktree`, see `domain::workspace`):
//! made under the data dir (never in the user's tree) on a branch of its own,
//! checked before every run, committed after every run and, for a run killed
//! mid-way, at the next start; removed with its agent while its branch stays.
//!
//! Worktrees are this node's: they live in its data dir. Git runs as a bounded
//! subprocess ([`git`]) on no lock. A worktree whose folder or repository moved or
//! vanished fails the run with the reason; nothing is made again somewhere else.

mod agents;
mod branches;
pub mod diff;
mod git;
pub mod merge;
mod recover;

pub use branches::{Branches, DiffArgs, MergeAsk, summary};

use crate::runtime::base::Base;
use crate::runtime::running::Running;
use domain::error::{Error, Result};
use domain::names::WorkflowRef;
use domain::workspace::{Worktree, default_branch};
use git::{At, git};
use schemars::JsonSchema;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The worktrees of this node's agents, under `<data dir>/worktrees`.
pub struct Worktrees {
    root: PathBuf,
    /// One lock per worktree (see [`Held`]), locked only by the methods below.
    busy: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
    /// What a worktree agent's life reads and writes (its row) and who runs now.
    base: Arc<Base>,
    running: Arc<Running>,
}

/// A worktree held: by a run from its start to its commit, or by a sync or a
/// merge that writes in it. Nothing else writes there meanwhile.
pub type Held = tokio::sync::OwnedMutexGuard<()>;

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
    pub(crate) fn new(base: Arc<Base>, running: Arc<Running>) -> Self {
        Self {
            root: base.data_dir.join("worktrees"),
            busy: Mutex::new(HashMap::new()),
            base,
            running,
        }
    }

    fn lock_of(&self, wf: &WorkflowRef, agent: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut busy = self.busy.lock().unwrap();
        busy.entry(self.path(wf, agent)).or_default().clone()
    }

    /// The agent's worktree, held, if nothing holds it.
    pub fn try_hold(&self, wf: &WorkflowRef, agent: &str) -> Option<Held> {
        self.lock_of(wf, agent).try_lock_owned().ok()
    }

    /// The agent's worktree, held when what holds it lets go.
    pub async fn hold(&self, wf: &WorkflowRef, agent: &str) -> Held {
        self.lock_of(wf, agent).lock_owned().await
    }

    /// Forgets the lock of a worktree that is gone.
    fn forget(&self, path: &Path) {
        self.busy.lock().unwrap().remove(path);
    }

    /// Whether `path` is one of the agents' worktrees.
    pub fn is_ours(&self, path: &Path) -> bool {
        path.starts_with(&self.root)
    }

    /// Where an agent's worktree is.
    pub fn path(&self, wf: &WorkflowRef, agent: &str) -> PathBuf {
        self.root.join(&wf.name).join(&wf.tag).join(agent)
    }

    /// Makes the agent's worktree from the settings as given (`cwd` is the
    /// repository when `repo` is not given): the settings as made. With
    /// `continue_branch`, a branch of that name that no worktree holds (the
    /// agent's own, kept when it last left a worktree) is taken up again.
    pub async fn make(
        &self,
        (wf, agent): (&WorkflowRef, &str),
        w: &Worktree,
        cwd: Option<&Path>,
        continue_branch: bool,
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
        let commit = base_commit(&top, &base).await?;
        let base_branch = git(
            At::Repo(&top),
            &["rev-parse", "--symbolic-full-name", &base],
        )
        .await
        .ok()
        .and_then(|r| r.strip_prefix("refs/heads/").map(str::to_owned));
        let exists = format!("refs/heads/{branch}");
        let taken = git::yes(
            At::Repo(&top),
            &["show-ref", "--verify", "--quiet", &exists],
        )
        .await
        .map_err(Error::internal)?;
        if taken && !continue_branch {
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
        let add: Vec<&str> = if taken {
            vec!["worktree", "add", "-q", &target, &branch]
        } else {
            vec!["worktree", "add", "-q", "-b", &branch, &target, &commit]
        };
        git(At::Repo(&top), &add)
            .await
            .map_err(|e| Error::conflict(format!("workspace: cannot make the worktree: {e}")))?;
        // Read once, now that git itself wrote the folder's `.git` file.
        let git_dir = git(At::Repo(&path), &["rev-parse", "--absolute-git-dir"])
            .await
            .map_err(|e| Error::internal(format!("the new worktree: {e}")))?;
        Ok(Worktree {
            repo: Some(top),
            base: Some(base),
            branch: Some(branch),
            base_commit: Some(commit),
            git_dir: Some(PathBuf::from(git_dir)),
            base_branch,
        })
    }

    /// The folder a run works in, checked: fails, naming why, when the worktree is
    /// not there or not on its branch (see [`Self::folder`]).
    pub async fn run_folder(
        &self,
        wf: &WorkflowRef,
        agent: &str,
        w: &Worktree,
        cwd: Option<&Path>,
    ) -> Result<PathBuf> {
        verify(&self.path(wf, agent), w)
            .await
            .map_err(Error::conflict)?;
        Ok(self.folder(wf, agent, w, cwd).await)
    }

    /// The folder a run works in, as a path (no git): the worktree, or the same
    /// subfolder of it that `cwd` is of the repository, if that stays inside it (a
    /// link the agent planted does not lead a run out).
    pub async fn folder(
        &self,
        wf: &WorkflowRef,
        agent: &str,
        w: &Worktree,
        cwd: Option<&Path>,
    ) -> PathBuf {
        let path = self.path(wf, agent);
        let rel = match (cwd, &w.repo) {
            (Some(cwd), Some(top)) => cwd.strip_prefix(top).ok().map(Path::to_owned),
            _ => None,
        };
        let plain = |r: &Path| r.components().all(|c| matches!(c, Component::Normal(_)));
        if let Some(rel) = rel.filter(|r| !r.as_os_str().is_empty() && plain(r))
            && let Ok(real) = tokio::fs::canonicalize(path.join(rel)).await
            && real.starts_with(&path)
            && real.is_dir()
        {
            return real;
        }
        path
    }

    /// Commits everything a run left in the worktree: the new commit, or None when
    /// it left nothing.
    pub async fn commit(
        &self,
        wf: &WorkflowRef,
        agent: &str,
        w: &Worktree,
        note: &RunNote<'_>,
    ) -> std::result::Result<Option<String>, String> {
        let path = self.path(wf, agent);
        commit_all(
            verify(&path, w).await?,
            &author(wf, agent),
            &message(agent, note),
        )
        .await
    }

    /// Removes the agent's worktree after committing what is in it; its branch stays
    /// unless `discard`. What became of its work, for the lead; when git cannot do
    /// it (the repository moved or vanished), what was left and where.
    pub async fn remove(
        &self,
        wf: &WorkflowRef,
        agent: &str,
        w: &Worktree,
        discard: bool,
    ) -> String {
        let path = self.path(wf, agent);
        let (Some(top), Some(branch)) = (&w.repo, &w.branch) else {
            return "it had no worktree yet".to_owned();
        };
        // Nothing else writes in it meanwhile (a sync, a merge into it).
        let _held = self.hold(wf, agent).await;
        let removed = async {
            if tokio::fs::try_exists(&path).await.unwrap_or(false) {
                if discard {
                    // A merge left for the agent goes with its work.
                    let _ = git(verify(&path, w).await?, &["merge", "--abort"]).await;
                }
                let note = format!("{agent}: left uncommitted when it left its worktree");
                commit_all(verify(&path, w).await?, &author(wf, agent), &note).await?;
                git(
                    At::Repo(top),
                    &["worktree", "remove", "--force", &path.to_string_lossy()],
                )
                .await?;
            }
            git(At::Repo(top), &["worktree", "prune"]).await?;
            if discard {
                git(At::Repo(top), &["branch", "-D", branch]).await?;
            }
            Ok::<_, String>(())
        }
        .await;
        self.forget(&path);
        match removed {
            Err(e) => format!(
                "its worktree could not be removed ({e}): what is in {} is left as it was, and \
                 branch {branch} of {} too",
                path.display(),
                top.display()
            ),
            Ok(()) if discard => format!("its worktree and branch {branch} were discarded"),
            Ok(()) => {
                let commits = ahead(top, w).await.unwrap_or(0);
                format!(
                    "its branch {branch} is kept in {} ({commits} commits past its base): merge it, \
                     or discard it with `git -C {} branch -D {branch}`",
                    top.display(),
                    top.display()
                )
            }
        }
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
        match verify(&path, w).await {
            Ok(at) => info.head = git(at, &["rev-parse", "HEAD"]).await.ok(),
            Err(e) => {
                info.error = Some(e);
                return info;
            }
        }
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

/// The worktree with its recorded git dir.
fn at<'a>(path: &'a Path, w: &'a Worktree) -> std::result::Result<At<'a>, String> {
    let git_dir = w.git_dir.as_deref().ok_or_else(|| {
        "its git dir was not recorded: set the agent's workspace to shared, then to worktree"
            .to_owned()
    })?;
    Ok(At::Worktree { dir: path, git_dir })
}

/// The commit `base` names in the repository.
async fn base_commit(top: &Path, base: &str) -> Result<String> {
    git(
        At::Repo(top),
        &["rev-parse", "--verify", &format!("{base}^{{commit}}")],
    )
    .await
    .map_err(|_| {
        Error::invalid(format!(
            "workspace.base {base:?} is not a commit of {}: give a branch, tag or commit \
                 (an empty repository needs a first commit)",
            top.display()
        ))
    })
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
    let top = git(At::Repo(from), &["rev-parse", "--show-toplevel"])
        .await
        .map_err(|e| {
            let field = if w.repo.is_some() {
                "workspace.repo"
            } else {
                "cwd"
            };
            Error::invalid(format!(
                "workspace: {field} {} is not inside a git repository ({e}): run `git init` \
                 there, or give workspace.repo",
                from.display()
            ))
        })?;
    Ok(PathBuf::from(top))
}

/// The worktree is there (a folder, not a link) and, by its recorded git dir,
/// on its branch: where git may act on it.
async fn verify<'a>(path: &'a Path, w: &'a Worktree) -> std::result::Result<At<'a>, String> {
    let branch = w.branch.as_deref().unwrap_or_default();
    let gone = |why: String| {
        format!(
            "the worktree {} of branch {branch} is gone or broken ({why}); its repository {} may \
             have moved or been deleted. Set the agent's workspace to shared (its branch is \
             kept), then to worktree again, and resume it (agent_pause, resume: true)",
            path.display(),
            w.repo
                .as_ref()
                .map(|r| r.display().to_string())
                .unwrap_or_default()
        )
    };
    match tokio::fs::symlink_metadata(path).await {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(gone("it is not a folder".to_owned())),
        Err(e) => return Err(gone(e.to_string())),
    }
    let at = at(path, w)?;
    let on = git(at, &["symbolic-ref", "--short", "HEAD"])
        .await
        .map_err(gone)?;
    if on != branch {
        return Err(format!(
            "the worktree {} is on {on}, not on its own branch {branch}: check out {branch} there",
            path.display()
        ));
    }
    Ok(at)
}

/// `git add -A` and a commit as `author` when anything changed.
async fn commit_all(
    at: At<'_>,
    author: &str,
    message: &str,
) -> std::result::Result<Option<String>, String> {
    // Skills a killed worker left in the worktree are the run's tools, not its work.
    if let At::Worktree { dir, .. } = at {
        let dir = dir.to_owned();
        let _ = tokio::task::spawn_blocking(move || domain::skills::remove_placed(&dir)).await;
    }
    // A sync's merge left for the agent is concluded by this commit (even when the
    // agent resolved it to its own side), but never while markers remain: they
    // would be merged on as text.
    let merging = git::yes(at, &["rev-parse", "-q", "--verify", "MERGE_HEAD"]).await?;
    if merging {
        let left = merge::unresolved(at).await?;
        if !left.is_empty() {
            return Err(format!(
                "a merge into its branch is not resolved yet: conflict markers remain in {}; \
                 they must be resolved (the next run's commit concludes the merge)",
                left.join(", ")
            ));
        }
    }
    git(at, &["add", "-A"]).await?;
    if !merging && git::yes(at, &["diff", "--cached", "--quiet"]).await? {
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
    git(at, &args).await?;
    git(at, &["rev-parse", "HEAD"]).await.map(Some)
}

/// Commits on the worktree's branch since its base.
async fn ahead(top: &Path, w: &Worktree) -> std::result::Result<u64, String> {
    let (Some(base), Some(branch)) = (&w.base_commit, &w.branch) else {
        return Ok(0);
    };
    let range = format!("{base}..refs/heads/{branch}");
    let n = git(At::Repo(top), &["rev-list", "--count", &range]).await?;
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
