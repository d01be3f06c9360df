//! git, as the kernel runs it: the real `git` as a bounded subprocess (a timeout,
//! bounded output, its own process group), never on a lock, in a clean
//! environment (PATH and HOME only: no store URL, token or `GIT_*` variable of the
//! kernel's reaches git or anything git runs), with no hooks and no fsmonitor,
//! and blind to the user's global and system config and attributes: a `full`
//! agent can write `~/.gitconfig`, and a filter or diff driver named there would
//! run at the kernel's `git add -A` outside any sandbox.
//!
//! In an agent's worktree git is always given the git dir recorded when the
//! worktree was made, never the `.git` file in the folder: the agent can rewrite
//! that file, and must not be able to point the kernel's commits elsewhere.

use std::path::Path;
use std::time::Duration;
use tokio::process::Command;

/// One git command takes at most this long (a commit of a large tree included).
const TIMEOUT: Duration = Duration::from_secs(120);
/// Most output kept from one command.
const MAX_OUTPUT: usize = 4 * 1024 * 1024;

/// Who the kernel commits as (the author is the agent): commits work on a machine
/// with no git identity, and a user's hooks, fsmonitor and signing never run for
/// or block a run's commit.
const KERNEL_CONFIG: &[&str] = &[
    "-c",
    "user.name=agent-worker",
    "-c",
    "user.email=kernel@agent-worker.invalid",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.quotePath=false",
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "submodule.recurse=false",
    "-c",
    "diff.ignoreSubmodules=all",
];

/// Where a git command runs.
#[derive(Clone, Copy)]
pub(super) enum At<'a> {
    /// A folder in a repository (git finds the repository from it).
    Repo(&'a Path),
    /// An agent's worktree, with the git dir recorded when it was made.
    Worktree { dir: &'a Path, git_dir: &'a Path },
}

/// git's trimmed stdout, or why it failed.
pub(super) async fn git(at: At<'_>, args: &[&str]) -> Result<String, String> {
    run(at, args).await.map_err(|f| f.reason)
}

/// Whether git says yes (exit 0) or no (exit 1) to a question such as
/// `diff --cached --quiet`; anything else is an error.
pub(super) async fn yes(at: At<'_>, args: &[&str]) -> Result<bool, String> {
    match run(at, args).await {
        Ok(_) => Ok(true),
        Err(os::bounded::Failed { code: Some(1), .. }) => Ok(false),
        Err(f) => Err(f.reason),
    }
}

/// Whether git succeeded (exit 0) or said no (exit 1, as `merge-tree` does for a
/// conflict), with what it printed either way; anything else is an error.
pub(super) async fn answer(at: At<'_>, args: &[&str]) -> Result<(bool, String), String> {
    match run(at, args).await {
        Ok(out) => Ok((true, out)),
        Err(os::bounded::Failed {
            code: Some(1),
            stdout,
            ..
        }) => Ok((false, stdout)),
        Err(f) => Err(f.reason),
    }
}

/// The first `max` bytes of what git prints, as printed, and whether there was more
/// (a patch, a file: read, never parsed).
pub(super) async fn head(at: At<'_>, args: &[&str], max: usize) -> Result<(String, bool), String> {
    let what = args.first().copied().unwrap_or("");
    os::bounded::head(command(at, args), TIMEOUT, max)
        .await
        .map_err(|f| format!("git {what}: {}", f.reason))
}

async fn run(at: At<'_>, args: &[&str]) -> Result<String, os::bounded::Failed> {
    let what = args.first().copied().unwrap_or("");
    os::bounded::run(command(at, args), TIMEOUT, MAX_OUTPUT)
        .await
        .map_err(|f| os::bounded::Failed {
            reason: format!("git {what}: {}", f.reason),
            ..f
        })
}

fn command(at: At<'_>, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    match at {
        At::Repo(dir) => {
            cmd.arg("-C").arg(dir);
        }
        At::Worktree { dir, git_dir } => {
            cmd.arg("-C").arg(dir);
            cmd.arg("--git-dir")
                .arg(git_dir)
                .arg("--work-tree")
                .arg(dir);
        }
    }
    cmd.args(KERNEL_CONFIG).args(args);
    cmd.env_clear();
    for k in ["PATH", "HOME"] {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    cmd.env("GIT_TERMINAL_PROMPT", "0").env("LC_ALL", "C");
    cmd.env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_ATTR_NOSYSTEM", "1");
    // Nor the `commondir` file in the recorded git dir, which the agent may write:
    // the repository's own config and refs are taken from where the path says.
    let common = match at {
        At::Worktree { git_dir, .. } => domain::workspace::git_common_dir(git_dir),
        At::Repo(dir) => plain_git_dir(dir),
    };
    if let Some(common) = common {
        cmd.env("GIT_COMMON_DIR", common);
    }
    cmd
}

/// The git folder of the plain repository `dir` is in (the nearest `.git` that
/// is a real folder, as git finds it), which is its own common dir: set, so git
/// never takes its config from a `commondir` file there (an agent in the
/// repository may have made one, naming a config of its own; git's refs still
/// follow the file until the kernel removes it at the run's end). None for a
/// worktree's `.git` file or a bare repository: git finds those itself.
fn plain_git_dir(dir: &Path) -> Option<std::path::PathBuf> {
    let dir = std::path::absolute(dir).ok()?;
    for d in dir.ancestors() {
        let git = d.join(".git");
        match std::fs::symlink_metadata(&git) {
            Ok(m) if m.is_dir() => return Some(git),
            Ok(_) => return None,
            Err(_) => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `commondir` planted in a plain repository's git folder, pointing at a
    /// repository whose config the agent wrote, is not read for config: the
    /// kernel's git sees the repository's own, from the top and from below.
    #[tokio::test]
    async fn the_kernels_git_never_reads_a_planted_commondirs_config() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join("sub")).unwrap();
        let init: [&[&str]; 2] = [&["init", "-q"], &["config", "aw.test", "own"]];
        for args in init {
            git(At::Repo(&repo), args).await.unwrap();
        }
        let evil = dir.path().join("evil");
        for d in ["objects", "refs"] {
            std::fs::create_dir_all(evil.join(d)).unwrap();
        }
        let config = "[core]\n\trepositoryformatversion = 0\n[aw]\n\ttest = evil\n";
        std::fs::write(evil.join("config"), config).unwrap();
        std::fs::write(repo.join(".git/commondir"), evil.display().to_string()).unwrap();
        for at in [repo.clone(), repo.join("sub")] {
            let got = git(At::Repo(&at), &["config", "--get", "aw.test"]).await;
            assert_eq!(got.as_deref(), Ok("own"), "{}", at.display());
        }
        let plain = std::process::Command::new("git")
            .args(["config", "--get", "aw.test"])
            .current_dir(&repo)
            .output()
            .unwrap();
        assert_eq!(plain.stdout, b"evil\n", "git left alone follows it");
    }
}
