//! An agent's own folder under the data dir (`workspaces/<name>/<tag>/<agent>`):
//! its sdk conversation, its mock counters, and its work when it has no `cwd`.
//!
//! Nothing in it may reach a later agent of the same name: agent_delete removes
//! it, and a run first claims it with a marker naming its agent's id (ids are
//! never reused), emptying a folder an earlier agent left (deleted while its
//! folder could not be removed, or on another node). A folder without a marker
//! (made before markers) is adopted as it is. These functions block: call them
//! off the async runtime's threads.

use std::io;
use std::path::Path;

/// The marker file: the id of the agent whose folder this is.
pub const MARKER: &str = ".agent-worker-agent-id";

/// Makes `dir` agent `id`'s folder, emptying it first if another agent's.
pub fn claim(dir: &Path, id: i64) -> io::Result<()> {
    let marker = dir.join(MARKER);
    match std::fs::read_to_string(&marker) {
        Ok(owner) if owner.trim() == id.to_string() => return Ok(()),
        Ok(_) => remove(dir)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(marker, id.to_string())
}

/// Removes an agent's folder and everything in it (nothing if it is not there).
pub fn remove(dir: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_kept_for_its_agent_and_emptied_for_another() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("w/main/alice");
        claim(&dir, 7).unwrap();
        std::fs::write(dir.join("sdk-conversation.json"), "secret").unwrap();
        claim(&dir, 7).unwrap();
        assert!(
            dir.join("sdk-conversation.json").exists(),
            "its own agent keeps it"
        );
        claim(&dir, 8).unwrap();
        assert!(
            !dir.join("sdk-conversation.json").exists(),
            "a new agent starts empty"
        );
        assert_eq!(std::fs::read_to_string(dir.join(MARKER)).unwrap(), "8");
    }

    #[test]
    fn a_folder_from_before_markers_is_adopted() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("notes.md"), "kept").unwrap();
        claim(t.path(), 3).unwrap();
        assert!(t.path().join("notes.md").exists());
        remove(t.path()).unwrap();
        remove(t.path()).unwrap();
        assert!(!t.path().exists());
    }
}
