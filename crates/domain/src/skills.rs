//! An agent's skills (the Agent Skills format): each a folder holding `SKILL.md`,
//! whose YAML frontmatter gives its `name` (1–64 of `a-z`, `0-9` and `-`, no `-`
//! at either end or twice in a row, the folder's own name) and its `description`
//! (1–1024 characters: what it does and when to use it). The folder's other files
//! go with it. Read with bounds (at most 512 files and 16 MiB a skill, no link that
//! leads out of it, no FIFO or device), blocking: callers on the async runtime
//! run it in `spawn_blocking`. An error names the skill and the file at fault.

use crate::fsread;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file every skill has.
pub const SKILL_MD: &str = "SKILL.md";
/// Files one skill may hold at most, and bytes in all.
pub const MAX_FILES: usize = 512;
pub const MAX_BYTES: u64 = 16 * 1024 * 1024;
/// SKILL.md at most.
const MAX_SKILL_MD: u64 = 1024 * 1024;
/// The most a SKILL.md's frontmatter may take.
pub const MAX_FRONTMATTER: usize = 64 * 1024;
/// Skills one agent may have at most.
pub const MAX_SKILLS: usize = 32;

/// Where a run's skills are placed in its folder for the CLIs that read them
/// there (Codex, Gemini CLI, OpenCode), each with a marker beside it.
pub const PLACED_DIR: &str = ".agents/skills";

/// The marker that says the skill `name` in `root` was placed by a run.
pub fn marker_of(root: &Path, name: &str) -> PathBuf {
    root.join(format!(".{name}.agent-worker"))
}

/// Removes the skills runs placed in `folder` (those with a marker) and the
/// markers, and the skills folder if nothing else is in it: what a worker killed
/// before it could clean up left behind. Only while no run uses the folder.
pub fn remove_placed(folder: &Path) {
    let root = folder.join(PLACED_DIR);
    // `.agents` or its `skills` made a link by an agent leads elsewhere: not ours.
    if !real_dirs(folder, &root) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(&root) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(name) = file
            .strip_prefix('.')
            .and_then(|f| f.strip_suffix(".agent-worker"))
        else {
            continue;
        };
        let _ = std::fs::remove_dir_all(root.join(name));
        let _ = std::fs::remove_file(e.path());
    }
    if std::fs::remove_dir(&root).is_ok()
        && let Some(agents) = root.parent()
    {
        let _ = std::fs::remove_dir(agents);
    }
}

/// Whether every folder from `folder` down to `root` is a folder, not a link.
pub fn real_dirs(folder: &Path, root: &Path) -> bool {
    let Ok(rel) = root.strip_prefix(folder) else {
        return false;
    };
    let mut at = folder.to_owned();
    for c in rel.components() {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            _ => return false,
        }
    }
    true
}

/// A skill as read from its folder.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Its folder (absolute).
    pub dir: PathBuf,
    /// Every frontmatter field as written.
    pub frontmatter: serde_json::Map<String, serde_json::Value>,
    /// Its files, SKILL.md first, with their sizes and digests.
    pub files: Vec<SkillFile>,
}

/// One file of a skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillFile {
    /// Its path in the skill's folder, with `/`.
    pub path: String,
    pub size: u64,
    /// `sha256:` and 64 hex digits.
    pub digest: String,
}

/// Reads the skills of these folders, in order: an error names which one (and
/// its file) and what to change.
pub fn load_all(dirs: &[PathBuf]) -> Result<Vec<Skill>, String> {
    load_all_with(dirs, load)
}

/// [`load_all`] with each folder read by `read` (a cache of [`load`]).
pub fn load_all_with(
    dirs: &[PathBuf],
    read: impl Fn(&Path) -> Result<Skill, String>,
) -> Result<Vec<Skill>, String> {
    if dirs.len() > MAX_SKILLS {
        return Err(format!("skills: at most {MAX_SKILLS} skills an agent"));
    }
    let mut out: Vec<Skill> = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let skill = read(dir).map_err(|e| format!("skills[{i}] {e}"))?;
        if out.iter().any(|s| s.name == skill.name) {
            return Err(format!(
                "skills[{i}] {}: another of its skills is named {:?} too; give each skill its own name",
                dir.display(),
                skill.name
            ));
        }
        out.push(skill);
    }
    Ok(out)
}

