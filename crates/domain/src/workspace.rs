//! An agent's workspace: the folder its runs work in (pure: the setting, its
//! parsing and the names it derives).
//!
//! - `shared` (the default): its `cwd` as given, shared with whoever else works
//!   there.
//! - `worktree`: a git worktree of its own, outside the user's tree (under the data
//!   dir), on a branch of its own made from `base`: teammates never see each
//!   other's half-done edits, and every run ends in a commit on that branch.
//!   Written `worktree` or `{mode: worktree, repo?, base?, branch?}`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

/// Where an agent's runs work.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Workspace {
    #[default]
    Shared,
    Worktree(Worktree),
}

/// A worktree's settings: as given, then as made (the repository's top folder,
/// the base's commit and the branch filled in).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Worktree {
    /// A folder inside the repository (default: the agent's cwd, else the workflow
    /// file's folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<PathBuf>,
    /// What the branch starts from (default: the repository's HEAD when the
    /// worktree is made; the commit is recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The agent's branch (default `aw/<workflow>-<tag>/<agent>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The commit the branch was made from (recorded when the worktree is made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// The worktree's git dir in the repository (recorded when it is made; the
    /// kernel's git uses it, never the `.git` file in the folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_dir: Option<PathBuf>,
    /// The branch `base` named (or HEAD was on) when the worktree was made: what
    /// its diff compares with and where its merges go unless told otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
}

impl Workspace {
    pub fn is_worktree(&self) -> bool {
        matches!(self, Workspace::Worktree(_))
    }
}

const MODES: &str = "`shared` or `worktree`";
const KEYS: &[&str] = &["mode", "repo", "base", "branch"];

/// Reads `workspace` as written in a tool call or YAML: a mode, or an object with
/// `mode` and the worktree's settings. Errors name the field and the fix.
pub fn parse(v: &Value) -> Result<Workspace, String> {
    match v {
        Value::String(s) => mode(s, Worktree::default()),
        Value::Object(o) => {
            if let Some(k) = o.keys().find(|k| !KEYS.contains(&k.as_str())) {
                return Err(format!(
                    "workspace.{k} is not a setting; use mode, repo, base or branch"
                ));
            }
            let text = |key: &str| -> Result<Option<String>, String> {
                match o.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_owned())),
                    Some(_) => Err(format!("workspace.{key} must be a non-empty string")),
                }
            };
            let settings = Worktree {
                repo: text("repo")?.map(PathBuf::from),
                base: text("base")?,
                branch: text("branch")?,
                ..Worktree::default()
            };
            if let Some(b) = &settings.branch {
                check_branch(b).map_err(|e| format!("workspace.branch {e}"))?;
            }
            let m = text("mode")?.unwrap_or_else(|| "worktree".to_owned());
            mode(&m, settings)
        }
        _ => Err(format!(
            "workspace must be {MODES}, or {{mode: worktree, repo, base, branch}}"
        )),
    }
}

fn mode(m: &str, settings: Worktree) -> Result<Workspace, String> {
    match m.trim() {
        "shared" if settings == Worktree::default() => Ok(Workspace::Shared),
        "shared" => Err("workspace: repo, base and branch are for mode worktree".to_owned()),
        "worktree" => Ok(Workspace::Worktree(settings)),
        other => Err(format!(
            "workspace.mode {other:?} is not a mode; use {MODES}"
        )),
    }
}

/// The input form in a tool call: `shared`, `worktree` or `{mode, repo, base,
/// branch}` (read by [`parse`]; its schema is written out by hand).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WorkspaceArg(pub Value);

impl WorkspaceArg {
    pub fn read(&self) -> Result<Workspace, String> {
        parse(&self.0)
    }
}

impl JsonSchema for WorkspaceArg {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Workspace".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let text = |d: &str| schemars::json_schema!({"type": "string", "description": d});
        schemars::json_schema!({
            "description": "Where its runs work: \"shared\" (its cwd, the default) or \"worktree\": a git worktree of its own on its own branch, committed after every run; {mode, repo, base, branch} to choose.",
            "anyOf": [
                {"type": "string", "enum": ["shared", "worktree"]},
                {"type": "object", "properties": {
                    "mode": {"type": "string", "enum": ["shared", "worktree"]},
                    "repo": text("A folder in the git repository (default: its cwd)."),
                    "base": text("What the branch starts from (default: the repository's HEAD)."),
                    "branch": text("Its branch (default aw/<workflow>-<tag>/<agent>).")
                 }, "additionalProperties": false}
            ]
        })
    }
}

