//! The sdk backend's file tools, confined to the agent's folder.
//!
//! Every path the model gives is resolved against the agent's working directory
//! (its root) and must stay inside it: `..` is refused outright, an absolute path
//! only if it lies inside, and a path whose existing part leads through a symlink
//! to somewhere else is refused (checked on the canonical path). Writes never go
//! through a symlink, never into `.git` (a hook written there would run commands
//! later, which an `edit` agent may not), and are atomic (a temp file renamed over
//! the old one). Every read is bounded: a file larger than the limit is refused,
//! not read, and only regular files are read (a FIFO or device would block or
//! never end).

use regex::Regex;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// Largest file read_file returns (ask for a range of lines for bigger ones).
pub const MAX_READ: u64 = 256 * 1024;
/// Largest file search_files looks into.
const MAX_SEARCHED: u64 = 1024 * 1024;
/// Largest file write_file or edit_file writes.
pub const MAX_WRITE: usize = 4 * 1024 * 1024;
/// Entries list_files returns; matches search_files returns; entries it walks.
const MAX_LISTED: usize = 1000;
const MAX_MATCHES: usize = 200;
const MAX_WALKED: usize = 20_000;
/// Folders list and search skip (they are never what a question is about and can
/// hold millions of files).
const SKIPPED: &[&str] = &[".git", "node_modules", "target", ".venv", "__pycache__"];

/// The agent's folder.
pub struct Root {
    dir: PathBuf,
}

type R<T> = Result<T, String>;

