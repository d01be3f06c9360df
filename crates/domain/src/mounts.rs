//! What a run's mount namespace holds inside its writable folder (pure): the
//! parts of a repository's git folder that run code, the paths a contract's
//! edit glob names as they are at the run's start, and the folders above them
//! pinned in place ([`crate::sandbox::Mounts`]).

use std::path::{Path, PathBuf};

/// What of a repository's git folder runs code when git runs there (or sends
/// git elsewhere): its config (`core.fsmonitor`, `core.hooksPath`, filters,
/// aliases, `core.sshCommand`), its hooks, its `info` (attributes naming the
/// config's filters) and its `commondir` (another folder's config): read-only
/// where they exist.
pub const GIT_RUNS: &[&str] = &["config", "config.worktree", "hooks", "info", "commondir"];

/// What of a repository's git folder holds other git folders whose config and
/// hooks git obeys: a linked worktree's (its `commondir` sends it anywhere) and
/// a submodule's. Read-only whole where they exist, never removed after a run
/// (an agent's `git worktree add` or `git submodule update` fails instead).
pub const GIT_HELD_WHOLE: &[&str] = &["modules", "worktrees"];

/// What of [`GIT_RUNS`] the kernel makes empty before a run when missing, so
/// that a mount holds it (a mount needs its target): folders git looks in.
pub const GIT_MADE_FIRST: &[&str] = &["hooks", "info"];

/// The folders to pin (bind over themselves) so that no path in `held` moves:
/// every folder strictly between `folder` and a held path, parents first. A
/// mount moves with its folder, and a rename refuses only a mount point itself:
/// `mv secrets old; mkdir secrets` would otherwise leave a writable `secrets`
/// where the held one was. `folder` itself is not writable in its parent.
pub fn pins(folder: &Path, held: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in held {
        let Ok(rel) = p.strip_prefix(folder) else {
            continue;
        };
        let mut at = folder.to_path_buf();
        let mut parts: Vec<_> = rel.components().collect();
        parts.pop();
        for c in parts {
            at.push(c);
            if !out.contains(&at) && !held.contains(&at) {
                out.push(at.clone());
            }
        }
    }
    out.sort();
    out
}

/// Which of [`GIT_RUNS`] a run made in a plain repository's git folder: there
/// at its end (`now`), absent at its start (`before`). No mount held them (a
/// mount needs its target), so the kernel removes them once the run's processes
/// are gone: a `commondir` the agent wrote would send the user's git to a
/// config of its making, which git would obey outside any sandbox.
pub fn git_made<'a>(before: &[&str], now: &[&'a str]) -> Vec<&'a str> {
    now.iter()
        .copied()
        .filter(|n| GIT_RUNS.contains(n) && !before.contains(n))
        .collect()
}

