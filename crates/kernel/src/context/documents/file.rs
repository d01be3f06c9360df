//! The file provider: documents are real files in a folder, so people can open them
//! in an editor and diff them in git.
//!
//! - Containment: every existing component of a document's path is checked; a symlink
//!   must resolve inside the folder, and a write never goes through a symlinked file
//!   (it would replace the link). `DocPath` has already refused `..`, absolute and
//!   hidden paths.
//! - Atomic writes: the new content goes to a hidden temp file in the same folder, is
//!   synced, and is renamed over the old one, so a crash leaves the old or the new
//!   file, never half of one; readers never take a lock.
//! - One writer at a time: read-check-write runs under one lock per kernel
//!   ([`Writes`], which the room hands every file provider it builds; one kernel per
//!   data dir, and document writes are rare), which is what makes
//!   `expected_version` exact.
//! - Blocking file I/O runs on tokio's blocking pool.

use super::{
    BoxFuture, Doc, DocEntry, DocPath, Edit, MAX_DOC_BYTES, MAX_LISTED, Provider, version_of,
};
use domain::error::{Error, Result};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

/// The kernel's one document writer at a time: clones share the lock, which only
/// [`FileProvider`]'s write takes.
#[derive(Clone, Default)]
pub struct Writes(Arc<Mutex<()>>);

#[derive(Clone)]
pub struct FileProvider {
    root: PathBuf,
    /// The instance's own folder is created on first write; a bound folder must exist.
    create_root: bool,
    writes: Writes,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::internal(format!("cannot {what} {}: {e}", path.display()))
}

fn mtime_ms(meta: &fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64)
}

impl FileProvider {
    pub fn new(root: PathBuf, create_root: bool, writes: Writes) -> Self {
        Self {
            root,
            create_root,
            writes,
        }
    }

    /// The folder, canonical; `None` when it does not exist yet (no documents).
    fn root(&self, for_write: bool) -> Result<Option<PathBuf>> {
        if !self.root.exists() {
            if !self.create_root {
                return Err(Error::invalid(format!(
                    "the documents folder {} bound to this workflow does not exist; create it or bind another",
                    self.root.display()
                )));
            }
            if !for_write {
                return Ok(None);
            }
            fs::create_dir_all(&self.root).map_err(|e| io("create", &self.root, e))?;
        }
        Ok(Some(
            self.root
                .canonicalize()
                .map_err(|e| io("resolve", &self.root, e))?,
        ))
    }

    /// The file for `path`, after checking that nothing on the way leaves `root`.
    fn resolve(root: &Path, path: &DocPath, for_write: bool) -> Result<PathBuf> {
        let mut at = root.to_path_buf();
        let segments: Vec<&str> = path.as_str().split('/').collect();
        for (i, seg) in segments.iter().enumerate() {
            at.push(seg);
            let last = i + 1 == segments.len();
            let Ok(meta) = fs::symlink_metadata(&at) else {
                // Nothing there yet: what follows is created by us, as plain folders.
                return Ok(root.join(path.as_str()));
            };
            if meta.file_type().is_symlink() {
                let target = at.canonicalize().map_err(|_| {
                    Error::forbidden(format!("{path} goes through a broken symbolic link"))
                })?;
                if !contained(root, &target) {
                    return Err(Error::forbidden(format!(
                        "{path} is a symbolic link that points outside the documents folder (or to a hidden \
                         file in it); it cannot be used"
                    )));
                }
                if last && for_write {
                    return Err(Error::forbidden(format!(
                        "{path} is a symbolic link; write to the file it points to instead"
                    )));
                }
            }
            if last && at.is_dir() {
                return Err(Error::invalid(format!(
                    "{path} is a folder, not a document"
                )));
            }
            if !last && !at.is_dir() {
                return Err(Error::invalid(format!(
                    "{path}: {seg} is a file, not a folder"
                )));
            }
        }
        Ok(at)
    }

    fn read_at(file: &Path, path: &DocPath) -> Result<Option<Doc>> {
        use domain::fsread::{self, ReadError};
        let bytes = match fsread::read(file, MAX_DOC_BYTES as u64, true) {
            Ok(b) => b,
            Err(ReadError::NotFound) => return Ok(None),
            Err(ReadError::TooLarge(size, _)) => {
                return Err(Error::invalid(format!(
                    "{path} is {size} bytes, more than a document may hold ({MAX_DOC_BYTES}); it was put there by \
                     hand and cannot be read through agent-worker"
                )));
            }
            Err(e @ (ReadError::NotRegular(_) | ReadError::Symlink)) => {
                return Err(Error::invalid(format!(
                    "{path} cannot be read: {e}; only regular files are documents"
                )));
            }
            Err(ReadError::Io(e)) => return Err(io("read", file, e)),
        };
        let meta = fs::metadata(file).map_err(|e| io("read", file, e))?;
        let content = String::from_utf8(bytes)
            .map_err(|_| Error::invalid(format!("{path} is not UTF-8 text and cannot be read")))?;
        Ok(Some(Doc {
            version: version_of(&content),
            content,
            updated_at: mtime_ms(&meta),
        }))
    }

