//! An agent's own folder under the data dir (`workspaces/<name>/<tag>/<agent>`):
//! its sdk conversation, its mock counters, and its work when it has no `cwd`.
//!
//! Nothing in it may reach a later agent of the same name: agent_delete removes
//! it, and a run first claims it with a marker naming its agent's id (ids are
//! never reused), emptying a folder an earlier agent left (deleted while its
//! folder could not be removed, or on another node). The marker stands beside
//! the folder, not in it, so the agent working there cannot change it. A folder
//! without a marker (made before markers) is adopted as it is. These functions
//! block: call them off the async runtime's threads.

use std::io;
use std::path::{Path, PathBuf};

/// The marker of `dir`: beside it, `.<folder name>.agent-id`, holding the id of
/// the agent whose folder it is.
pub fn marker(dir: &Path) -> PathBuf {
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    dir.with_file_name(format!(".{name}.agent-id"))
}

/// Makes `dir` agent `id`'s folder, emptying it first if another agent's.
pub fn claim(dir: &Path, id: i64) -> io::Result<()> {
    let marker = marker(dir);
    match std::fs::read_to_string(&marker) {
        Ok(owner) if owner.trim() == id.to_string() => {
            return std::fs::create_dir_all(dir);
        }
        Ok(_) => remove(dir)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(marker, id.to_string())
}

/// Removes an agent's folder, everything in it and its marker (nothing if they
/// are not there).
pub fn remove(dir: &Path) -> io::Result<()> {
    for gone in [
        std::fs::remove_dir_all(dir),
        std::fs::remove_file(marker(dir)),
    ] {
        if let Err(e) = gone
            && e.kind() != io::ErrorKind::NotFound
        {
            return Err(e);
        }
    }
    Ok(())
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
        assert_eq!(std::fs::read_to_string(marker(&dir)).unwrap(), "8");
        // The agent working in the folder cannot reach its marker.
        assert!(!marker(&dir).starts_with(&dir));
    }

    #[test]
    fn a_folder_from_before_markers_is_adopted() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("bob");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("notes.md"), "kept").unwrap();
        claim(&dir, 3).unwrap();
        assert!(dir.join("notes.md").exists());
        remove(&dir).unwrap();
        remove(&dir).unwrap();
        assert!(!dir.exists() && !marker(&dir).exists());
    }
}
