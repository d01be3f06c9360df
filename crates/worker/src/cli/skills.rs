//! An agent's skills where its CLI looks for them, for the run only.
//!
//! - Claude Code reads `.claude/skills` of every `--add-dir` folder: the skills are
//!   copied into the run's scratch folder and that copy is added, so nothing is
//!   written where the agent works.
//! - Codex, Gemini CLI and OpenCode read `<folder>/.agents/skills`: each skill is
//!   copied there as `<name>/` with a marker beside it (`.<name>.agent-worker`)
//!   saying it is ours. A folder of that name without our marker is the user's
//!   own skill: it is never touched, and ours is not placed (the run says so).
//!   Several runs may share a folder: each holds a shared lock on the marker while
//!   it runs, and the last one to end (the one that can take it exclusively)
//!   removes the copy; placing and removing happen under an exclusive lock on the
//!   skills folder. A copy a killed worker left behind is ours by its marker: the
//!   next run takes it over, and the kernel removes it before a worktree's commit
//!   ([`domain::skills::remove_placed`]).
//! - Cursor has no skills folder of its own: its runs are not shown them.

use super::{Invocation, Kind, Scratch};
use crate::{Failure, Reporter};
use domain::protocol::{ErrorClass, SkillRef};
use domain::skills::{PLACED_DIR, marker_of};
use std::fs::File;
use std::path::{Path, PathBuf};

/// The skills placed in the agent's folder for this run, taken out again when it
/// is dropped (by the last run using them).
#[derive(Default)]
pub struct Placed {
    root: Option<PathBuf>,
    /// Each skill placed or shared: its name and its marker, held with a shared lock.
    held: Vec<(String, File)>,
}

fn fail(e: String) -> Failure {
    Failure::new(ErrorClass::Other, e)
}

/// Puts the run's skills where its CLI looks.
pub fn place(
    kind: Kind,
    skills: &[SkillRef],
    cwd: &Path,
    scratch: &Scratch,
    inv: &mut Invocation,
    report: &Reporter,
) -> Result<Placed, Failure> {
    if skills.is_empty() {
        return Ok(Placed::default());
    }
    match kind {
        Kind::Claude => {
            let root = scratch.dir.join("skills-root");
            for s in skills {
                copy_dir(&s.dir, &root.join(".claude/skills").join(&s.name))?;
            }
            inv.args.push("--add-dir".into());
            inv.args.push(root.display().to_string());
            Ok(Placed::default())
        }
        Kind::Cursor => {
            report.progress("cursor-agent has no skills folder: its skills are not shown to it");
            Ok(Placed::default())
        }
        Kind::Codex | Kind::Gemini | Kind::OpenCode => in_folder(skills, cwd, report),
    }
}

/// Places each skill in `<cwd>/.agents/skills`.
fn in_folder(skills: &[SkillRef], cwd: &Path, report: &Reporter) -> Result<Placed, Failure> {
    let root = cwd.join(PLACED_DIR);
    // A link where `.agents` or `.agents/skills` should be leads out of the folder:
    // nothing is made, written or removed through it.
    if let Err(e) = real_dir(&cwd.join(".agents")).and_then(|_| real_dir(&root)) {
        report.progress(format!("skills are not placed: {e}"));
        return Ok(Placed::default());
    }
    let folder = lock(&root)?;
    let mut placed = Placed {
        root: Some(root.clone()),
        held: Vec::new(),
    };
    for s in skills {
        match place_one(s, &root)? {
            Ok(m) => placed.held.push((s.name.clone(), m)),
            Err(why) => report.progress(format!("skill {} is not placed: {why}", s.name)),
        }
    }
    drop(folder);
    Ok(placed)
}

