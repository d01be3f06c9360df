//! Reading a branch: what changed on it since it left another ref (the files
//! with their counts, and the patch), or one file as it is at its head. Only
//! committed work is read (every run ends in a commit); git writes nothing.

use super::git::{self, At, git};
use schemars::JsonSchema;
use serde::Serialize;
use std::path::Path;

/// The most a patch or a file may be asked for.
pub const MAX_BYTES: usize = 256 * 1024;
/// A patch or a file is cut here unless asked otherwise.
pub const DEFAULT_BYTES: usize = 64 * 1024;
/// Files listed at most (a branch that changed more says so in `truncated`).
const MAX_FILES: usize = 500;

/// What to read of a branch.
pub struct DiffAsk<'a> {
    /// The ref compared with.
    pub against: &'a str,
    /// Only this file (a path in the repository).
    pub file: Option<&'a str>,
    /// The file as it is at the branch's head instead of a patch.
    pub content: bool,
    pub max_bytes: usize,
}

/// An agent's branch against another ref.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BranchDiff {
    /// The agent's branch.
    pub branch: String,
    /// What it is compared with: a ref, or the branch it was made from.
    pub against: String,
    /// Where the branch left `against` (the merge base): the diff is the branch's own work since.
    pub since: String,
    /// The branch's latest commit.
    pub head: String,
    /// Files changed, with lines added and removed (absent for a binary file).
    pub files: Vec<FileChange>,
    /// The patch (absent with `content`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// The file at the branch's head (with `content`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The patch, the file or the list of files was cut (ask for one `file`, or a larger `max_bytes`).
    pub truncated: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FileChange {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub added: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed: Option<u64>,
}

/// `branch` of the repository at `top` against `ask.against`.
pub async fn diff(top: &Path, branch: &str, ask: &DiffAsk<'_>) -> Result<BranchDiff, String> {
    let repo = At::Repo(top);
    let head = commit_of(top, &format!("refs/heads/{branch}"))
        .await
        .map_err(|_| format!("branch {branch} is not in {} any more", top.display()))?;
    let against = commit_of(top, ask.against).await.map_err(|_| {
        format!(
            "against: {:?} is not a commit of {}: give a branch, tag or commit, or \"@agent\"",
            ask.against,
            top.display()
        )
    })?;
    let since = git(repo, &["merge-base", &against, &head])
        .await
        .map_err(|_| {
            format!(
                "against: {:?} has no history in common with branch {branch}: compare with its \
                 base or a teammate's branch",
                ask.against
            )
        })?;
    let mut range = vec!["--no-renames".to_owned(), since.clone(), head.clone()];
    if let Some(f) = ask.file {
        range.extend(["--".to_owned(), f.to_owned()]);
    }
    let range: Vec<&str> = range.iter().map(String::as_str).collect();
    let (files, mut truncated) = changed(top, &range).await?;
    let (mut patch, mut content) = (None, None);
    if ask.content {
        let file = ask
            .file
            .ok_or("content: true reads one file: give `file` too")?;
        let (text, cut) = git::head(repo, &["show", &format!("{head}:{file}")], ask.max_bytes)
            .await
            .map_err(|e| format!("file: {file} is not in branch {branch} ({e})"))?;
        truncated |= cut;
        content = Some(text);
    } else {
        let mut args = vec![
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--patch",
        ];
        args.extend(&range);
        let (text, cut) = git::head(repo, &args, ask.max_bytes).await?;
        truncated |= cut;
        patch = Some(text);
    }
    Ok(BranchDiff {
        branch: branch.to_owned(),
        against: ask.against.to_owned(),
        since,
        head,
        files,
        patch,
        content,
        truncated,
    })
}

/// The commit a ref names.
pub(super) async fn commit_of(top: &Path, r: &str) -> Result<String, String> {
    if r.starts_with('-') {
        return Err(format!("{r:?} is not a ref"));
    }
    git(
        At::Repo(top),
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{r}^{{commit}}"),
        ],
    )
    .await
}

/// The files a range changed, with counts, and whether the list was cut.
async fn changed(top: &Path, range: &[&str]) -> Result<(Vec<FileChange>, bool), String> {
    let mut args = vec!["diff", "--numstat"];
    args.extend(range);
    let (out, mut cut) = git::head(At::Repo(top), &args, 256 * 1024).await?;
    let mut files = Vec::new();
    for line in out.lines() {
        if files.len() == MAX_FILES {
            cut = true;
            break;
        }
        let mut parts = line.splitn(3, '\t');
        let (Some(a), Some(r), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        files.push(FileChange {
            path: path.to_owned(),
            added: a.parse().ok(),
            removed: r.parse().ok(),
        });
    }
    Ok((files, cut))
}
