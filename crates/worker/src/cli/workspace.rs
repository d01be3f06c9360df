//! Config files a CLI reads from its workspace (`.cursor/mcp.json`,
//! `.gemini/settings.json`): our server is merged in for the run and taken out again
//! after, so the user's own configuration survives.
//!
//! Several runs may use one workspace at once (the agents of a workflow default to
//! the workflow's folder), each in its own worker process. Restoring the file a run
//! saw at its start would pull our server from under a run still starting, and the
//! last run to end would put back a copy that still has it. So:
//! - the file as it was before any run is saved beside it as
//!   `<file>.agent-worker-original` by the first run, and put back only by the last
//!   one: each run holds a shared lock on that backup while it runs, and a run that
//!   can then take it exclusively knows no other run is using the file;
//! - merging and restoring happen under an exclusive lock on the folder, so two runs
//!   never interleave them;
//! - a worker killed before it could restore leaves the backup behind, and the next
//!   run in that workspace takes it as the original: the file is still put back then;
//! - restoring takes out only our entry (or puts back the user's own entry of that
//!   name), so an edit the user made to the file during the run is kept.
//!
//! The locks are `flock(2)` locks, released by the kernel when a worker dies.

use super::SERVER;
use crate::Failure;
use domain::protocol::ErrorClass;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Appended to the config file's name for the saved original.
pub const BACKUP_SUFFIX: &str = ".agent-worker-original";

/// The file as it was before the first run that touched it.
#[derive(Serialize, Deserialize)]
struct Original {
    /// Its text; `None` when there was no file.
    text: Option<String>,
    /// Whether the first run created the file's folder (removed again if empty).
    created_dir: bool,
}

/// Our server entry in a workspace config file, for as long as this value lives.
pub struct WorkspaceFile {
    path: PathBuf,
    key: String,
    /// The entries of ours under `key`: the team server and the agent's own.
    names: Vec<String>,
    /// Open with a shared lock while the run uses the file.
    in_use: Option<File>,
}

fn fail(e: String) -> Failure {
    Failure::new(ErrorClass::Other, e)
}

fn backup_of(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(BACKUP_SUFFIX);
    path.with_file_name(name)
}