/// One skill in the skills folder (locked): its marker, held shared, or why
/// it is not placed. A copy of ours with other content (another agent's skill of
/// that name, or an older one) is replaced when no run uses it.
fn place_one(s: &SkillRef, root: &Path) -> Result<Result<File, String>, Failure> {
    let (dest, marker) = (root.join(&s.name), marker_of(root, &s.name));
    let mine = digests(s)?;
    let there = std::fs::symlink_metadata(&dest).is_ok();
    let theirs = match open_marker(&marker, false) {
        Ok(f) => Some(f),
        Err(_) if there => {
            return Ok(Err(format!(
                "{} is a skill of your own, left as it is",
                dest.display()
            )));
        }
        Err(_) => None,
    };
    let current = theirs
        .as_ref()
        .is_some_and(|_| std::fs::read_to_string(&marker).is_ok_and(|t| t == mine) && there);
    if !current {
        if let Some(f) = &theirs
            && f.try_lock().is_err()
        {
            return Ok(Err(
                "a run using another copy of that name is under way".into()
            ));
        }
        drop(theirs);
        let tmp = root.join(format!(".{}.agent-worker-new", s.name));
        let _ = std::fs::remove_dir_all(&tmp);
        copy_dir(&s.dir, &tmp)?;
        let _ = std::fs::remove_dir_all(&dest);
        let _ = std::fs::remove_file(&marker);
        use std::io::Write;
        open_marker(&marker, true)
            .and_then(|mut f| f.write_all(mine.as_bytes()))
            .map_err(|e| fail(format!("cannot write {}: {e}", marker.display())))?;
        std::fs::rename(&tmp, &dest)
            .map_err(|e| fail(format!("cannot place skill {}: {e}", s.name)))?;
    }
    let m = open_marker(&marker, false)
        .and_then(|f| f.lock_shared().map(|_| f))
        .map_err(|e| fail(format!("cannot lock {}: {e}", marker.display())))?;
    Ok(Ok(m))
}

/// The skill's files and their digests: what a copy of it holds.
fn digests(s: &SkillRef) -> Result<String, Failure> {
    let skill = domain::skills::load(&s.dir).map_err(fail)?;
    Ok(skill
        .files
        .iter()
        .map(|f| format!("{} {}\n", f.digest, f.path))
        .collect())
}

/// A marker, opened without following a link or waiting on a FIFO (a regular
/// file only); with `create`, made anew.
fn open_marker(path: &Path, create: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(create)
        .create_new(create)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(f)
}

/// `dir` as a folder of its own: made if missing, refused if a link or a file.
fn real_dir(dir: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!(
            "{} is a link or a file, not a folder",
            dir.display()
        )),
        Err(_) => {
            std::fs::create_dir(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
        }
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        let Some(root) = &self.root else { return };
        let Ok(_folder) = lock(root) else { return };
        for (name, shared) in self.held.drain(..) {
            drop(shared);
            let marker = marker_of(root, &name);
            // The last run using it can lock it alone; another still using it keeps it.
            let last = open_marker(&marker, false).is_ok_and(|f| f.try_lock().is_ok());
            if last {
                let _ = std::fs::remove_dir_all(root.join(&name));
                let _ = std::fs::remove_file(&marker);
            }
        }
        // Folders we may have made, if nothing else is in them.
        if std::fs::remove_dir(root).is_ok()
            && let Some(agents) = root.parent()
        {
            let _ = std::fs::remove_dir(agents);
        }
    }
}

/// The skills folder, locked exclusively until the file is dropped.
fn lock(root: &Path) -> Result<File, Failure> {
    File::open(root)
        .and_then(|f| f.lock().map(|_| f))
        .map_err(|e| fail(format!("cannot lock {}: {e}", root.display())))
}

/// Copies a skill's folder (files and folders only; the kernel checked it).
fn copy_dir(from: &Path, to: &Path) -> Result<(), Failure> {
    let skill = domain::skills::load(from).map_err(fail)?;
    for f in &skill.files {
        let dest = to.join(&f.path);
        if let Some(p) = dest.parent() {
            std::fs::create_dir_all(p)
                .map_err(|e| fail(format!("cannot create {}: {e}", p.display())))?;
        }
        std::fs::copy(from.join(&f.path), &dest)
            .map_err(|e| fail(format!("cannot copy skill {}: {e}", skill.name)))?;
    }
    Ok(())
}