/// The branch an agent gets unless it names one: `aw/<workflow>-<tag>/<agent>`.
pub fn default_branch(workflow: &str, tag: &str, agent: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_".contains(c) {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    };
    format!("aw/{}-{}/{}", clean(workflow), clean(tag), clean(agent))
}

/// The rules of `git check-ref-format --branch` that a name can break, checked
/// before git is asked (so the error names the field).
pub fn check_branch(name: &str) -> Result<(), String> {
    // A full ref name would make a branch literally named `refs/heads/main`
    // (`refs/heads/refs/heads/main`), beside the one it meant.
    if let Some(short) = name.strip_prefix("refs/heads/") {
        return Err(format!(
            "{name:?} is a full ref name: give the branch's short name, {short:?}"
        ));
    }
    if name.starts_with("refs/") || name == "HEAD" {
        return Err(format!(
            "{name:?} is not a branch name: give a branch's short name, e.g. \"feat/x\""
        ));
    }
    let bad = name.is_empty()
        || name.starts_with('-')
        || name.starts_with('/')
        || name.ends_with('/')
        || name.ends_with('.')
        || name.ends_with(".lock")
        || name.contains("..")
        || name.contains("//")
        || name.contains("@{")
        || name == "@"
        || name.split('/').any(|part| part.starts_with('.'))
        || name
            .chars()
            .any(|c| c.is_ascii_control() || " ~^:?*[\\".contains(c));
    if bad {
        Err(format!(
            "{name:?} is not a valid git branch name (no spaces, `..`, `~^:?*[\\`, leading `-` or `.`)"
        ))
    } else {
        Ok(())
    }
}

/// A linked worktree's git folder is `<common>/worktrees/<id>`: the common dir
/// is read from that path, never from a file in it (the agent writes it).
pub fn git_common_dir(git_dir: &std::path::Path) -> Option<PathBuf> {
    let parent = git_dir.parent()?;
    (parent.file_name()? == "worktrees").then(|| parent.parent().map(std::path::Path::to_owned))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_written_forms() {
        assert_eq!(parse(&json!("shared")).unwrap(), Workspace::Shared);
        assert_eq!(
            parse(&json!("worktree")).unwrap(),
            Workspace::Worktree(Worktree::default())
        );
        let w = parse(&json!({"repo": "/src/app", "base": "main", "branch": "feat/x"})).unwrap();
        assert_eq!(
            w,
            Workspace::Worktree(Worktree {
                repo: Some("/src/app".into()),
                base: Some("main".into()),
                branch: Some("feat/x".into()),
                ..Worktree::default()
            })
        );
        // The stored form reads back as itself.
        let stored = serde_json::to_value(&w).unwrap();
        assert_eq!(stored["mode"], "worktree");
        assert_eq!(serde_json::from_value::<Workspace>(stored).unwrap(), w);
    }

    #[test]
    fn mistakes_name_the_field() {
        let e = parse(&json!("sandbox")).unwrap_err();
        assert!(
            e.contains("workspace.mode") && e.contains("worktree"),
            "{e}"
        );
        let e = parse(&json!({"mode": "worktree", "repository": "/x"})).unwrap_err();
        assert!(e.contains("workspace.repository"), "{e}");
        let e = parse(&json!({"mode": "shared", "base": "main"})).unwrap_err();
        assert!(e.contains("mode worktree"), "{e}");
        let e = parse(&json!({"branch": "a..b"})).unwrap_err();
        assert!(e.contains("workspace.branch"), "{e}");
        let e = parse(&json!(3)).unwrap_err();
        assert!(e.contains("workspace must be"), "{e}");
    }

    #[test]
    fn branch_names() {
        assert_eq!(
            default_branch("review", "pr 1", "alice"),
            "aw/review-pr-1/alice"
        );
        for ok in ["main", "aw/w-t/a", "feat/x_y-1"] {
            assert!(check_branch(ok).is_ok(), "{ok}");
        }
        let e = check_branch("refs/heads/main").unwrap_err();
        assert!(e.contains("full ref name") && e.contains("\"main\""), "{e}");
        let e = parse(&json!({"branch": "refs/heads/main"})).unwrap_err();
        assert!(
            e.starts_with("workspace.branch") && e.contains("short name"),
            "{e}"
        );
        for bad in ["refs/tags/v1", "refs/remotes/origin/main", "HEAD"] {
            assert!(
                check_branch(bad).unwrap_err().contains("short name"),
                "{bad}"
            );
        }
        for bad in [
            "", "-x", "a..b", "a b", "x.lock", "a/.b", "a:b", "a//b", "@",
        ] {
            assert!(check_branch(bad).is_err(), "{bad}");
        }
    }
}