/// Reads one skill's folder.
pub fn load(dir: &Path) -> Result<Skill, String> {
    if !dir.is_absolute() {
        return Err(format!(
            "{}: give the skill's folder as an absolute path",
            dir.display()
        ));
    }
    let md = dir.join(SKILL_MD);
    let at = |what: String| format!("{}: {what}", md.display());
    let text = fsread::read_text(&md, MAX_SKILL_MD, false).map_err(|e| {
        at(format!(
            "{e}; a skill is a folder holding SKILL.md that starts with a frontmatter of \
             name and description"
        ))
    })?;
    let frontmatter = frontmatter(&text).map_err(at)?;
    let field = |k: &str| frontmatter.get(k).and_then(|v| v.as_str()).map(str::trim);
    let name = field("name").unwrap_or_default().to_owned();
    check_name(&name, dir).map_err(at)?;
    let description = field("description").unwrap_or_default().to_owned();
    let chars = description.chars().count();
    if !(1..=1024).contains(&chars) {
        return Err(at(format!(
            "no description in the frontmatter, or one over 1024 characters ({chars}); add \
             description: what it does and when to use it"
        )));
    }
    let files = files_of(dir)?;
    Ok(Skill {
        name,
        description,
        dir: dir.to_owned(),
        frontmatter,
        files,
    })
}

/// The YAML between the leading `---` line and the next.
fn frontmatter(text: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = body
        .strip_prefix("---\n")
        .or_else(|| body.strip_prefix("---\r\n"))
        .ok_or(
            "it does not start with a frontmatter (a line ---, name: and description:, a line ---)",
        )?;
    let end = rest
        .find("\n---")
        .ok_or("its frontmatter has no closing --- line")?;
    let yaml = &rest[..end];
    // Before the parser, whose cost grows with the square of the nesting depth: a
    // frontmatter is a few lines (name, description, a little metadata).
    if yaml.len() > MAX_FRONTMATTER {
        return Err(format!(
            "its frontmatter is {} bytes; at most {MAX_FRONTMATTER} (name, description and a little \
             metadata; the instructions go below the closing --- line)",
            yaml.len()
        ));
    }
    if let Err(d) = crate::workflow_yaml::depth::check(yaml) {
        return Err(format!(
            "its frontmatter nests deeper than {} levels at line {}, column {}: \
             a frontmatter needs only a few levels",
            crate::workflow_yaml::depth::MAX_DEPTH,
            d.line + 1,
            d.column
        ));
    }
    let v: serde_json::Value =
        serde_norway::from_str(yaml).map_err(|e| format!("its frontmatter is not YAML: {e}"))?;
    match v {
        serde_json::Value::Object(m) => Ok(m),
        _ => Err("its frontmatter is not a mapping of name, description…".into()),
    }
}

/// A skill's name: the Agent Skills rules, and its folder's name.
pub fn check_name(name: &str, dir: &Path) -> Result<(), String> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if !ok {
        return Err(format!(
            "name {name:?}: 1 to 64 of a-z, 0-9 and -, not starting or ending with - nor with -- \
             inside, e.g. name: review-checklist"
        ));
    }
    let folder = dir.file_name().and_then(|f| f.to_str()).unwrap_or_default();
    if folder != name {
        return Err(format!(
            "name {name:?} is not its folder's name {folder:?}: rename one to match"
        ));
    }
    Ok(())
}