impl Root {
    pub fn new(cwd: &Path) -> R<Self> {
        let dir = cwd
            .canonicalize()
            .map_err(|e| format!("the agent's folder {} is not usable: {e}", cwd.display()))?;
        Ok(Self { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The lexical path for what the model wrote: inside the root, no `..`.
    fn lexical(&self, given: &str) -> R<PathBuf> {
        let given = given.trim();
        if given.is_empty() {
            return Err("the path is empty; give a path relative to your folder".into());
        }
        let p = Path::new(given);
        if p.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(format!(
                "{given}: `..` is not allowed; give a path inside your folder ({})",
                self.dir.display()
            ));
        }
        let full = if p.is_absolute() {
            p.to_owned()
        } else {
            self.dir.join(p)
        };
        if !full.starts_with(&self.dir) {
            return Err(format!(
                "{given} is outside your folder ({}); only paths inside it can be used",
                self.dir.display()
            ));
        }
        Ok(full)
    }

    /// An existing path, whose real location (symlinks followed) is inside the root.
    pub fn existing(&self, given: &str) -> R<PathBuf> {
        let full = self.lexical(given)?;
        let real = full
            .canonicalize()
            .map_err(|e| format!("{given}: {}", io_words(&e)))?;
        if !real.starts_with(&self.dir) {
            return Err(format!(
                "{given} leads outside your folder (through a symlink); it cannot be used"
            ));
        }
        Ok(real)
    }

    /// A path to write: its folder is (or will be) inside the root, it is not a
    /// symlink and not inside `.git`.
    pub fn writable(&self, given: &str) -> R<PathBuf> {
        let full = self.lexical(given)?;
        let rel = full.strip_prefix(&self.dir).unwrap_or(&full);
        if rel.components().any(|c| c.as_os_str() == ".git") {
            return Err(format!("{given}: files inside .git cannot be written"));
        }
        if rel.as_os_str().is_empty() {
            return Err(format!("{given} is your folder itself, not a file"));
        }
        // The deepest existing ancestor must really be inside the root.
        let mut anc = full.parent().map(Path::to_owned);
        while let Some(a) = anc {
            if a.exists() {
                let real = a
                    .canonicalize()
                    .map_err(|e| format!("{given}: {}", io_words(&e)))?;
                if !real.starts_with(&self.dir) {
                    return Err(format!(
                        "{given} leads outside your folder (through a symlink); it cannot be written"
                    ));
                }
                break;
            }
            anc = a.parent().map(Path::to_owned);
        }
        match fs::symlink_metadata(&full) {
            Ok(m) if m.file_type().is_symlink() => Err(format!(
                "{given} is a symlink; files are never written through links"
            )),
            Ok(m) if m.is_dir() => Err(format!("{given} is a folder, not a file")),
            _ => Ok(full),
        }
    }

    fn shown(&self, p: &Path) -> String {
        p.strip_prefix(&self.dir).unwrap_or(p).display().to_string()
    }
}

fn io_words(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or folder".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// Reads a regular file of at most `max` bytes as UTF-8 text (see [`domain::fsread`]).
pub fn read_text(path: &Path, max: u64) -> R<String> {
    domain::fsread::read_text(path, max, true)
}

/// read_file: the text, or lines `offset..offset+limit` (1-based) of it.
pub fn read_file(
    root: &Root,
    path: &str,
    offset: Option<usize>,
    limit: Option<usize>,
) -> R<String> {
    let p = root.existing(path)?;
    let text = read_text(&p, MAX_READ).map_err(|e| format!("{path}: {e}"))?;
    if offset.is_none() && limit.is_none() {
        return Ok(text);
    }
    let start = offset.unwrap_or(1).max(1) - 1;
    let n = limit.unwrap_or(usize::MAX);
    Ok(text
        .lines()
        .skip(start)
        .take(n)
        .collect::<Vec<_>>()
        .join("\n"))
}

/// list_files: the entries under `path` (one level, or all with `recursive`).
pub fn list_files(root: &Root, path: Option<&str>, recursive: bool) -> R<String> {
    let base = match path {
        Some(p) if !p.trim().is_empty() && p.trim() != "." => root.existing(p)?,
        _ => root.dir().to_owned(),
    };
    let mut out = Vec::new();
    let mut walked = 0;
    walk(&base, recursive, &mut walked, &mut |p, is_dir| {
        out.push(if is_dir {
            format!("{}/", root.shown(p))
        } else {
            root.shown(p)
        });
        out.len() < MAX_LISTED
    })?;
    out.sort();
    let cut = out.len() >= MAX_LISTED || walked >= MAX_WALKED;
    let mut s = out.join("\n");
    if cut {
        s.push_str(&format!(
            "\n(list cut at {} entries; list a subfolder for the rest)",
            out.len()
        ));
    }
    if s.is_empty() {
        s = "(empty)".into();
    }
    Ok(s)
}

/// Walks `dir` (not following symlinks, skipping [`SKIPPED`]); `f` returns false to stop.
fn walk(
    dir: &Path,
    recursive: bool,
    walked: &mut usize,
    f: &mut dyn FnMut(&Path, bool) -> bool,
) -> R<bool> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {}", dir.display(), io_words(&e)))?;
    for e in entries.flatten() {
        *walked += 1;
        if *walked >= MAX_WALKED {
            return Ok(false);
        }
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        let name = e.file_name();
        if ft.is_dir() && SKIPPED.iter().any(|s| name == *s) {
            continue;
        }
        if !f(&p, ft.is_dir()) {
            return Ok(false);
        }
        if recursive && ft.is_dir() && !walk(&p, true, walked, f)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// search_files: lines matching a regex, as `path:line: text`.
pub fn search_files(root: &Root, pattern: &str, path: Option<&str>) -> R<String> {
    let re = Regex::new(pattern)
        .map_err(|e| format!("pattern {pattern:?} is not a valid regex: {e}"))?;
    let base = match path {
        Some(p) if !p.trim().is_empty() && p.trim() != "." => root.existing(p)?,
        _ => root.dir().to_owned(),
    };
    let mut hits = Vec::new();
    // Returns whether to go on.
    let mut search = |p: &Path| -> bool {
        let Ok(m) = fs::symlink_metadata(p) else {
            return true;
        };
        if !m.is_file() || m.len() > MAX_SEARCHED {
            return true;
        }
        let Ok(text) = read_text(p, MAX_SEARCHED) else {
            return true;
        };
        for (i, line) in text.lines().enumerate() {
            if re.is_match(line) {
                let line: String = line.chars().take(300).collect();
                hits.push(format!("{}:{}: {line}", root.shown(p), i + 1));
                if hits.len() >= MAX_MATCHES {
                    return false;
                }
            }
        }
        true
    };
    if base.is_file() {
        search(&base);
    } else {
        let mut walked = 0;
        walk(&base, true, &mut walked, &mut |p, is_dir| {
            is_dir || search(p)
        })?;
    }
    Ok(match hits.len() {
        0 => "no matches".into(),
        n if n >= MAX_MATCHES => format!("{}\n(first {MAX_MATCHES} matches)", hits.join("\n")),
        _ => hits.join("\n"),
    })
}

/// write_file: creates or replaces a file (folders made as needed).
pub fn write_file(root: &Root, path: &str, content: &str) -> R<String> {
    if content.len() > MAX_WRITE {
        return Err(format!("the content is larger than {MAX_WRITE} bytes"));
    }
    let p = root.writable(path)?;
    let existed = p.exists();
    write_atomic(&p, content).map_err(|e| format!("{path}: {e}"))?;
    Ok(format!(
        "{} {} ({} bytes)",
        if existed { "replaced" } else { "created" },
        root.shown(&p),
        content.len()
    ))
}

/// edit_file: replaces `old` with `new`, which must occur exactly once (or, with
/// `all`, at least once).
pub fn edit_file(root: &Root, path: &str, old: &str, new: &str, all: bool) -> R<String> {
    if old.is_empty() {
        return Err(
            "old_string is empty; give the exact text to replace (write_file creates files)".into(),
        );
    }
    let p = root.writable(path)?;
    let text = read_text(&p, MAX_WRITE as u64).map_err(|e| format!("{path}: {e}"))?;
    let n = text.matches(old).count();
    let out = match (n, all) {
        (0, _) => {
            return Err(format!(
                "{path}: old_string was not found; read the file and copy the text exactly (spaces and line breaks included)"
            ));
        }
        (1, _) | (_, true) => text.replace(old, new),
        (n, false) => {
            return Err(format!(
                "{path}: old_string occurs {n} times; include more surrounding text so it is unique, or set replace_all"
            ));
        }
    };
    if out.len() > MAX_WRITE {
        return Err(format!("the result would be larger than {MAX_WRITE} bytes"));
    }
    write_atomic(&p, &out).map_err(|e| format!("{path}: {e}"))?;
    Ok(format!("replaced {n} occurrence(s) in {}", root.shown(&p)))
}

/// Writes next to the target and renames over it, keeping an existing file's mode.
fn write_atomic(path: &Path, content: &str) -> Result<(), String> {
    use std::io::Write;
    let dir = path.parent().ok_or("no parent folder")?;
    fs::create_dir_all(dir).map_err(|e| io_words(&e))?;
    let mode = fs::metadata(path).ok().map(|m| m.permissions());
    let tmp = dir.join(format!(
        ".{}.aw-tmp-{}",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(content.as_bytes())?;
        f.sync_all()?;
        if let Some(m) = &mode {
            fs::set_permissions(&tmp, m.clone())?;
        }
        fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_words(&e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_folder() {
        let outer = tempfile::tempdir().unwrap();
        let dir = outer.path().join("work");
        fs::create_dir(&dir).unwrap();
        fs::write(outer.path().join("secret.txt"), "s").unwrap();
        std::os::unix::fs::symlink(outer.path(), dir.join("up")).unwrap();
        std::os::unix::fs::symlink(outer.path().join("secret.txt"), dir.join("link.txt")).unwrap();
        let root = Root::new(&dir).unwrap();
        assert!(
            read_file(&root, "../secret.txt", None, None)
                .unwrap_err()
                .contains("..")
        );
        let abs = outer.path().join("secret.txt").display().to_string();
        assert!(
            read_file(&root, &abs, None, None)
                .unwrap_err()
                .contains("outside")
        );
        assert!(
            read_file(&root, "up/secret.txt", None, None)
                .unwrap_err()
                .contains("symlink")
        );
        assert!(
            read_file(&root, "link.txt", None, None)
                .unwrap_err()
                .contains("symlink")
        );
        assert!(
            write_file(&root, "up/new.txt", "x")
                .unwrap_err()
                .contains("outside")
        );
        assert!(
            write_file(&root, "link.txt", "x")
                .unwrap_err()
                .contains("symlink")
        );
        assert!(
            write_file(&root, ".git/hooks/pre-commit", "x")
                .unwrap_err()
                .contains(".git")
        );
        assert_eq!(
            fs::read_to_string(outer.path().join("secret.txt")).unwrap(),
            "s"
        );
        write_file(&root, "sub/a.txt", "hello").unwrap();
        assert_eq!(read_file(&root, "sub/a.txt", None, None).unwrap(), "hello");
        let abs_in = dir.join("sub/a.txt").display().to_string();
        assert_eq!(read_file(&root, &abs_in, None, None).unwrap(), "hello");
    }

    #[test]
    fn edit_refuses_ambiguous_and_missing_text() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path()).unwrap();
        write_file(&root, "a.rs", "let x = 1;\nlet x = 1;\nlet y = 2;\n").unwrap();
        assert!(
            edit_file(&root, "a.rs", "let x = 1;", "let x = 3;", false)
                .unwrap_err()
                .contains("2 times")
        );
        assert!(
            edit_file(&root, "a.rs", "let z", "q", false)
                .unwrap_err()
                .contains("not found")
        );
        edit_file(&root, "a.rs", "let y = 2;", "let y = 5;", false).unwrap();
        edit_file(&root, "a.rs", "let x = 1;", "let x = 3;", true).unwrap();
        assert_eq!(
            read_file(&root, "a.rs", None, None).unwrap(),
            "let x = 3;\nlet x = 3;\nlet y = 5;\n"
        );
        assert_eq!(
            read_file(&root, "a.rs", Some(2), Some(1)).unwrap(),
            "let x = 3;"
        );
    }

    #[test]
    fn list_and_search_skip_noise_and_stay_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path()).unwrap();
        write_file(&root, "src/main.rs", "fn main() {}\n// TODO: tests\n").unwrap();
        fs::create_dir_all(dir.path().join(".git")).unwrap();
        fs::write(dir.path().join(".git/config"), "TODO").unwrap();
        let l = list_files(&root, None, true).unwrap();
        assert!(l.contains("src/main.rs") && !l.contains(".git"), "{l}");
        let s = search_files(&root, "TODO", None).unwrap();
        assert_eq!(s, "src/main.rs:2: // TODO: tests");
        assert!(
            search_files(&root, "(", None)
                .unwrap_err()
                .contains("regex")
        );
        nix::unistd::mkfifo(&dir.path().join("pipe.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(
            read_file(&root, "pipe.md", None, None)
                .unwrap_err()
                .contains("regular")
        );
    }
}