/// The places inside `folder` that a contract's edit rule `pattern` (a glob,
/// `*` any run of characters, `/` included) holds, as they are now: the folder
/// a `dir/*` names, whole (what is made in it later stays held); a path without
/// `*`, when it exists; else each existing entry beneath the pattern's fixed
/// folder that it matches (`list` gives a folder's entries, full paths). A
/// pattern whose fixed part is the folder itself (`*.pem`) is matched entry by
/// entry too; one outside the folder holds nothing here. `Err(TooMany)` when it
/// matches more than [`MATCH_LIMIT`] paths or its walk passes [`WALK_LIMIT`]
/// entries: what it would hold is then not known.
pub fn held_by(
    folder: &Path,
    pattern: &str,
    exists: &dyn Fn(&Path) -> bool,
    list: &dyn Fn(&Path) -> Vec<PathBuf>,
) -> Result<Vec<PathBuf>, TooMany> {
    let rel = match Path::new(pattern).strip_prefix(folder) {
        Ok(r) => r.to_string_lossy().into_owned(),
        Err(_) if pattern.starts_with('/') => return Ok(Vec::new()),
        Err(_) => pattern.trim_start_matches("./").to_owned(),
    };
    if rel.is_empty() || rel.split('/').any(|c| c == "..") {
        return Ok(Vec::new());
    }
    let Some(star) = rel.find('*') else {
        let p = folder.join(&rel);
        return Ok(if exists(&p) { vec![p] } else { Vec::new() });
    };
    let fixed = rel[..star].rfind('/').map_or("", |i| &rel[..i]);
    let base = folder.join(fixed);
    if !fixed.is_empty() && rel[fixed.len()..] == *"/*" {
        return Ok(if exists(&base) {
            vec![base]
        } else {
            Vec::new()
        });
    }
    let mut out = Vec::new();
    let mut todo = vec![base];
    let mut seen = 0;
    while let Some(dir) = todo.pop() {
        for entry in list(&dir) {
            seen += 1;
            if seen > WALK_LIMIT {
                return Err(TooMany);
            }
            let r = entry.strip_prefix(folder).unwrap_or(&entry);
            if crate::permissions::glob(&rel, &r.to_string_lossy()) {
                if out.len() == MATCH_LIMIT {
                    return Err(TooMany);
                }
                out.push(entry);
            } else if entry.file_name().is_some_and(|n| n != ".git") {
                todo.push(entry);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A contract glob matching more than a run's start can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooMany;

/// What a run says of a glob [`held_by`] could not hold.
pub fn too_many(pattern: &str) -> String {
    format!(
        "the contract glob {pattern:?} matches more than {MATCH_LIMIT} paths (or its folder has \
         over {WALK_LIMIT} entries) and is not held: give the rule a folder (keys/*)"
    )
}

/// The most entries [`held_by`] looks at for one pattern (a folder of a
/// million files is not walked at every run's start).
const WALK_LIMIT: usize = 20_000;

/// The most paths one pattern holds: each is a mount made at the run's start.
const MATCH_LIMIT: usize = 100;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_run_made_of_gits_code_is_removed() {
        let check = |before: &[&str], now: &[&str], expect: &[&str]| {
            assert_eq!(git_made(before, now), expect, "{before:?} -> {now:?}");
        };
        // Held by a mount where it was at the start: nothing to remove.
        check(&["config", "hooks"], &["config", "hooks"], &[]);
        // Made during the run: removed, whatever the agent wrote in it.
        check(&["config"], &["config", "commondir"], &["commondir"]);
        check(
            &["config", "hooks"],
            &["config", "config.worktree", "hooks", "info"],
            &["config.worktree", "info"],
        );
        check(&[], &["config", "hooks"], &["config", "hooks"]);
        // The rest of `.git` is the agent's git's to write (objects, refs, index).
        check(&["config"], &["config", "index", "ORIG_HEAD"], &[]);
        // Gone during the run (it could not be, under a mount): nothing to do.
        check(&["config", "info"], &["config"], &[]);
    }

    #[test]
    fn every_folder_above_a_held_path_is_pinned() {
        let check = |held: &[&str], expect: &[&str]| {
            let held: Vec<PathBuf> = held.iter().map(PathBuf::from).collect();
            let got = pins(Path::new("/w"), &held);
            let got: Vec<String> = got.iter().map(|p| p.display().to_string()).collect();
            assert_eq!(got, expect, "{held:?}");
        };
        // A top-level folder held whole is a mount point already: nothing above it.
        check(&["/w/secrets"], &[]);
        // `src/keys/*` holds src/keys: `mv src old` would carry it away.
        check(&["/w/src/keys"], &["/w/src"]);
        check(
            &["/w/src/deep/d.pem", "/w/src/b.pem"],
            &["/w/src", "/w/src/deep"],
        );
        // A folder held itself is not pinned too; parents come before children.
        check(&["/w/a/b/c", "/w/a"], &["/w/a/b"]);
        check(&["/w/.git/config", "/w/.git/hooks"], &["/w/.git"]);
        // Outside the folder: nothing of the folder's to pin.
        check(&["/etc/x/y", "/w"], &[]);
    }

    #[test]
    fn a_contracts_edit_glob_holds_what_it_names_in_the_folder() {
        let dirs: &[(&str, &[&str])] = &[
            ("/w", &[".git", "a.pem", "secrets", "src"]),
            ("/w/.git", &["x.pem"]),
            ("/w/secrets", &["k.txt"]),
            ("/w/src", &["b.pem", "c.rs", "deep"]),
            ("/w/src/deep", &["d.pem"]),
        ];
        let list = |p: &Path| -> Vec<PathBuf> {
            dirs.iter()
                .find(|(d, _)| Path::new(d) == p)
                .map(|(d, es)| es.iter().map(|e| Path::new(d).join(e)).collect())
                .unwrap_or_default()
        };
        let exists = |p: &Path| {
            p == Path::new("/w")
                || dirs
                    .iter()
                    .any(|(d, es)| es.iter().any(|e| Path::new(d).join(e) == p))
        };
        let check = |pattern: &str, expect: &[&str]| {
            let got = held_by(Path::new("/w"), pattern, &exists, &list).unwrap();
            let got: Vec<String> = got.iter().map(|p| p.display().to_string()).collect();
            assert_eq!(got, expect, "{pattern}");
        };
        // A folder's `*`: the folder, whole (what is made there later too).
        check("secrets/*", &["/w/secrets"]);
        check("/w/secrets/*", &["/w/secrets"]);
        check("./secrets/*", &["/w/secrets"]);
        check("secrets/k.txt", &["/w/secrets/k.txt"]);
        // What does not exist yet is the tools' and the patterns' to hold.
        check("secrets/new.txt", &[]);
        check("gone/*", &[]);
        // Anything else: what matches now, `.git` left to its own rules.
        check("src/*.pem", &["/w/src/b.pem", "/w/src/deep/d.pem"]);
        check("*.pem", &["/w/a.pem", "/w/src/b.pem", "/w/src/deep/d.pem"]);
        // Outside the folder, or climbing out of it: nothing here.
        check("/etc/*", &[]);
        check("../w/secrets/*", &[]);
        check("", &[]);
        // Each held path is a mount at the run's start: a glob matching more than
        // 100 (or walking more than 20,000 entries) is said, never cut short.
        let check = |files: usize, dirs: usize, expect: Result<usize, TooMany>| {
            let list = |p: &Path| -> Vec<PathBuf> {
                if p != Path::new("/m") {
                    return Vec::new();
                }
                let pems = (0..files).map(|i| p.join(format!("{i}.pem")));
                pems.chain((0..dirs).map(|i| p.join(format!("d{i}"))))
                    .collect()
            };
            let held = held_by(Path::new("/m"), "*.pem", &|_| true, &list);
            assert_eq!(held.map(|h| h.len()), expect, "{files} {dirs}");
        };
        check(100, 0, Ok(100));
        check(101, 0, Err(TooMany));
        // 20,000 entries walked at most (each d<i> is listed, empty).
        check(0, 19_999, Ok(0));
        check(0, 20_001, Err(TooMany));
    }
}