/// What a skill's folder holds as the file system says it (each entry's path,
/// size and modification time), without reading a file: equal fingerprints mean
/// an unchanged skill. Bounded as [`load`] is.
pub fn fingerprint(dir: &Path) -> Result<Vec<(PathBuf, u64, std::time::SystemTime)>, String> {
    let (mut out, mut stack) = (Vec::new(), vec![dir.to_owned()]);
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        for e in entries {
            let e = e.map_err(|e| format!("{}: {e}", d.display()))?;
            let m = std::fs::symlink_metadata(e.path()).map_err(|e| e.to_string())?;
            if out.len() > 2 * MAX_FILES {
                return Err(format!("{}: too many entries", dir.display()));
            }
            if m.is_dir() {
                stack.push(e.path());
            }
            let when = m.modified().unwrap_or(std::time::UNIX_EPOCH);
            out.push((e.path(), m.len(), when));
        }
    }
    out.sort();
    Ok(out)
}

/// The files of a skill's folder (links are refused, as is anything not a
/// regular file or folder), SKILL.md first, bounded.
fn files_of(dir: &Path) -> Result<Vec<SkillFile>, String> {
    let (mut out, mut total, mut stack) = (Vec::new(), 0u64, vec![dir.to_owned()]);
    let mut seen = 0usize;
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        for e in entries {
            let e = e.map_err(|e| format!("{}: {e}", d.display()))?;
            let p = e.path();
            let ft = e.file_type().map_err(|e| format!("{}: {e}", p.display()))?;
            if ft.is_dir() {
                seen += 1;
                if seen > MAX_FILES {
                    return Err(format!("{}: over {MAX_FILES} folders", dir.display()));
                }
                stack.push(p);
                continue;
            }
            if !ft.is_file() {
                return Err(format!(
                    "{}: a skill holds files and folders only (no links, pipes or devices)",
                    p.display()
                ));
            }
            if out.len() == MAX_FILES {
                return Err(format!("{}: over {MAX_FILES} files", dir.display()));
            }
            let bytes = fsread::read(&p, MAX_BYTES - total, false)
                .map_err(|e| format!("{}: {e} (a skill holds at most 16 MiB)", p.display()))?;
            total += bytes.len() as u64;
            let rel = p
                .strip_prefix(dir)
                .unwrap_or(&p)
                .to_string_lossy()
                .replace('\\', "/");
            out.push(SkillFile {
                path: rel,
                size: bytes.len() as u64,
                digest: digest(&bytes),
            });
        }
    }
    out.sort_by(|a, b| (a.path != SKILL_MD, &a.path).cmp(&(b.path != SKILL_MD, &b.path)));
    Ok(out)
}

