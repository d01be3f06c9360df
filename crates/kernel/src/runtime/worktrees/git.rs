//! git, as the kernel runs it: the real `git` as a bounded subprocess (a timeout,
//! bounded output, its own process group), never on a lock, with the environment
//! that makes it answer for the folder it is given and nothing else.

use std::path::Path;
use std::time::Duration;
use tokio::process::Command;

/// One git command takes at most this long (a commit of a large tree included).
const TIMEOUT: Duration = Duration::from_secs(120);
/// Most output kept from one command (a patch is bounded by its caller as well).
const MAX_OUTPUT: usize = 4 * 1024 * 1024;

/// Who the kernel commits as (the author is the agent): commits work on a machine
/// with no git identity, and a user's hooks and signing never block a run's commit.
const KERNEL_IDENTITY: &[&str] = &[
    "-c",
    "user.name=agent-worker",
    "-c",
    "user.email=kernel@agent-worker.invalid",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "core.hooksPath=/dev/null",
];

/// `git -C dir args…`: its trimmed stdout, or why it failed. With `ceiling`, git
/// looks for no repository above it, so a folder that stopped being a worktree is
/// an error instead of whatever repository encloses it.
pub(super) async fn git(
    dir: &Path,
    args: &[&str],
    ceiling: Option<&Path>,
) -> Result<String, String> {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).args(KERNEL_IDENTITY).args(args);
    for k in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_CEILING_DIRECTORIES",
    ] {
        cmd.env_remove(k);
    }
    cmd.env("GIT_TERMINAL_PROMPT", "0").env("LC_ALL", "C");
    if let Some(c) = ceiling {
        cmd.env("GIT_CEILING_DIRECTORIES", c);
    }
    os::bounded::output(cmd, TIMEOUT, MAX_OUTPUT)
        .await
        .map_err(|e| format!("git {}: {e}", args.first().copied().unwrap_or("")))
}

/// Whether git says yes (exit 0) or no (exit 1) to a question such as
/// `diff --cached --quiet`; anything else is an error.
pub(super) async fn yes(dir: &Path, args: &[&str], ceiling: Option<&Path>) -> Result<bool, String> {
    match git(dir, args, ceiling).await {
        Ok(_) => Ok(true),
        Err(e) if e.ends_with("exited with status 1") || e.contains("exited with status 1:") => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
