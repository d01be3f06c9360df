//! Document paths: the one place that says which names a document may have.
//!
//! A path is relative, `/`-separated, at most [`MAX_DEPTH`] segments and
//! [`MAX_PATH_BYTES`] bytes (a name at most [`MAX_NAME_BYTES`]); each segment is letters, digits, `.`, `_`, `-` or spaces and
//! does not start with a dot (so no `..`, no hidden files, no `.git`); the extension is
//! one of [`EXTENSIONS`]. These rules hold for every provider, so a document can move
//! between providers, and they are checked before any file system call. Symlinks are
//! the file provider's concern (a valid path can still be a link that points outside).

use domain::error::{Error, Result};
use std::fmt;

pub const MAX_PATH_BYTES: usize = 256;
pub const MAX_DEPTH: usize = 8;
/// Per file or folder name: file systems allow 255 bytes, and writes need room for a
/// temp-file prefix and suffix.
pub const MAX_NAME_BYTES: usize = 200;
/// Text formats people open in an editor and diff in git.
pub const EXTENSIONS: &[&str] = &[
    "md", "markdown", "txt", "json", "yaml", "yml", "toml", "csv", "tsv", "diff", "patch", "log",
    "html", "xml",
];
/// The main document: what team_doc_read reads when no file is named.
pub const DEFAULT_DOC: &str = "notes.md";

/// A checked document path, e.g. `notes.md` or `design/api.md`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DocPath(String);

fn bad(path: &str, why: &str) -> Error {
    Error::invalid(format!(
        "invalid document path {path:?}: {why}. Use a relative path such as \"notes.md\" or \
         \"design/api.md\" (letters, digits, '.', '_', '-', spaces; one of .{})",
        EXTENSIONS.join(" .")
    ))
}

impl DocPath {
    pub fn parse(raw: &str) -> Result<Self> {
        let path = raw.trim();
        if path.is_empty() {
            return Err(bad(raw, "it is empty"));
        }
        if path.len() > MAX_PATH_BYTES {
            return Err(bad(
                raw,
                &format!("it is longer than {MAX_PATH_BYTES} bytes"),
            ));
        }
        if path.starts_with('/') || path.starts_with('~') || path.contains(':') {
            return Err(bad(raw, "it must be relative to the documents folder"));
        }
        if path.contains('\\') {
            return Err(bad(raw, "use '/' to separate folders"));
        }
        let segments: Vec<&str> = path.split('/').collect();
        if segments.len() > MAX_DEPTH {
            return Err(bad(
                raw,
                &format!("it is nested deeper than {MAX_DEPTH} levels"),
            ));
        }
        for seg in &segments {
            if seg.is_empty() {
                return Err(bad(
                    raw,
                    "it has an empty folder name (\"//\" or a trailing '/')",
                ));
            }
            if *seg == ".." || *seg == "." {
                return Err(bad(raw, "'.' and '..' are not allowed"));
            }
            if seg.starts_with('.') {
                return Err(bad(
                    raw,
                    "names starting with '.' are hidden and not allowed",
                ));
            }
            if seg.len() > MAX_NAME_BYTES {
                return Err(bad(
                    raw,
                    &format!("a name is longer than {MAX_NAME_BYTES} bytes"),
                ));
            }
            if seg.trim() != *seg {
                return Err(bad(raw, "a name starts or ends with a space"));
            }
            if let Some(c) = seg
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ' ')))
            {
                return Err(bad(raw, &format!("character {c:?} is not allowed")));
            }
        }
        let name = segments.last().copied().unwrap_or_default();
        let ext = name
            .rsplit_once('.')
            .map(|(_, e)| e.to_ascii_lowercase())
            .unwrap_or_default();
        if !EXTENSIONS.contains(&ext.as_str()) {
            return Err(bad(
                raw,
                "its extension is not one of the allowed text formats",
            ));
        }
        Ok(Self(path.to_owned()))
    }

    /// The path named by an optional tool argument (default: the main document).
    pub fn or_default(raw: Option<&str>) -> Result<Self> {
        Self::parse(raw.unwrap_or(DEFAULT_DOC))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_default(&self) -> bool {
        self.0 == DEFAULT_DOC
    }
}

impl fmt::Display for DocPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_and_nested_paths() {
        for ok in [
            "notes.md",
            "design/api.md",
            "a/b/c.json",
            "Release Notes.txt",
            "x.YAML",
        ] {
            assert_eq!(DocPath::parse(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn refuses_escapes_and_odd_names() {
        let cases = [
            ("../x.md", "'..'"),
            ("a/../../b.md", "'..'"),
            ("/etc/passwd", "relative"),
            ("~/x.md", "relative"),
            ("C:/x.md", "relative"),
            ("a\\b.md", "'/'"),
            ("a//b.md", "empty folder"),
            ("dir/", "empty folder"),
            (".git/config.md", "hidden"),
            ("notes", "extension"),
            ("run.sh", "extension"),
            ("a/b/c/d/e/f/g/h/i.md", "deeper"),
            ("a\0.md", "not allowed"),
            ("", "empty"),
        ];
        for (path, why) in cases {
            let e = DocPath::parse(path).unwrap_err().to_string();
            assert!(e.contains(why), "{path:?}: {e}");
        }
        let long = format!("{}.md", "a".repeat(MAX_PATH_BYTES));
        assert!(
            DocPath::parse(&long)
                .unwrap_err()
                .to_string()
                .contains("longer")
        );
    }
}