    fn read_blocking(&self, path: &DocPath) -> Result<Option<Doc>> {
        let Some(root) = self.root(false)? else {
            return Ok(None);
        };
        let file = Self::resolve(&root, path, false)?;
        Self::read_at(&file, path)
    }

    fn update_blocking(&self, path: &DocPath, edit: Edit) -> Result<(Doc, bool)> {
        let _one_writer = self.writes.0.lock().unwrap_or_else(|p| p.into_inner());
        let root = self.root(true)?.expect("created for writing");
        let file = Self::resolve(&root, path, true)?;
        let current = Self::read_at(&file, path)?;
        let content = edit(current.as_ref())?;
        let dir = file.parent().expect("a document has a folder");
        fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("doc");
        let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::now_v7()));
        let written = (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(content.as_bytes())?;
            // Keep the file's permissions (a 0600 file stays 0600).
            if let Ok(meta) = fs::metadata(&file) {
                f.set_permissions(meta.permissions())?;
            }
            f.sync_all()?;
            fs::rename(&tmp, &file)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(io("write", &file, e));
        }
        // Make the rename durable. It has happened either way, so a failure here is
        // logged rather than reported as a failed write.
        if let Err(e) = fs::File::open(dir).and_then(|d| d.sync_all()) {
            tracing::warn!("could not sync folder {}: {e}", dir.display());
        }
        let updated_at = fs::metadata(&file).map(|m| mtime_ms(&m)).unwrap_or(0);
        Ok((
            Doc {
                version: version_of(&content),
                content,
                updated_at,
            },
            current.is_none(),
        ))
    }

    fn list_blocking(&self) -> Result<Vec<DocEntry>> {
        let Some(root) = self.root(false)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        walk(&root, &root, 0, &mut out)?;
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out.truncate(MAX_LISTED + 1);
        Ok(out)
    }
}

/// Whether a resolved symlink target stays inside `root` and out of hidden entries
/// (a link must not turn `.git/config` or `.github/` into a document).
fn contained(root: &Path, target: &Path) -> bool {
    target.strip_prefix(root).is_ok_and(|rel| {
        rel.components()
            .all(|c| !c.as_os_str().to_string_lossy().starts_with('.'))
    })
}

/// Collects the documents under `dir`: files whose relative path is a valid document
/// path, and symlinked files that stay inside `root`. Hidden entries (temp files,
/// `.git`) are skipped; symlinked folders are not followed (no cycles, no escape).
fn walk(root: &Path, dir: &Path, depth: usize, out: &mut Vec<DocEntry>) -> Result<()> {
    if depth >= super::path::MAX_DEPTH || out.len() > MAX_LISTED {
        return Ok(());
    }
    let entries = fs::read_dir(dir).map_err(|e| io("list", dir, e))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let full = entry.path();
        if kind.is_dir() {
            // A subfolder we may not read (someone's 0700 data dir) hides only itself.
            if let Err(e) = walk(root, &full, depth + 1, out) {
                tracing::debug!("skipping {}: {e}", full.display());
            }
            continue;
        }
        if kind.is_symlink() {
            match full.canonicalize() {
                Ok(t) if contained(root, &t) && t.is_file() => {}
                _ => continue,
            }
        } else if !kind.is_file() {
            continue;
        }
        let Ok(rel) = full.strip_prefix(root) else {
            continue;
        };
        let Some(rel) = rel.to_str() else { continue };
        if DocPath::parse(rel).is_err() {
            continue;
        }
        let Ok(meta) = fs::metadata(&full) else {
            continue;
        };
        out.push(DocEntry {
            path: rel.to_owned(),
            size: meta.len(),
            updated_at: mtime_ms(&meta),
        });
    }
    Ok(())
}

/// Runs blocking file work off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::internal(format!("document task failed: {e}")))?
}

impl Provider for FileProvider {
    fn read<'a>(&'a self, path: &'a DocPath) -> BoxFuture<'a, Option<Doc>> {
        let (me, path) = (self.clone(), path.clone());
        Box::pin(blocking(move || me.read_blocking(&path)))
    }

    fn update<'a>(
        &'a self,
        path: &'a DocPath,
        _by: &'a str,
        edit: Edit,
    ) -> BoxFuture<'a, (Doc, bool)> {
        let (me, path) = (self.clone(), path.clone());
        Box::pin(blocking(move || me.update_blocking(&path, edit)))
    }

    fn list(&self) -> BoxFuture<'_, Vec<DocEntry>> {
        let me = self.clone();
        Box::pin(blocking(move || me.list_blocking()))
    }
}