/// A file's text, `None` when it does not exist.
fn read_opt(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The folder, opened and locked exclusively until the returned file is dropped.
fn lock_dir(dir: &Path) -> std::io::Result<File> {
    let f = File::open(dir)?;
    f.lock()?;
    Ok(f)
}

/// Whether the locked `folder` is still the one at `dir`: the last run removes a
/// folder it created, and a run that opened it just before then gets its lock on a
/// folder that no longer has a name.
fn still_there(folder: &File, dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (folder.metadata(), std::fs::metadata(dir)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The folder, created when missing, and locked exclusively; also whether this call
/// created it.
fn create_and_lock_dir(dir: &Path) -> Result<(bool, File), Failure> {
    // A folder removed under us is made again. The tries are bounded because some
    // filesystems (network, FUSE) may not report one identity for a folder through
    // its path and through an open handle: there the lock in hand has to do, rather
    // than the worker spinning until the kernel's startup limit kills it.
    const TRIES: usize = 5;
    let mut attempt = 0;
    loop {
        attempt += 1;
        // A folder the run's sandbox made for this counts as made by the run.
        let created = !dir.exists() || crate::sandbox::made(dir);
        std::fs::create_dir_all(dir)
            .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
        let lock =
            lock_dir(dir).map_err(|e| fail(format!("cannot lock {}: {e}", dir.display())))?;
        if attempt == TRIES || still_there(&lock, dir) {
            return Ok((created, lock));
        }
    }
}

impl WorkspaceFile {
    /// Merges `server` as our entry into the JSON object at `key` of the file
    /// (creating the file and its folder when needed).
    pub fn merge_server(path: PathBuf, key: &str, server: Value) -> Result<Self, Failure> {
        Self::merge_servers(path, key, vec![(SERVER.to_owned(), server)])
    }

    /// As [`merge_server`](Self::merge_server), for several entries at once (the
    /// team server and the agent's own servers).
    pub fn merge_servers(
        path: PathBuf,
        key: &str,
        servers: Vec<(String, Value)>,
    ) -> Result<Self, Failure> {
        let shown = path.display().to_string();
        let dir = path.parent().unwrap_or(Path::new(".")).to_owned();
        let (created_dir, _dir_lock) = create_and_lock_dir(&dir)?;

        let current = read_opt(&path).map_err(|e| fail(format!("cannot read {shown}: {e}")))?;
        let mut doc: Value = match &current {
            Some(t) => serde_json::from_str(t).map_err(|e| {
                fail(format!(
                    "{shown} is not valid JSON ({e}); fix or remove it so the agent's MCP server can be added"
                ))
            })?,
            None => Value::Object(Default::default()),
        };
        doc.as_object_mut()
            .ok_or_else(|| fail(format!("{shown} must hold a JSON object")))?
            .entry(key)
            .or_insert_with(|| Value::Object(Default::default()))
            .as_object_mut()
            .ok_or_else(|| fail(format!("{key} in {shown} must be an object")))?
            .extend(servers.iter().cloned());
        let names = servers.into_iter().map(|(n, _)| n).collect();

        // The first run saves the original; later ones (and a run after a crashed
        // one) find it there.
        let backup = backup_of(&path);
        let saved_here = !backup.exists();
        if saved_here {
            let original = Original {
                text: current,
                created_dir,
            };
            std::fs::write(&backup, serde_json::to_vec(&original).unwrap_or_default())
                .map_err(|e| fail(format!("cannot write {}: {e}", backup.display())))?;
        }
        let in_use = std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap_or_default())
            .and_then(|_| File::open(&backup))
            .and_then(|f| f.lock_shared().map(|_| f));
        match in_use {
            Ok(f) => Ok(Self {
                path,
                key: key.to_owned(),
                names,
                in_use: Some(f),
            }),
            Err(e) => {
                if saved_here {
                    let _ = std::fs::remove_file(&backup);
                }
                Err(fail(format!("cannot write {shown}: {e}")))
            }
        }
    }

    /// Puts the file back as the original had it, keeping edits made meanwhile.
    fn restore(&self, original: &Original) {
        let put_back = || {
            let _ = match &original.text {
                Some(t) => std::fs::write(&self.path, t),
                None => std::fs::remove_file(&self.path),
            };
        };
        // Deleted during the run: nothing of ours is left.
        let Ok(Some(current)) = read_opt(&self.path) else {
            return;
        };
        let Ok(mut doc) = serde_json::from_str::<Value>(&current) else {
            return put_back();
        };
        let before: Value = original
            .text
            .as_deref()
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_else(|| Value::Object(Default::default()));
        if let Some(servers) = doc.get_mut(&self.key).and_then(Value::as_object_mut) {
            for name in &self.names {
                match before.get(&self.key).and_then(|s| s.get(name)).cloned() {
                    Some(v) => servers.insert(name.clone(), v),
                    None => servers.remove(name),
                };
            }
            if servers.is_empty() && before.get(&self.key).is_none() {
                doc.as_object_mut().map(|o| o.remove(&self.key));
            }
        }
        if doc == before {
            put_back();
        } else {
            let _ = std::fs::write(
                &self.path,
                serde_json::to_vec_pretty(&doc).unwrap_or_default(),
            );
        }
    }
}

impl Drop for WorkspaceFile {
    fn drop(&mut self) {
        let Some(dir) = self.path.parent().map(Path::to_owned) else {
            return;
        };
        let Ok(dir_lock) = lock_dir(&dir) else {
            return;
        };
        // Let go of our shared lock, then see whether anyone else still holds one
        // (nobody can take a new one while we hold the folder).
        drop(self.in_use.take());
        let backup = backup_of(&self.path);
        let last = File::open(&backup).is_ok_and(|f| f.try_lock().is_ok());
        if !last {
            return;
        }
        let Some(original) = read_opt(&backup)
            .ok()
            .flatten()
            .and_then(|t| serde_json::from_str::<Original>(&t).ok())
        else {
            return;
        };
        self.restore(&original);
        let _ = std::fs::remove_file(&backup);
        if original.created_dir {
            // Only if empty: the user may have put something there meanwhile. A run
            // waiting for the lock sees the folder gone and makes a new one.
            let _ = std::fs::remove_dir(&dir);
        }
        drop(dir_lock);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merge(path: &Path, url: &str) -> WorkspaceFile {
        WorkspaceFile::merge_server(path.to_owned(), "mcpServers", json!({ "url": url })).unwrap()
    }

    fn read(path: &Path) -> Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn a_file_that_was_not_there_is_gone_again_with_its_folder() {
        let ws = tempfile::tempdir().unwrap();
        let path = ws.path().join(".gemini/settings.json");
        let f = merge(&path, "http://k");
        assert_eq!(read(&path)["mcpServers"][SERVER]["url"], "http://k");
        assert!(backup_of(&path).exists());
        drop(f);
        assert!(!ws.path().join(".gemini").exists(), "folder left behind");
    }

    #[test]
    fn the_users_file_comes_back_byte_for_byte() {
        let ws = tempfile::tempdir().unwrap();
        let path = ws.path().join("mcp.json");
        let original =
            "{\n  \"mcpServers\": {\"mine\": {\"command\": \"x\"}},\n  \"theme\": 1\n}\n";
        std::fs::write(&path, original).unwrap();
        let f = merge(&path, "http://k");
        let during = read(&path);
        assert_eq!(during["mcpServers"]["mine"]["command"], "x");
        assert_eq!(during["mcpServers"][SERVER]["url"], "http://k");
        assert_eq!(during["theme"], 1);
        drop(f);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
        assert!(!backup_of(&path).exists());
    }

    #[test]
    fn the_last_of_two_runs_restores_and_the_first_leaves_ours_in_place() {
        let ws = tempfile::tempdir().unwrap();
        let path = ws.path().join(".cursor/mcp.json");
        let a = merge(&path, "http://k");
        let b = merge(&path, "http://k");
        drop(a);
        // b's CLI may still be starting: our server must still be there.
        assert_eq!(read(&path)["mcpServers"][SERVER]["url"], "http://k");
        drop(b);
        assert!(!ws.path().join(".cursor").exists());
        // The other order.
        std::fs::create_dir(ws.path().join(".cursor")).unwrap();
        std::fs::write(&path, "{\"x\":1}").unwrap();
        let a = merge(&path, "http://k");
        let b = merge(&path, "http://k");
        drop(b);
        assert_eq!(read(&path)["mcpServers"][SERVER]["url"], "http://k");
        drop(a);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"x\":1}");
    }

    #[test]
    fn a_run_after_a_killed_one_puts_the_original_back() {
        let ws = tempfile::tempdir().unwrap();
        let path = ws.path().join("settings.json");
        std::fs::write(&path, "{\"mine\":true}").unwrap();
        // What a worker killed mid-run leaves: our entry in the file, the backup beside it.
        let killed = merge(&path, "http://old");
        let kept = std::fs::read(backup_of(&path)).unwrap();
        let merged = std::fs::read(&path).unwrap();
        drop(killed);
        std::fs::write(backup_of(&path), kept).unwrap();
        std::fs::write(&path, merged).unwrap();

        let next = merge(&path, "http://new");
        assert_eq!(read(&path)["mcpServers"][SERVER]["url"], "http://new");
        drop(next);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"mine\":true}");
        assert!(!backup_of(&path).exists());
    }

    #[test]
    fn an_edit_made_during_the_run_is_kept_and_their_own_entry_of_our_name_returns() {
        let ws = tempfile::tempdir().unwrap();
        let path = ws.path().join("settings.json");
        std::fs::write(
            &path,
            json!({"mcpServers": {SERVER: {"url": "theirs"}}}).to_string(),
        )
        .unwrap();
        let f = merge(&path, "http://k");
        let mut during = read(&path);
        during["mcpServers"]["added"] = json!({"url": "later"});
        std::fs::write(&path, during.to_string()).unwrap();
        drop(f);
        let after = read(&path);
        assert_eq!(after["mcpServers"][SERVER]["url"], "theirs");
        assert_eq!(after["mcpServers"]["added"]["url"], "later");
    }

    #[test]
    fn a_run_waiting_while_the_last_one_removes_the_folder_makes_a_new_one() {
        let ws = tempfile::tempdir().unwrap();
        let dir = ws.path().join(".gemini");
        let path = dir.join("settings.json");
        std::fs::create_dir(&dir).unwrap();
        // The last run's drop holds the folder, while a new run starts.
        let held = lock_dir(&dir).unwrap();
        let starting = std::thread::spawn({
            let path = path.clone();
            move || {
                WorkspaceFile::merge_server(path, "mcpServers", json!({ "url": "http://k" }))
                    .map_err(|e| e.message)
            }
        });
        // Give it time to open the folder and wait for the lock (had it not yet,
        // it finds no folder and the test passes either way).
        std::thread::sleep(std::time::Duration::from_millis(300));
        // The last run removes the folder it had created, then lets go.
        std::fs::remove_dir(&dir).unwrap();
        drop(held);
        let next = starting.join().unwrap().expect("the waiting run failed");
        assert_eq!(read(&path)["mcpServers"][SERVER]["url"], "http://k");
        drop(next);
        assert!(!dir.exists(), "folder left behind");
    }

    #[test]
    fn a_broken_file_is_refused_and_left_alone() {
        let ws = tempfile::tempdir().unwrap();
        let path = ws.path().join("mcp.json");
        std::fs::write(&path, "{not json").unwrap();
        let e = WorkspaceFile::merge_server(path.clone(), "mcpServers", json!({}))
            .err()
            .unwrap();
        assert!(e.message.contains("is not valid JSON"), "{}", e.message);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{not json");
        assert!(!backup_of(&path).exists());
        std::fs::write(&path, "[1]").unwrap();
        let e = WorkspaceFile::merge_server(path.clone(), "mcpServers", json!({}))
            .err()
            .unwrap();
        assert!(
            e.message.contains("must hold a JSON object"),
            "{}",
            e.message
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[1]");
    }
}
