//! Bringing a branch's work into another, as git does it, with nothing left
//! half-done: a merge into a branch is computed off any checkout (`git
//! merge-tree`), so a conflict writes nothing but loose objects and is reported
//! file by file with its hunks; only a clean result moves the target (a
//! compare-and-swap of its ref, or a fast-forward of the checkout that has it).
//! A sync brings a branch into an agent's own worktree instead, where a conflict
//! is left for the agent to resolve in its next run.

use super::diff::commit_of;
use super::git::{self, At, git};
use schemars::JsonSchema;
use serde::Serialize;
use std::path::Path;

/// How a merge is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A fast-forward when the target has not moved, else a merge commit.
    Auto,
    /// Only a fast-forward.
    Ff,
    /// Always a merge commit.
    Merge,
    /// One commit on the target with the branch's changes, and no link to it.
    Squash,
}

impl Mode {
    pub fn parse(s: Option<&str>) -> Result<Self, String> {
        match s.map(str::trim).unwrap_or("auto") {
            "auto" | "" => Ok(Self::Auto),
            "ff" => Ok(Self::Ff),
            "merge" => Ok(Self::Merge),
            "squash" => Ok(Self::Squash),
            other => Err(format!(
                "mode: {other:?} is not a mode; use auto (the default: a fast-forward when it can), \
                 ff, merge or squash"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Ff => "ff",
            Self::Merge => "merge",
            Self::Squash => "squash",
        }
    }
}

/// What became of a merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The target now has the work (`commit` is its new head).
    Merged,
    /// The target had all of it already; nothing was done.
    UpToDate,
    /// It conflicts: nothing was written (a sync leaves the markers for the agent).
    Conflict,
    /// A contract asks for approval first: it runs when `approval` is approved.
    Held,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct MergeOut {
    pub status: Status,
    /// The branch whose work is brought in.
    pub from: String,
    /// The branch it is brought into.
    pub into: String,
    /// fast-forward, merge commit or squash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub how: Option<String>,
    /// The target's new head.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// With status conflict: each file, its kind and its conflicting hunks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<Conflict>,
    /// With status held: the approval it waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<i64>,
    /// What to do next, when there is something to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Conflict {
    pub file: String,
    /// content, add/add, modify/delete, rename/delete…
    pub kind: String,
    pub hunks: Vec<Hunk>,
    /// More hunks, or longer ones, than are shown.
    pub truncated: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Hunk {
    /// Where the hunk starts in the merged file (1-based).
    pub line: u64,
    /// The target's side.
    pub ours: String,
    /// The incoming branch's side.
    pub theirs: String,
}

const MAX_CONFLICT_FILES: usize = 50;
const MAX_HUNKS: usize = 20;
const MAX_SIDE: usize = 4096;

/// Where the target branch is: only a ref, or checked out in a folder (whose
/// files must move with it).
pub(super) enum Target<'a> {
    Ref,
    Checkout(At<'a>),
}

/// Merges the commit `src` (of the branch named `from`, as read or approved:
/// never read again, so a branch that moves meanwhile brings nothing unasked)
/// into branch `into` of the repository at `top`.
pub(super) async fn into_branch(
    top: &Path,
    ((from, src), into): ((&str, &str), &str),
    mode: Mode,
    message: &str,
    target: Target<'_>,
) -> Result<MergeOut, String> {
    let repo = At::Repo(top);
    let dst_ref = format!("refs/heads/{into}");
    let src = src.to_owned();
    let dst = commit_of(top, &dst_ref)
        .await
        .map_err(|_| format!("into: there is no branch {into} in {}", top.display()))?;
    if git::yes(repo, &["symbolic-ref", "-q", &dst_ref]).await? {
        return Err(format!(
            "into: {into} is another name for a branch (a symbolic ref): give the branch itself"
        ));
    }
    let mut out = MergeOut::new(from, into);
    if git::yes(repo, &["merge-base", "--is-ancestor", &src, &dst]).await? {
        out.status = Status::UpToDate;
        return Ok(out);
    }
    let ff = git::yes(repo, &["merge-base", "--is-ancestor", &dst, &src]).await?;
    let (new, how) = match mode {
        Mode::Auto | Mode::Ff if ff => (src.clone(), "fast-forward"),
        Mode::Ff => {
            return Err(format!(
                "mode ff: {into} has commits {from} does not, so it cannot fast-forward; use \
                 mode merge or squash, or sync {from} first (from: \"{into}\")"
            ));
        }
        _ => {
            // The commits read above, not the refs: a branch that moves meanwhile
            // must not bring in what was not asked (or approved).
            let tree = match merged_tree(top, (&dst, &src)).await? {
                Ok(tree) => tree,
                Err(conflicts) => {
                    out.status = Status::Conflict;
                    out.conflicts = conflicts;
                    out.note = Some(format!(
                        "nothing was written: {into} is as it was. Sync {into} into the agent's \
                         branch (branch_merge with from: \"{into}\"), let the agent resolve the \
                         markers in its next run, then merge again"
                    ));
                    return Ok(out);
                }
            };
            let mut args = vec!["commit-tree", &tree, "-p", &dst];
            let how = if mode == Mode::Squash {
                "squash"
            } else {
                args.extend(["-p", &src]);
                "merge commit"
            };
            args.extend(["-m", message]);
            (git(repo, &args).await?, how)
        }
    };
    move_target(top, target, (&dst_ref, &dst, &new), message).await?;
    out.status = Status::Merged;
    out.how = Some(how.to_owned());
    out.commit = Some(new);
    Ok(out)
}

impl MergeOut {
    pub fn new(from: &str, into: &str) -> Self {
        Self {
            status: Status::UpToDate,
            from: from.to_owned(),
            into: into.to_owned(),
            how: None,
            commit: None,
            conflicts: Vec::new(),
            approval: None,
            note: None,
        }
    }
}

/// The tree `theirs` merged into `ours` gives, or the conflicts.
async fn merged_tree(
    top: &Path,
    (ours, theirs): (&str, &str),
) -> Result<Result<String, Vec<Conflict>>, String> {
    let args = [
        "-c",
        "merge.conflictStyle=merge",
        "merge-tree",
        "--write-tree",
        ours,
        theirs,
    ];
    let out = match git::answer(At::Repo(top), &args).await? {
        (true, out) => return Ok(Ok(first_line(&out))),
        (false, out) => out,
    };
    let tree = first_line(&out);
    let (stages, messages) = out.split_once("\n\n").unwrap_or((&out, ""));
    let mut files: Vec<String> = Vec::new();
    for line in stages.lines().skip(1) {
        if let Some((_, path)) = line.split_once('\t')
            && !files.iter().any(|f| f == path)
        {
            files.push(path.to_owned());
        }
    }
    let mut conflicts = Vec::new();
    for file in files.into_iter().take(MAX_CONFLICT_FILES) {
        let kind = kind_of(messages, &file);
        let text = git::head(
            At::Repo(top),
            &["cat-file", "-p", &format!("{tree}:{file}")],
            256 * 1024,
        )
        .await
        .map(|(t, _)| t)
        .unwrap_or_default();
        conflicts.push(hunks_of(&file, kind, &text));
    }
    Ok(Err(conflicts))
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().trim().to_owned()
}

/// The kind git's message gives a conflict in `file` ("content", "modify/delete"…).
fn kind_of(messages: &str, file: &str) -> String {
    let (at_end, inside) = (format!(" {file}"), format!(" {file} "));
    messages
        .lines()
        .filter(|l| l.ends_with(&at_end) || l.contains(&inside))
        .find_map(|l| {
            let rest = l.strip_prefix("CONFLICT (")?;
            Some(rest.split_once(')')?.0.to_owned())
        })
        .unwrap_or_else(|| "content".to_owned())
}

/// The conflict markers in a merged file, as hunks.
pub(super) fn hunks_of(file: &str, kind: String, text: &str) -> Conflict {
    let mut c = Conflict {
        file: file.to_owned(),
        kind,
        hunks: Vec::new(),
        truncated: false,
    };
    let (mut side, mut start) = (0u8, 0u64);
    let (mut ours, mut theirs) = (String::new(), String::new());
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.starts_with("<<<<<<< ") || line == "<<<<<<<" {
            (side, start) = (1, n as u64 + 1);
            ours.clear();
            theirs.clear();
        } else if side == 1 && line == "=======" {
            side = 2;
        } else if side == 2 && (line.starts_with(">>>>>>> ") || line == ">>>>>>>") {
            side = 0;
            if c.hunks.len() == MAX_HUNKS {
                c.truncated = true;
                continue;
            }
            let cut = |s: &str, t: &mut bool| -> String {
                if s.len() <= MAX_SIDE {
                    return s.to_owned();
                }
                *t = true;
                let mut end = MAX_SIDE;
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                s[..end].to_owned()
            };
            let (o, t) = (cut(&ours, &mut c.truncated), cut(&theirs, &mut c.truncated));
            c.hunks.push(Hunk {
                line: start,
                ours: o,
                theirs: t,
            });
        } else if side == 1 {
            ours.push_str(line);
            ours.push('\n');
        } else if side == 2 {
            theirs.push_str(line);
            theirs.push('\n');
        }
    }
    c
}

/// Moves the target branch from `old` to `new`: its ref (only if it is still at
/// `old`), or the checkout that has it, by a fast-forward that git refuses, with
/// nothing changed, when it would overwrite local changes there.
async fn move_target(
    top: &Path,
    target: Target<'_>,
    (dst_ref, old, new): (&str, &str, &str),
    message: &str,
) -> Result<(), String> {
    match target {
        Target::Ref => {
            let subject = message.lines().next().unwrap_or("merge");
            git(
                At::Repo(top),
                &["update-ref", "-m", subject, dst_ref, new, old],
            )
            .await
            .map_err(|e| format!("the target moved meanwhile; merge again ({e})"))?;
        }
        Target::Checkout(at) => {
            // The checkout still has the target, where it was read: else it moved.
            let on = git(at, &["symbolic-ref", "-q", "HEAD"])
                .await
                .unwrap_or_default();
            let head = git(at, &["rev-parse", "HEAD"]).await.unwrap_or_default();
            if on != dst_ref || head != old {
                return Err(format!(
                    "the checkout that has {dst_ref} changed meanwhile (now {on} at {head}); merge again"
                ));
            }
            git(at, &["merge", "--ff-only", "-q", new])
                .await
                .map_err(|e| {
                    format!(
                        "the checkout that has the target could not take the merge, and is as it \
                     was ({e}): commit or stash its changes there, then merge again"
                    )
                })?;
        }
    }
    Ok(())
}

/// Brings `from` (a commit) into an agent's worktree `at`, which holds its
/// branch and nothing uncommitted: merged, up to date, or a conflict whose
/// markers stay in the worktree for the agent (`git commit` at its run's end
/// concludes the merge).
pub(super) async fn into_worktree(
    at: At<'_>,
    (from_label, from): (&str, &str),
    branch: &str,
    message: &str,
) -> Result<MergeOut, String> {
    let mut out = MergeOut::new(from_label, branch);
    if git::yes(at, &["rev-parse", "-q", "--verify", "MERGE_HEAD"]).await? {
        return Err(format!(
            "{branch} has a merge in progress, its conflicts not yet resolved: let its agent \
             resolve them (its next run's commit concludes the merge)"
        ));
    }
    if git::yes(at, &["merge-base", "--is-ancestor", from, "HEAD"]).await? {
        return Ok(out);
    }
    let args = [
        "-c",
        "merge.conflictStyle=merge",
        "merge",
        "-q",
        "--no-edit",
        "-m",
        message,
        from,
    ];
    if git::answer(at, &args).await?.0 {
        out.status = Status::Merged;
        out.how = Some("merge commit".to_owned());
        out.commit = Some(git(at, &["rev-parse", "HEAD"]).await?);
        return Ok(out);
    }
    if !git::yes(at, &["rev-parse", "-q", "--verify", "MERGE_HEAD"]).await? {
        return Err(format!("git merge of {from_label} into {branch} failed"));
    }
    let names = git(at, &["diff", "--name-only", "--diff-filter=U"]).await?;
    for file in names.lines().take(MAX_CONFLICT_FILES) {
        let text = match at {
            At::Worktree { dir, .. } | At::Repo(dir) => {
                read_bounded(&dir.join(file)).await.unwrap_or_default()
            }
        };
        out.conflicts
            .push(hunks_of(file, "content".to_owned(), &text));
    }
    out.status = Status::Conflict;
    Ok(out)
}

/// A file of the worktree, at most 256 KiB of it, off the runtime's threads:
/// a regular file only (no link followed, no FIFO waited on).
async fn read_bounded(path: &Path) -> Option<String> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || domain::fsread::read(&path, 256 * 1024, false).ok())
        .await
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The files of a merge in progress in an agent's worktree that still hold
/// conflict markers.
pub(super) async fn unresolved(at: At<'_>) -> Result<Vec<String>, String> {
    let At::Worktree { dir, .. } = at else {
        return Ok(Vec::new());
    };
    let names = git(at, &["diff", "--name-only", "--diff-filter=U"]).await?;
    let mut left = Vec::new();
    for file in names.lines().filter(|l| !l.is_empty()) {
        let text = read_bounded(&dir.join(file)).await.unwrap_or_default();
        if text.lines().any(is_marker) {
            left.push(file.to_owned());
        }
    }
    Ok(left)
}

fn is_marker(line: &str) -> bool {
    let line = line.trim_end_matches('\r');
    line.starts_with("<<<<<<< ") || line.starts_with(">>>>>>> ") || line == "======="
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunks_are_read_from_the_markers() {
        let text =
            "a\n<<<<<<< refs/heads/main\nB-main\n=======\nB-bob\n>>>>>>> refs/heads/bob\nc\n";
        let c = hunks_of("f.txt", "content".into(), text);
        assert_eq!(c.hunks.len(), 1);
        assert_eq!(c.hunks[0].line, 2);
        assert_eq!(c.hunks[0].ours, "B-main\n");
        assert_eq!(c.hunks[0].theirs, "B-bob\n");
        assert!(!c.truncated);
    }

    #[test]
    fn crlf_files_have_their_hunks_read_too() {
        let text = "a\r\n<<<<<<< x\r\nours\r\n=======\r\ntheirs\r\n>>>>>>> y\r\n";
        let c = hunks_of("f", "content".into(), text);
        assert_eq!(c.hunks.len(), 1);
        assert_eq!(c.hunks[0].ours, "ours\n");
        assert!(is_marker("=======\r"));
    }

    #[test]
    fn the_kind_comes_from_git_s_message() {
        let m =
            "Auto-merging f.txt\nCONFLICT (modify/delete): g.txt deleted in a and modified in b.\n";
        assert_eq!(kind_of(m, "g.txt"), "modify/delete");
        assert_eq!(kind_of(m, "h.txt"), "content");
        let m = "CONFLICT (modify/delete): ba.txt deleted in a and modified in b.\n";
        assert_eq!(kind_of(m, "a.txt"), "content", "ba.txt is another file");
    }
}