/// `sha256:` and the hex of the bytes' SHA-256.
pub fn digest(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A file of a skill by its path in the folder: only one its listing has (no
/// `..`, no link), at most `max` bytes.
pub fn read_file(skill: &Skill, path: &str, max: u64) -> Result<Vec<u8>, String> {
    if !skill.files.iter().any(|f| f.path == path) {
        return Err(format!("skill {} has no file {path:?}", skill.name));
    }
    fsread::read(&skill.dir.join(path), max, false).map_err(|e| format!("{path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(root: &Path, name: &str, md: &str) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(SKILL_MD), md).unwrap();
        dir
    }

    #[test]
    fn a_skill_is_read_with_its_files() {
        let root = tempfile::tempdir().unwrap();
        let dir = skill(
            root.path(),
            "review-checklist",
            "---\nname: review-checklist\ndescription: Use when reviewing a diff.\nlicense: MIT\n---\n# Steps\n",
        );
        std::fs::create_dir(dir.join("refs")).unwrap();
        std::fs::write(dir.join("refs/rules.md"), "no unwrap").unwrap();
        let s = load(&dir).unwrap();
        assert_eq!(s.name, "review-checklist");
        assert_eq!(s.description, "Use when reviewing a diff.");
        assert_eq!(s.frontmatter["license"], "MIT");
        let paths: Vec<&str> = s.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["SKILL.md", "refs/rules.md"]);
        assert!(s.files[1].digest.starts_with("sha256:") && s.files[1].digest.len() == 71);
        assert_eq!(read_file(&s, "refs/rules.md", 100).unwrap(), b"no unwrap");
        assert!(read_file(&s, "../x", 100).is_err());
    }

    #[test]
    fn mistakes_name_the_file_and_the_fix() {
        let root = tempfile::tempdir().unwrap();
        let no_desc = skill(root.path(), "a", "---\nname: a\n---\nbody");
        let e = load_all(std::slice::from_ref(&no_desc)).unwrap_err();
        assert!(
            e.starts_with("skills[0] ")
                && e.contains("a/SKILL.md")
                && e.contains("add description"),
            "{e}"
        );
        let wrong = skill(root.path(), "b", "---\nname: c\ndescription: d\n---\n");
        assert!(load(&wrong).unwrap_err().contains("not its folder's name"));
        let bad = skill(
            root.path(),
            "Bad--name",
            "---\nname: Bad--name\ndescription: d\n---\n",
        );
        assert!(load(&bad).unwrap_err().contains("a-z, 0-9 and -"));
        let none = skill(root.path(), "e", "# no frontmatter\n");
        assert!(
            load(&none)
                .unwrap_err()
                .contains("does not start with a frontmatter")
        );
        let missing = root.path().join("nothing");
        assert!(load(&missing).unwrap_err().contains("nothing/SKILL.md"));
        let link = skill(root.path(), "f", "---\nname: f\ndescription: d\n---\n");
        std::os::unix::fs::symlink("/etc/passwd", link.join("passwd")).unwrap();
        assert!(load(&link).unwrap_err().contains("no links"));
        let twice = skill(root.path(), "g", "---\nname: g\ndescription: d\n---\n");
        let other = root.path().join("other");
        std::fs::create_dir(&other).unwrap();
        let again = skill(&other, "g", "---\nname: g\ndescription: d\n---\n");
        assert!(load_all(&[twice, again]).unwrap_err().contains("skills[1]"));
    }

    #[test]
    fn deep_or_large_frontmatter_is_refused_before_the_parser() {
        let root = tempfile::tempdir().unwrap();
        let deep = |open: &str, close: &str, n: usize| {
            format!(
                "---\nname: d\ndescription: x\nmeta: {}1{}\n---\nbody\n",
                open.repeat(n),
                close.repeat(n)
            )
        };
        let block: String = (0..2_000)
            .map(|i| format!("{}k:\n", " ".repeat(i % 100)))
            .collect();
        let cases = [
            (deep("[", "]", 100_000), "200031 bytes; at most 65536"),
            (
                deep("[", "]", 1_000),
                "nests deeper than 64 levels at line 4",
            ),
            (
                deep("{a: ", "}", 1_000),
                "nests deeper than 64 levels at line 4",
            ),
            (
                format!("---\nname: d\ndescription: x\n{block}---\n"),
                "bytes; at most 65536",
            ),
            (
                format!("---\nname: d\ndescription: x\n{}\n---\n", &block[..20_000]),
                "nests deeper than 64 levels",
            ),
        ];
        for (i, (md, want)) in cases.into_iter().enumerate() {
            let dir = skill(
                root.path(),
                &format!("d{i}"),
                &md.replace("name: d", &format!("name: d{i}")),
            );
            let e = load(&dir).unwrap_err();
            assert!(e.contains(want) && e.contains("SKILL.md"), "case {i}: {e}");
        }
    }

    #[test]
    fn placed_copies_are_removed_through_real_folders_only() {
        let work = tempfile::tempdir().unwrap();
        let mine = work.path().join(PLACED_DIR);
        std::fs::create_dir_all(mine.join("ours")).unwrap();
        std::fs::write(marker_of(&mine, "ours"), "").unwrap();
        std::fs::create_dir_all(mine.join("theirs")).unwrap();
        remove_placed(work.path());
        assert!(!mine.join("ours").exists() && mine.join("theirs").exists());
        // A link where `.agents` should be is never followed.
        let other = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(elsewhere.path().join("skills/keep")).unwrap();
        std::fs::write(elsewhere.path().join("skills/.keep.agent-worker"), "").unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), other.path().join(".agents")).unwrap();
        remove_placed(other.path());
        assert!(elsewhere.path().join("skills/keep").exists());
    }
}
