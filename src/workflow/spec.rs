//! The workflow format: every key, type and rule, checked when the YAML is read.
//!
//! Reading happens in three passes over the same text, so that each error can
//! name the exact line and column of the key or value at fault:
//! 1. [`node::read`]: libyaml (through serde_norway) builds a [`Node`] tree;
//!    syntax errors come back with libyaml's own positions.
//! 2. The rules below walk the tree, carrying the path (entry and item indexes)
//!    of every node they look at.
//! 3. Only for the one error reported, [`locate`] turns that path into a line
//!    and column (and [`nth_expression`] finds a `${{` inside a scalar).
//!
//! Typed parts that already have serde definitions elsewhere in the crate
//! (`Budget`, `MockRule`) are deserialized at their path with [`extract`], so
//! serde's errors inside them keep their positions too.

use super::interpolate::{RESERVED_OUTPUTS, Scope, expressions, is_identifier};
use super::locate::{Pos, Step, extract, locate, nth_expression, pos_of};
use super::node::{self, Node, TAG_REFUSED};
use super::suggest::did_you_mean;
use super::{AgentDef, BACKENDS, ContextDef, ParamDef, ParamKind, SetupStep, SpecError, Workflow};
use crate::kernel::registry::guards::Budget;
use crate::schedule::Trigger;
use crate::worker::protocol::MockRule;
use regex::Regex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

/// Larger YAML is refused before parsing: a workflow is a page, not a data set.
const MAX_YAML: usize = 4 << 20;
/// Largest system prompt file.
const MAX_PROMPT_FILE: usize = 1 << 20;
/// Longest timeout of a setup step or an agent's run.
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_STEPS: i128 = 500;

const TOP_KEYS: &[&str] = &[
    "name", "agents", "context", "params", "setup", "kickoff", "budget",
];
const AGENT_KEYS: &[&str] = &[
    "backend",
    "model",
    "system_prompt",
    "cwd",
    "env",
    "wakeup",
    "wakeup_prompt",
    "budget",
    "mock",
    "max_steps",
    "timeout",
    "max_tokens",
];
const CONTEXT_KEYS: &[&str] = &[
    "documents",
    "dir",
    "document_owner",
    "provider",
    "config",
    "documentOwner",
];
const PARAM_KEYS: &[&str] = &[
    "name",
    "description",
    "type",
    "required",
    "default",
    "short",
];
const SETUP_KEYS: &[&str] = &["shell", "as", "timeout"];
const PARAM_TYPES: &[&str] = &["string", "number", "boolean"];

/// Reads a workflow file: its folder is the workflow's `source_dir`.
pub fn load(path: &Path) -> Result<super::Workflow, SpecError> {
    let label = path.display().to_string();
    let fail = |message: String, fix: &str| SpecError {
        file: label.clone(),
        line: 1,
        column: 1,
        field: "file".into(),
        message,
        fix: fix.into(),
    };
    let bytes = match crate::fsread::read(path, MAX_YAML as u64, true) {
        Ok(b) => b,
        Err(e @ crate::fsread::ReadError::TooLarge(..)) => {
            return Err(fail(
                format!("cannot read the workflow file: {e}"),
                "keep large data in files the workflow reads (setup steps, documents)",
            ));
        }
        Err(e) => {
            return Err(fail(
                format!("cannot read the workflow file: {e}"),
                "give the path of a workflow YAML file (a relative path is relative to the kernel's working \
                 directory)",
            ));
        }
    };
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let good = e.utf8_error().valid_up_to();
            let pos = pos_of(&String::from_utf8_lossy(&e.as_bytes()[..good]), good);
            return Err(SpecError {
                line: pos.line,
                column: pos.column,
                ..fail(
                    "the file is not valid UTF-8".into(),
                    "save the file as UTF-8",
                )
            });
        }
    };
    let base = path.parent().unwrap_or(Path::new("."));
    parse(&text, Some(path), base)
}

/// Parses and validates a workflow. `file` names it in errors and gives its
/// folder and default name; `base_dir` is the folder of inline YAML.
pub fn parse(text: &str, file: Option<&Path>, base_dir: &Path) -> Result<Workflow, SpecError> {
    let label = file.map_or_else(|| "<inline>".to_owned(), |f| f.display().to_string());
    if text.len() > MAX_YAML {
        return Err(SpecError {
            file: label,
            line: 1,
            column: 1,
            field: "yaml".into(),
            message: format!(
                "the YAML is {} bytes; at most {MAX_YAML} are read",
                text.len()
            ),
            fix: "keep large data in files the workflow reads (setup steps, documents)".into(),
        });
    }
    // Before the parser: its cost grows with the square of the nesting depth.
    if let Err(d) = super::depth::check(text) {
        return Err(SpecError {
            file: label,
            line: d.line,
            column: d.column,
            field: "yaml".into(),
            message: format!(
                "the YAML nests deeper than {} levels here",
                super::depth::MAX_DEPTH
            ),
            fix: "a workflow needs only a few levels: flatten the structure".into(),
        });
    }
    let root = node::read(text).map_err(|e| syntax_error(&label, text, &e))?;
    let source_dir = file
        .and_then(Path::parent)
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(base_dir)
        .to_path_buf();
    let doc = Doc {
        text,
        label,
        root: &root,
        source_dir,
    };
    doc.check_tree(&root, &mut Vec::new())?;
    doc.workflow(file)
}

/// The document being validated, and how to turn a path into an error.
struct Doc<'a> {
    text: &'a str,
    label: String,
    root: &'a Node,
    source_dir: PathBuf,
}

fn with(path: &[Step], step: Step) -> Vec<Step> {
    let mut p = path.to_vec();
    p.push(step);
    p
}

impl Doc<'_> {
    // ---- errors and positions -------------------------------------------------

    fn node_at(&self, path: &[Step]) -> Option<&Node> {
        let mut n = self.root;
        for s in path {
            n = match (s, n) {
                (Step::Entry(i), Node::Map(e)) => &e.get(*i)?.1,
                (Step::Key(i), Node::Map(e)) => &e.get(*i)?.0,
                (Step::Item(i), Node::Seq(items)) => items.get(*i)?,
                _ => return None,
            };
        }
        Some(n)
    }

    /// The node's start; an empty value (`key:`) is shown at its key.
    fn pos(&self, path: &[Step]) -> Pos {
        let mut path = path.to_vec();
        if let (Some(Node::Null), Some(Step::Entry(i))) = (self.node_at(&path), path.last()) {
            let i = *i;
            path.pop();
            path.push(Step::Key(i));
        }
        locate(self.text, &path).unwrap_or(Pos::START)
    }

    /// `agents.alice.mock[0].send`.
    fn field(&self, path: &[Step]) -> String {
        let mut out = String::new();
        let mut n = self.root;
        for s in path {
            match (s, n) {
                (Step::Entry(i) | Step::Key(i), Node::Map(e)) if *i < e.len() => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out += &e[*i].0.scalar_text();
                    n = &e[*i].1;
                }
                (Step::Item(i), Node::Seq(items)) if *i < items.len() => {
                    out += &format!("[{i}]");
                    n = &items[*i];
                }
                _ => break,
            }
        }
        if out.is_empty() {
            "workflow".into()
        } else {
            out
        }
    }

    fn err(&self, path: &[Step], message: impl Into<String>, fix: impl Into<String>) -> SpecError {
        self.err_at(self.pos(path), self.field(path), message, fix)
    }

    fn err_at(
        &self,
        pos: Pos,
        field: String,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> SpecError {
        SpecError {
            file: self.label.clone(),
            line: pos.line,
            column: pos.column,
            field,
            message: clean(message.into()),
            fix: clean(fix.into()),
        }
    }

    /// An error from serde inside a typed part, at serde's own position.
    fn typed_error(&self, e: &serde_norway::Error, path: &[Step]) -> SpecError {
        let pos = e.location().map_or_else(
            || self.pos(path),
            |l| Pos {
                line: l.line(),
                column: l.column(),
            },
        );
        let raw = strip_marks(&e.to_string());
        let (field, message) = match SERDE_PATH.captures(&raw) {
            Some(c) => (c[1].to_owned(), c[2].to_owned()),
            None => (self.field(path), raw.clone()),
        };
        let (message, fix) = if let Some(c) = UNKNOWN_FIELD.captures(&message) {
            let word = c[1].to_owned();
            let allowed: Vec<&str> = BACKTICKED
                .captures_iter(&c[2])
                .filter_map(|m| m.get(1).map(|m| m.as_str()))
                .collect();
            (
                format!("unknown key `{word}`{}", did_you_mean(&word, &allowed)),
                format!("use one of: {}", allowed.join(", ")),
            )
        } else if message.starts_with("missing field") {
            (message.clone(), "add it".to_owned())
        } else if message.starts_with("invalid type") || message.starts_with("invalid value") {
            (
                message.clone(),
                "give it a value of the expected type".to_owned(),
            )
        } else {
            (message.clone(), "correct this value".to_owned())
        };
        self.err_at(pos, field, message, fix)
    }

    /// The position of the `${{` at byte `start` of the scalar at `path`.
    fn expr_pos(&self, path: &[Step], value: &str, start: usize) -> Pos {
        let scalar = self.pos(path);
        let k = value.get(..start).map_or(0, |s| s.matches("${{").count());
        nth_expression(self.text, scalar, k).unwrap_or(scalar)
    }

    /// Every `${{ name }}` in the scalar at `path` must be able to resolve.
    fn check_refs(&self, value: &str, path: &[Step], scope: &Scope) -> Result<(), SpecError> {
        let fix = |what: &str| {
            format!(
                "{what}; available: {}. Setup outputs are the `as` names of setup steps (of earlier \
                 steps, in a setup command)",
                scope.available()
            )
        };
        match expressions(value) {
            Err(b) => Err(self.err_at(
                self.expr_pos(path, value, b.start),
                self.field(path),
                b.message,
                "write `${{ name }}` with one name between the braces",
            )),
            Ok(exprs) => {
                for e in exprs {
                    if let Err(m) = scope.check(e.name) {
                        return Err(self.err_at(
                            self.expr_pos(path, value, e.start),
                            self.field(path),
                            m.split("; available:").next().unwrap_or(&m),
                            fix("use a name that exists"),
                        ));
                    }
                }
                Ok(())
            }
        }
    }

    // ---- shapes ---------------------------------------------------------------

    /// Every mapping key is text, and no mapping repeats a key.
    fn check_tree(&self, n: &Node, path: &mut Vec<Step>) -> Result<(), SpecError> {
        match n {
            Node::Map(entries) => {
                for (i, (k, v)) in entries.iter().enumerate() {
                    let key_path = with(path, Step::Key(i));
                    let Node::Str(key) = k else {
                        return Err(self.err(
                            &key_path,
                            format!("a key must be text, found {}", k.kind()),
                            "write a plain name as the key, e.g. `name: value`",
                        ));
                    };
                    if let Some(first) = entries[..i].iter().position(|(k2, _)| k2 == k) {
                        let at = self.pos(&with(path, Step::Key(first)));
                        return Err(self.err(
                            &key_path,
                            format!("duplicate key `{key}` (first at line {})", at.line),
                            "keep one of them",
                        ));
                    }
                    path.push(Step::Entry(i));
                    self.check_tree(v, path)?;
                    path.pop();
                }
            }
            Node::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(Step::Item(i));
                    self.check_tree(item, path)?;
                    path.pop();
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The entries of a mapping, every key among `allowed`.
    fn mapping<'n>(
        &self,
        n: &'n Node,
        path: &[Step],
        allowed: &[&str],
        what: &str,
    ) -> Result<&'n [(Node, Node)], SpecError> {
        let Node::Map(entries) = n else {
            return Err(self.err(
                path,
                format!(
                    "{what} must be a mapping (key: value lines), found {}",
                    n.kind()
                ),
                format!(
                    "write it as a mapping with keys among: {}",
                    allowed.join(", ")
                ),
            ));
        };
        for (i, (k, _)) in entries.iter().enumerate() {
            let k = k.as_str().unwrap_or_default();
            if !allowed.contains(&k) {
                return Err(self.err(
                    &with(path, Step::Key(i)),
                    format!("unknown key `{k}` in {what}{}", did_you_mean(k, allowed)),
                    format!("use one of: {}", allowed.join(", ")),
                ));
            }
        }
        Ok(entries)
    }

    fn text<'n>(&self, n: &'n Node, path: &[Step], example: &str) -> Result<&'n str, SpecError> {
        match n {
            Node::Str(s) => Ok(s),
            Node::Int(_) | Node::Float(_) | Node::Bool(_) => Err(self.err(
                path,
                format!("expected text, found {}", n.kind()),
                format!("quote it to make it text, e.g. \"{}\"", n.scalar_text()),
            )),
            _ => Err(self.err(
                path,
                format!("expected text, found {}", n.kind()),
                format!("write text, e.g. {example}"),
            )),
        }
    }

    fn non_empty_text<'n>(
        &self,
        n: &'n Node,
        path: &[Step],
        example: &str,
    ) -> Result<&'n str, SpecError> {
        let s = self.text(n, path, example)?;
        if s.trim().is_empty() {
            return Err(self.err(path, "must not be empty", format!("write e.g. {example}")));
        }
        Ok(s)
    }

    fn boolean(&self, n: &Node, path: &[Step]) -> Result<bool, SpecError> {
        match n {
            Node::Bool(b) => Ok(*b),
            _ => Err(self.err(
                path,
                format!("expected true or false, found {}", n.kind()),
                "write true or false (unquoted)",
            )),
        }
    }

    /// A number of milliseconds or a duration such as "10m".
    fn duration(&self, n: &Node, path: &[Step]) -> Result<Duration, SpecError> {
        let fix = "write a number of milliseconds or a duration such as \"30s\", \"10m\" or \"1h\"";
        let d = match n {
            Node::Int(ms) => Duration::from_millis(u64::try_from(*ms).unwrap_or(0)),
            Node::Str(s) => {
                let s = s.trim();
                match s.parse::<u64>() {
                    Ok(ms) => Duration::from_millis(ms),
                    Err(_) => humantime::parse_duration(s).map_err(|e| {
                        self.err(path, format!("cannot read the duration {s:?}: {e}"), fix)
                    })?,
                }
            }
            _ => {
                return Err(self.err(
                    path,
                    format!(
                        "expected a duration, found {} {}",
                        n.kind(),
                        n.scalar_text()
                    ),
                    fix,
                ));
            }
        };
        if d.is_zero() {
            return Err(self.err(path, "the duration must be more than zero", fix));
        }
        if d > MAX_TIMEOUT {
            return Err(self.err(
                path,
                "the duration is longer than 24h",
                "use at most \"24h\"",
            ));
        }
        Ok(d)
    }

    /// A path as written: `~` is the home folder, relative is against the YAML's folder.
    fn path(&self, raw: &str, path: &[Step]) -> Result<PathBuf, SpecError> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(self.err(path, "the path is empty", "write a folder, e.g. ./work"));
        }
        let joined = if raw == "~" || raw.starts_with("~/") {
            let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) else {
                return Err(self.err(
                    path,
                    "`~` cannot be expanded: HOME is not set",
                    "write an absolute path",
                ));
            };
            PathBuf::from(home).join(raw.trim_start_matches('~').trim_start_matches('/'))
        } else if raw.starts_with('~') {
            return Err(self.err(
                path,
                format!("{raw:?}: only `~` and `~/...` (your own home folder) are expanded"),
                "write an absolute path",
            ));
        } else {
            self.source_dir.join(raw)
        };
        Ok(joined.components().collect())
    }

    /// A `budget:` (workflow or agent): serde's checks, then the guards' own.
    fn budget(&self, n: &Node, path: &[Step]) -> Result<Option<Budget>, SpecError> {
        if *n == Node::Null {
            return Ok(None);
        }
        let b: Budget = extract(self.text, path).map_err(|e| self.typed_error(&e, path))?;
        if let Err(m) = b.validate() {
            let at = BUDGET_FIELD
                .captures(&m)
                .and_then(|c| n.entry(&c[1]).map(|(i, _)| with(path, Step::Entry(i))))
                .unwrap_or_else(|| path.to_vec());
            return Err(self.err(
                &at,
                m,
                "raise the limit, or leave the field out for no limit",
            ));
        }
        Ok(Some(b))
    }

    // ---- the format -----------------------------------------------------------

    fn workflow(&self, file: Option<&Path>) -> Result<Workflow, SpecError> {
        let entries = match self.root {
            Node::Null => {
                return Err(self.err(
                    &[],
                    "the workflow is empty",
                    "start with `agents:` and at least one agent, e.g. agents: { alice: { backend: claude } }",
                ));
            }
            n => self.mapping(n, &[], TOP_KEYS, "the workflow")?,
        };
        let get = |key: &str| {
            entries
                .iter()
                .position(|(k, _)| k.as_str() == Some(key))
                .map(|i| (i, &entries[i].1))
        };

        let name = self.name(get("name"), file)?;
        let params = match get("params") {
            Some((i, n)) => self.params(n, &[Step::Entry(i)])?,
            None => Vec::new(),
        };
        let param_names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
        let setup = match get("setup") {
            Some((i, n)) => self.setup(n, &[Step::Entry(i)], &param_names)?,
            None => Vec::new(),
        };
        let scope = Scope {
            outputs: setup.iter().filter_map(|s| s.as_name.as_deref()).collect(),
            params: param_names.clone(),
        };

        let agents = match get("agents") {
            None => {
                return Err(self.err(
                    &[],
                    "the workflow has no `agents`",
                    "add `agents:` with at least one agent, e.g. agents: { alice: { backend: claude } }",
                ));
            }
            Some((i, n)) => self.agents(n, i, &scope)?,
        };
        let agent_names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();

        let context = match get("context") {
            Some((i, n)) => self.context(n, &[Step::Entry(i)], &agent_names)?,
            None => ContextDef::default(),
        };
        let kickoff = match get("kickoff") {
            Some((_, Node::Null)) | None => None,
            Some((i, n)) => {
                let path = [Step::Entry(i)];
                let k = self.text(n, &path, "\"@alice start\"")?;
                self.check_refs(k, &path, &scope)?;
                Some(k.to_owned())
            }
        };
        let budget = match get("budget") {
            Some((i, n)) => self.budget(n, &[Step::Entry(i)])?,
            None => None,
        };
        Ok(Workflow {
            name,
            file: file.map(Path::to_path_buf),
            source_dir: self.source_dir.clone(),
            agents,
            context,
            params,
            setup,
            kickoff,
            budget,
        })
    }

    fn name(
        &self,
        given: Option<(usize, &Node)>,
        file: Option<&Path>,
    ) -> Result<String, SpecError> {
        if let Some((i, n)) = given {
            let path = [Step::Entry(i)];
            let s = self.text(n, &path, "review")?;
            crate::names::check_name("workflow name", s)
                .map_err(|e| self.err(&path, e.to_string(), "use e.g. `name: code-review`"))?;
            if s == crate::names::GLOBAL_WORKFLOW {
                return Err(self.err(
                    &path,
                    "the name \"global\" is taken by the agents made with agent_new",
                    "choose another name",
                ));
            }
            return Ok(s.to_owned());
        }
        let Some(stem) = file.and_then(Path::file_stem) else {
            return Ok("workflow".into());
        };
        let stem = stem.to_string_lossy();
        match crate::names::check_name("workflow name", &stem) {
            Ok(()) if stem != crate::names::GLOBAL_WORKFLOW => Ok(stem.into_owned()),
            _ => Err(self.err_at(
                Pos::START,
                "name".into(),
                format!(
                    "the file name gives the workflow name {stem:?}, which is not a valid name"
                ),
                "add e.g. `name: my-workflow` (A-Z a-z 0-9 . _ -) at the top",
            )),
        }
    }

    /// The items of a top-level list (`params`, `setup`); absent or null is empty.
    fn list<'n>(
        &self,
        n: &'n Node,
        path: &[Step],
        must: &str,
        fix: &str,
    ) -> Result<&'n [Node], SpecError> {
        match n {
            Node::Null => Ok(&[]),
            Node::Seq(items) => Ok(items),
            _ => Err(self.err(path, format!("{must}, found {}", n.kind()), fix)),
        }
    }

    fn params(&self, n: &Node, path: &[Step]) -> Result<Vec<ParamDef>, SpecError> {
        let items = self.list(
            n,
            path,
            "params must be a list",
            "write e.g. params: [ { name: pr, type: number, required: true } ]",
        )?;
        let mut out: Vec<ParamDef> = Vec::new();
        for (j, item) in items.iter().enumerate() {
            let ip = with(path, Step::Item(j));
            self.mapping(item, &ip, PARAM_KEYS, "a parameter")?;
            let get = |key: &str| item.entry(key).map(|(i, v)| (with(&ip, Step::Entry(i)), v));
            let Some((np, nn)) = get("name") else {
                return Err(self.err(&ip, "the parameter has no `name`", "add e.g. `name: pr`"));
            };
            let name = self.text(nn, &np, "pr")?;
            if !(name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            {
                return Err(self.err(
                    &np,
                    format!("invalid parameter name {name:?}"),
                    "start with a letter or _, then letters, digits, _ or -",
                ));
            }
            if out.iter().any(|p| p.name == name) {
                return Err(self.err(
                    &np,
                    format!("duplicate parameter `{name}`"),
                    "give each parameter its own name",
                ));
            }
            let kind = match get("type") {
                None => ParamKind::String,
                Some((tp, tn)) => match self.text(tn, &tp, "number")? {
                    "string" => ParamKind::String,
                    "number" => ParamKind::Number,
                    "boolean" => ParamKind::Boolean,
                    other => {
                        return Err(self.err(
                            &tp,
                            format!(
                                "unknown parameter type `{other}`{}",
                                did_you_mean(other, PARAM_TYPES)
                            ),
                            "use string, number or boolean",
                        ));
                    }
                },
            };
            let required = match get("required") {
                Some((rp, rn)) => self.boolean(rn, &rp)?,
                None => false,
            };
            let description = match get("description") {
                Some((_, Node::Null)) | None => None,
                Some((dp, dn)) => Some(self.text(dn, &dp, "\"the pull request\"")?.to_owned()),
            };
            if let Some((sp, sn)) = get("short")
                && *sn != Node::Null
            {
                self.text(sn, &sp, "p")?;
            }
            let default = match get("default") {
                Some((_, Node::Null)) | None => None,
                Some((dp, dn)) => Some(self.param_default(name, kind, dn, &dp)?),
            };
            out.push(ParamDef {
                name: name.to_owned(),
                description,
                kind,
                required,
                default,
            });
        }
        Ok(out)
    }

    fn param_default(
        &self,
        name: &str,
        kind: ParamKind,
        n: &Node,
        path: &[Step],
    ) -> Result<String, SpecError> {
        let wrong = || {
            self.err(
                path,
                format!(
                    "the default of parameter `{name}` must be a {}, found {} {}",
                    kind.as_str(),
                    n.kind(),
                    n.scalar_text()
                ),
                match kind {
                    ParamKind::Number => "write a number, e.g. default: 3",
                    ParamKind::Boolean => "write true or false",
                    ParamKind::String => "write text, e.g. default: main",
                },
            )
        };
        match (kind, n) {
            (ParamKind::String, Node::Str(s)) => Ok(s.clone()),
            (ParamKind::String, Node::Int(_) | Node::Float(_) | Node::Bool(_)) => {
                Ok(n.scalar_text())
            }
            (ParamKind::Number, Node::Int(i)) => Ok(i.to_string()),
            (ParamKind::Number, Node::Float(f)) if f.is_finite() => Ok(f.to_string()),
            (ParamKind::Number, Node::Str(s))
                if s.trim().parse::<f64>().is_ok_and(f64::is_finite) =>
            {
                Ok(s.trim().to_owned())
            }
            (ParamKind::Boolean, Node::Bool(b)) => Ok(b.to_string()),
            (ParamKind::Boolean, Node::Str(s)) if s == "true" || s == "false" => Ok(s.clone()),
            _ => Err(wrong()),
        }
    }

    fn setup(&self, n: &Node, path: &[Step], params: &[&str]) -> Result<Vec<SetupStep>, SpecError> {
        let items = self.list(
            n,
            path,
            "setup must be a list of steps",
            "write e.g. setup: [ { shell: \"git diff\", as: diff } ]",
        )?;
        let mut out: Vec<SetupStep> = Vec::new();
        for (j, item) in items.iter().enumerate() {
            let ip = with(path, Step::Item(j));
            self.mapping(item, &ip, SETUP_KEYS, "a setup step")?;
            let get = |key: &str| item.entry(key).map(|(i, v)| (with(&ip, Step::Entry(i)), v));
            let Some((sp, sn)) = get("shell") else {
                return Err(self.err(
                    &ip,
                    "the setup step has no `shell`",
                    "add e.g. `shell: git diff`",
                ));
            };
            let shell = self.non_empty_text(sn, &sp, "\"git diff\"")?;
            let scope = Scope {
                outputs: out.iter().filter_map(|s| s.as_name.as_deref()).collect(),
                params: params.to_vec(),
            };
            self.check_refs(shell, &sp, &scope)?;
            let as_name = match get("as") {
                Some((_, Node::Null)) | None => None,
                Some((ap, an)) => {
                    let a = self.text(an, &ap, "diff")?;
                    if !is_identifier(a) {
                        return Err(self.err(
                            &ap,
                            format!("`as: {a}` is not a valid name"),
                            "start with a letter or _, then letters, digits or _, e.g. `as: diff`",
                        ));
                    }
                    if RESERVED_OUTPUTS.contains(&a) {
                        return Err(self.err(
                            &ap,
                            format!(
                                "`as: {a}` is reserved ({} name built-in values)",
                                RESERVED_OUTPUTS.join(", ")
                            ),
                            "choose another name, e.g. `as: diff`",
                        ));
                    }
                    if out.iter().any(|s| s.as_name.as_deref() == Some(a)) {
                        return Err(self.err(
                            &ap,
                            format!("duplicate `as: {a}`: an earlier step already uses it"),
                            "give each step's output its own name",
                        ));
                    }
                    Some(a.to_owned())
                }
            };
            let timeout = match get("timeout") {
                Some((_, Node::Null)) | None => DEFAULT_SETUP_TIMEOUT,
                Some((tp, tn)) => self.duration(tn, &tp)?,
            };
            out.push(SetupStep {
                shell: shell.to_owned(),
                as_name,
                timeout,
            });
        }
        Ok(out)
    }

    fn agents(&self, n: &Node, at: usize, scope: &Scope) -> Result<Vec<AgentDef>, SpecError> {
        let path = [Step::Entry(at)];
        let key = [Step::Key(at)];
        let example = "write e.g.\n  agents:\n    alice: { backend: claude }";
        let entries = match n {
            Node::Map(e) if !e.is_empty() => e,
            Node::Map(_) | Node::Null => {
                return Err(self.err(&key, "`agents` has no agents", example));
            }
            _ => {
                return Err(self.err(
                    &path,
                    format!(
                        "`agents` must be a mapping of agent names to their settings, found {}",
                        n.kind()
                    ),
                    example,
                ));
            }
        };
        let mut out = Vec::new();
        for (i, (k, v)) in entries.iter().enumerate() {
            let name = k.as_str().unwrap_or_default();
            if let Err(e) = crate::names::check_agent_name(name) {
                return Err(self.err(
                    &with(&path, Step::Key(i)),
                    e.to_string(),
                    "rename the agent",
                ));
            }
            out.push(self.agent(
                name,
                v,
                &with(&path, Step::Entry(i)),
                &with(&path, Step::Key(i)),
                scope,
            )?);
        }
        Ok(out)
    }

    fn agent(
        &self,
        name: &str,
        n: &Node,
        path: &[Step],
        key: &[Step],
        scope: &Scope,
    ) -> Result<AgentDef, SpecError> {
        let what = format!("agent `{name}`");
        if let Node::Map(entries) = n {
            for (i, (k, _)) in entries.iter().enumerate() {
                match k.as_str() {
                    Some("ref") => {
                        return Err(self.err(
                            &with(path, Step::Key(i)),
                            "`ref` is not supported: agents must be defined inline",
                            format!("replace `ref:` with the agent's settings, e.g. {name}: {{ backend: claude }}"),
                        ));
                    }
                    Some("provider") => {
                        return Err(self.err(
                            &with(path, Step::Key(i)),
                            "`provider` is not supported",
                            "set the API key and base URL with `env` instead, e.g. env: { ANTHROPIC_API_KEY: ..., \
                             ANTHROPIC_BASE_URL: ... } (or OPENAI_API_KEY / OPENAI_BASE_URL)",
                        ));
                    }
                    _ => {}
                }
            }
        }
        if *n == Node::Null {
            return Err(self.err(
                key,
                format!("{what} has no settings"),
                format!("give it at least a backend, e.g. {name}: {{ backend: claude }}"),
            ));
        }
        self.mapping(n, path, AGENT_KEYS, &what)?;
        let get = |k: &str| n.entry(k).map(|(i, v)| (with(path, Step::Entry(i)), v));
        let set = |k: &str| get(k).filter(|(_, v)| **v != Node::Null);

        let backend = match get("backend") {
            None | Some((_, Node::Null)) => {
                return Err(self.err(
                    key,
                    format!("{what} has no `backend`"),
                    format!("add `backend:` with one of: {}", BACKENDS.join(", ")),
                ));
            }
            Some((bp, bn)) => {
                let b = self.text(bn, &bp, "claude")?;
                match b {
                    "default" => "sdk".to_owned(),
                    b if BACKENDS.contains(&b) => b.to_owned(),
                    b => {
                        return Err(self.err(
                            &bp,
                            format!("unknown backend `{b}`{}", did_you_mean(b, BACKENDS)),
                            format!("use one of: {} (default = sdk)", BACKENDS.join(", ")),
                        ));
                    }
                }
            }
        };
        let model = match set("model") {
            None => None,
            Some((mp, mn)) => Some(self.non_empty_text(mn, &mp, "sonnet")?.to_owned()),
        };
        let system_prompt = match set("system_prompt") {
            None => None,
            Some((sp, sn)) => Some(self.system_prompt(sn, &sp, scope)?),
        };
        let cwd = match set("cwd") {
            None => None,
            Some((cp, cn)) => {
                let raw = self.non_empty_text(cn, &cp, "../project")?;
                if raw.contains("${{") {
                    return Err(self.err_at(
                        self.expr_pos(&cp, raw, raw.find("${{").unwrap_or(0)),
                        self.field(&cp),
                        "`${{ }}` is not interpolated in cwd",
                        "write the folder itself (relative to the YAML's folder, or absolute)",
                    ));
                }
                Some(self.path(raw, &cp)?)
            }
        };
        let env = match set("env") {
            None => BTreeMap::new(),
            Some((ep, en)) => self.env(en, &ep)?,
        };
        let wakeup = match set("wakeup") {
            None => None,
            Some((wp, wn)) => {
                let s = match wn {
                    Node::Str(s) => s.clone(),
                    Node::Int(i) => i.to_string(),
                    other => {
                        return Err(self.err(
                            &wp,
                            format!(
                                "wakeup must be a duration or a cron pattern, found {}",
                                other.kind()
                            ),
                            "write e.g. wakeup: 30m, wakeup: 60000 (ms) or wakeup: \"0 9 * * 1-5\"",
                        ));
                    }
                };
                Trigger::wakeup(&s).map_err(|e| {
                    // One word that is no interval reads as a one-field cron to the
                    // scheduler; say what it is not instead.
                    let message = if e.contains(" has 1 fields") {
                        format!(
                            "wakeup {s:?} is neither an interval (a number of ms, \"30s\", \"5m\") \
                             nor a cron pattern"
                        )
                    } else {
                        format!("wakeup: {e}")
                    };
                    self.err(
                        &wp,
                        message,
                        "write a number of ms (60000), a duration (\"30s\", \"5m\") or a 5-field cron \
                         (\"0 9 * * 1-5\")",
                    )
                })?;
                Some(s)
            }
        };
        let wakeup_prompt = match set("wakeup_prompt") {
            None => None,
            Some((pp, pn)) => {
                let p = self.text(pn, &pp, "\"Check for new commits.\"")?;
                if wakeup.is_none() {
                    let key_at = match pp.last() {
                        Some(Step::Entry(i)) => with(path, Step::Key(*i)),
                        _ => pp.clone(),
                    };
                    return Err(self.err(
                        &key_at,
                        "wakeup_prompt needs wakeup: it is the prompt of the scheduled runs",
                        "add `wakeup:` (e.g. wakeup: 30m) or remove wakeup_prompt",
                    ));
                }
                self.check_refs(p, &pp, scope)?;
                Some(p.to_owned())
            }
        };
        let budget = match get("budget") {
            Some((bp, bn)) => self.budget(bn, &bp)?,
            None => None,
        };
        let mock = match set("mock") {
            None => Vec::new(),
            Some((mp, mn)) => self.mock(mn, &mp, scope)?,
        };
        let max_steps = match set("max_steps") {
            None => None,
            Some((_, Node::Int(s))) if (1..=MAX_STEPS).contains(s) => u32::try_from(*s).ok(),
            Some((sp, sn)) => {
                return Err(self.err(
                    &sp,
                    format!(
                        "max_steps must be a whole number from 1 to {MAX_STEPS}, found {}",
                        sn.scalar_text()
                    ),
                    "write e.g. max_steps: 30",
                ));
            }
        };
        let timeout = match set("timeout") {
            None => None,
            Some((tp, tn)) => Some(self.duration(tn, &tp)?),
        };
        if let Some((tp, tn)) = set("max_tokens")
            && !matches!(tn, Node::Int(t) if *t > 0)
        {
            return Err(self.err(
                &tp,
                format!("max_tokens must be a positive whole number, found {}", tn.scalar_text()),
                "write e.g. max_tokens: 8192, or leave it out (it is accepted for compatibility and not used; \
                 see budget.max_tokens for a limit)",
            ));
        }
        Ok(AgentDef {
            name: name.to_owned(),
            backend,
            model,
            system_prompt,
            cwd,
            env,
            wakeup,
            wakeup_prompt,
            budget,
            mock,
            max_steps,
            timeout,
        })
    }

    /// Literal text, or a single line ending in .md/.txt: a file next to the YAML.
    fn system_prompt(&self, n: &Node, path: &[Step], scope: &Scope) -> Result<String, SpecError> {
        let s = self.text(n, path, "\"You review code.\"")?;
        let lower = s.trim().to_ascii_lowercase();
        let is_file = !s.contains('\n') && (lower.ends_with(".md") || lower.ends_with(".txt"));
        if !is_file {
            self.check_refs(s, path, scope)?;
            return Ok(s.to_owned());
        }
        let file = self.path(s, path)?;
        let fix = format!(
            "create the file, or correct the path (relative to {}); to use the words as the prompt itself, \
             write them as a block: `system_prompt: |` and the text on the next line",
            self.source_dir.display()
        );
        let bytes = match crate::fsread::read(&file, MAX_PROMPT_FILE as u64, true) {
            Ok(b) => b,
            Err(crate::fsread::ReadError::TooLarge(..)) => {
                return Err(self.err(
                    path,
                    format!(
                        "the system prompt file {} is larger than 1 MiB",
                        file.display()
                    ),
                    "shorten it; put reference material in documents instead",
                ));
            }
            Err(e) => {
                return Err(self.err(
                    path,
                    format!("cannot read the system prompt file {}: {e}", file.display()),
                    fix.clone(),
                ));
            }
        };
        let content = String::from_utf8(bytes).map_err(|_| {
            self.err(
                path,
                format!(
                    "the system prompt file {} is not UTF-8 text",
                    file.display()
                ),
                "save it as UTF-8",
            )
        })?;
        let in_file = |start: usize, message: String| {
            let pos = pos_of(&content, start);
            SpecError {
                file: file.display().to_string(),
                line: pos.line,
                column: pos.column,
                field: self.field(path),
                message: clean(message),
                fix: clean(format!(
                    "use a name that exists; available: {}",
                    scope.available()
                )),
            }
        };
        match expressions(&content) {
            Err(b) => return Err(in_file(b.start, b.message)),
            Ok(exprs) => {
                for e in exprs {
                    if let Err(m) = scope.check(e.name) {
                        let m = m.split("; available:").next().unwrap_or(&m).to_owned();
                        return Err(in_file(e.start, m));
                    }
                }
            }
        }
        Ok(content)
    }

    fn env(&self, n: &Node, path: &[Step]) -> Result<BTreeMap<String, String>, SpecError> {
        let Node::Map(entries) = n else {
            return Err(self.err(
                path,
                format!(
                    "env must be a mapping of variable names to values, found {}",
                    n.kind()
                ),
                "write e.g. env: { ANTHROPIC_API_KEY: sk-... }",
            ));
        };
        let mut out = BTreeMap::new();
        for (i, (k, v)) in entries.iter().enumerate() {
            let name = k.as_str().unwrap_or_default();
            let kp = with(path, Step::Key(i));
            let vp = with(path, Step::Entry(i));
            if !is_identifier(name) {
                return Err(self.err(
                    &kp,
                    format!("invalid environment variable name {name:?}"),
                    "use letters, digits and _, not starting with a digit",
                ));
            }
            let upper = name.to_ascii_uppercase();
            if upper.starts_with("AW_") || upper.starts_with("AGENT_WORKER_") {
                return Err(self.err(
                    &kp,
                    format!("the variable {name} is reserved: names starting with AW_ or AGENT_WORKER_ belong to the kernel"),
                    "rename it",
                ));
            }
            let value = match v {
                Node::Str(s) => s.clone(),
                Node::Int(_) | Node::Bool(_) => v.scalar_text(),
                _ => {
                    return Err(self.err(
                        &vp,
                        format!("the value of {name} must be text, found {}", v.kind()),
                        "quote it, e.g. \"1.5\" (use \"\" for empty)",
                    ));
                }
            };
            out.insert(name.to_owned(), value);
        }
        Ok(out)
    }

    fn mock(&self, n: &Node, path: &[Step], scope: &Scope) -> Result<Vec<MockRule>, SpecError> {
        let rules: Vec<MockRule> =
            extract(self.text, path).map_err(|e| self.typed_error(&e, path))?;
        if let Err(m) = MockRule::validate_all(&rules) {
            let at = MOCK_RULE
                .captures(&m)
                .and_then(|c| c[1].parse::<usize>().ok())
                .filter(|k| *k >= 1)
                .map(|k| {
                    let rule = with(path, Step::Item(k - 1));
                    let field = ["when", "sleep", "to", "propose", "times"]
                        .into_iter()
                        .find(|f| m.contains(&format!("`{f}`")) || m.contains(&format!(": {f} ")));
                    let entry = match (field, &n) {
                        (Some(f), Node::Seq(items)) => items.get(k - 1).and_then(|r| r.entry(f)),
                        _ => None,
                    };
                    match entry {
                        Some((i, _)) => with(&rule, Step::Entry(i)),
                        None => rule,
                    }
                })
                .unwrap_or_else(|| path.to_vec());
            return Err(self.err(&at, m, "see the mock rule fields: when, sleep, send, to, doc_append, vote, propose, resource, fail, times, reply"));
        }
        // Every text a rule posts or stores may use `${{ }}` (`when` is a regex).
        if let Node::Seq(items) = n {
            for (j, rule) in items.iter().enumerate() {
                if let Node::Map(entries) = rule {
                    for (i, (k, v)) in entries.iter().enumerate() {
                        if k.as_str() != Some("when") {
                            self.check_texts(
                                v,
                                &with(&with(path, Step::Item(j)), Step::Entry(i)),
                                scope,
                            )?;
                        }
                    }
                }
            }
        }
        Ok(rules)
    }

    fn check_texts(&self, n: &Node, path: &[Step], scope: &Scope) -> Result<(), SpecError> {
        match n {
            Node::Str(s) => self.check_refs(s, path, scope),
            Node::Seq(items) => items
                .iter()
                .enumerate()
                .try_for_each(|(i, v)| self.check_texts(v, &with(path, Step::Item(i)), scope)),
            Node::Map(entries) => entries.iter().enumerate().try_for_each(|(i, (_, v))| {
                self.check_texts(v, &with(path, Step::Entry(i)), scope)
            }),
            _ => Ok(()),
        }
    }

    /// `context:` in either form: DESIGN (`documents`, `dir`, `document_owner`) or
    /// the original (`provider`, `config: {dir | bind}`, `documentOwner`).
    fn context(&self, n: &Node, path: &[Step], agents: &[&str]) -> Result<ContextDef, SpecError> {
        match n {
            Node::Null | Node::Bool(true) => return Ok(ContextDef::default()),
            Node::Bool(false) => {
                return Err(self.err(
                    path,
                    "`context: false`: shared documents cannot be disabled",
                    "leave `context` out (the defaults), or choose the storage with context: { documents: sqlite }",
                ));
            }
            _ => {}
        }
        self.mapping(n, path, CONTEXT_KEYS, "context")?;
        let get = |k: &str| n.entry(k).map(|(i, v)| (i, with(path, Step::Entry(i)), v));
        let key_of = |i: usize| with(path, Step::Key(i));
        let mut out = ContextDef::default();
        let mut dir: Option<(Vec<Step>, &str)> = None;

        if let (Some(_), Some((pi, _, _))) = (get("documents"), get("provider")) {
            return Err(self.err(
                &key_of(pi),
                "context mixes `documents` and `provider` (the original form)",
                "keep one: documents: file|sqlite, or provider: file|memory",
            ));
        }
        if let (Some(_), Some((oi, _, _))) = (get("document_owner"), get("documentOwner")) {
            return Err(self.err(
                &key_of(oi),
                "both document_owner and documentOwner are given",
                "keep one",
            ));
        }
        let provider = |s: &str, p: &[Step], original: bool| -> Result<String, SpecError> {
            match s {
                "file" => Ok("file".into()),
                "sqlite" | "memory" => Ok("sqlite".into()),
                other => {
                    let allowed: &[&str] = if original {
                        &["file", "memory"]
                    } else {
                        &["file", "sqlite"]
                    };
                    Err(self.err(
                        p,
                        format!(
                            "unknown document provider `{other}`{}",
                            did_you_mean(other, allowed)
                        ),
                        format!("use {}", allowed.join(" or ")),
                    ))
                }
            }
        };
        if let Some((_, dp, dn)) = get("documents") {
            match dn {
                Node::Null => {}
                Node::Map(_) => {
                    self.mapping(dn, &dp, &["provider", "dir"], "context.documents")?;
                    if let Some((i, pn)) = dn.entry("provider").filter(|(_, v)| **v != Node::Null) {
                        let pp = with(&dp, Step::Entry(i));
                        out.documents = Some(provider(self.text(pn, &pp, "file")?, &pp, false)?);
                    }
                    if let Some((i, d)) = dn.entry("dir").filter(|(_, v)| **v != Node::Null) {
                        let p = with(&dp, Step::Entry(i));
                        dir = Some((p.clone(), self.non_empty_text(d, &p, "./docs")?));
                    }
                }
                _ => out.documents = Some(provider(self.text(dn, &dp, "file")?, &dp, false)?),
            }
        }
        if let Some((_, pp, pn)) = get("provider").filter(|(_, _, v)| **v != Node::Null) {
            out.documents = Some(provider(self.text(pn, &pp, "file")?, &pp, true)?);
        }
        let mut pending: Vec<(Vec<Step>, &Node)> = Vec::new();
        if let Some((_, p, d)) = get("dir").filter(|(_, _, v)| **v != Node::Null) {
            pending.push((p, d));
        }
        if let Some((_, cp, cn)) = get("config").filter(|(_, _, v)| **v != Node::Null) {
            self.mapping(cn, &cp, &["dir", "bind"], "context.config")?;
            let d = cn.entry("dir").filter(|(_, v)| **v != Node::Null);
            let b = cn.entry("bind").filter(|(_, v)| **v != Node::Null);
            if let (Some(_), Some((bi, _))) = (d, b) {
                return Err(self.err(
                    &with(&cp, Step::Key(bi)),
                    "config.dir and config.bind are exclusive (both mean: use this folder)",
                    "keep one of them",
                ));
            }
            if let Some((i, v)) = d.or(b) {
                pending.push((with(&cp, Step::Entry(i)), v));
            }
        }
        for (p, d) in pending {
            if dir.is_some() {
                return Err(self.err(
                    &p,
                    "the documents folder is given twice",
                    "give it once: dir (or config: {dir} / config: {bind})",
                ));
            }
            let s = self.non_empty_text(d, &p, "./docs")?;
            dir = Some((p, s));
        }
        if let Some((dp, raw)) = dir {
            if out.documents.as_deref() == Some("sqlite") {
                return Err(self.err(
                    &dp,
                    "a documents folder needs the file provider, but sqlite (memory) is chosen",
                    "use documents: file with the folder, or leave the folder out",
                ));
            }
            out.dir = Some(self.context_dir(raw, &dp)?);
        }
        let owner = get("document_owner").or_else(|| get("documentOwner"));
        if let Some((_, op, on)) = owner.filter(|(_, _, v)| **v != Node::Null) {
            let o = self.text(on, &op, "reviewer")?;
            if !agents.contains(&o) {
                return Err(self.err(
                    &op,
                    format!(
                        "document owner `{o}` is not an agent of this workflow{}",
                        did_you_mean(o, agents)
                    ),
                    format!("use one of: {}", agents.join(", ")),
                ));
            }
            out.document_owner = Some(o.to_owned());
        }
        Ok(out)
    }

    /// The folder, with `${{ workflow.name }}` / `${{ workflow.tag }}` kept (in one
    /// spelling) for the kernel to fill in; nothing else can be known this early.
    fn context_dir(&self, raw: &str, path: &[Step]) -> Result<PathBuf, SpecError> {
        let exprs = expressions(raw).map_err(|b| {
            self.err_at(
                self.expr_pos(path, raw, b.start),
                self.field(path),
                b.message,
                "write `${{ workflow.name }}` or `${{ workflow.tag }}`",
            )
        })?;
        let mut s = String::new();
        let mut from = 0;
        for e in exprs {
            if !matches!(e.name, "workflow.name" | "workflow.tag") {
                return Err(self.err_at(
                    self.expr_pos(path, raw, e.start),
                    self.field(path),
                    format!("`${{{{ {} }}}}` cannot be used in the documents folder", e.name),
                    "only ${{ workflow.name }} and ${{ workflow.tag }} can: the folder is chosen before setup runs",
                ));
            }
            s += &raw[from..e.start];
            s += &format!("${{{{ {} }}}}", e.name);
            from = e.end;
        }
        s += &raw[from..];
        self.path(&s, path)
    }
}

/// A message or fix ends without a period: the Display adds the punctuation.
fn clean(s: String) -> String {
    let t = s.trim_end();
    t.strip_suffix('.').unwrap_or(t).to_owned()
}

static MARKS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r" at line \d+ column \d+").expect("valid regex"));
static QUOTED_START: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"while scanning a (?:quoted|block) scalar at line (\d+) column (\d+)")
        .expect("valid regex")
});
static SERDE_PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)^([A-Za-z0-9_.\[\]-]+): (.*)$").expect("valid regex"));
static UNKNOWN_FIELD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)^unknown field `([^`]*)`, (.*)$").expect("valid regex"));
static BACKTICKED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"`([^`]*)`").expect("valid regex"));
static BUDGET_FIELD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"budget\.(\w+)").expect("valid regex"));
static MOCK_RULE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^mock rule (\d+)").expect("valid regex"));

fn strip_marks(s: &str) -> String {
    MARKS.replace_all(s, "").into_owned()
}

/// A YAML syntax error (or one serde_norway raises while reading), with the
/// position that points at the cause and a fix for the usual ones.
fn syntax_error(label: &str, text: &str, e: &serde_norway::Error) -> SpecError {
    let raw = e.to_string();
    let mut pos = e.location().map_or(Pos::START, |l| Pos {
        line: l.line(),
        column: l.column(),
    });
    // An unclosed quote is found at the end of the text; its start is the mistake.
    if raw.contains("found unexpected end of stream")
        && let Some(c) = QUOTED_START.captures(&raw)
        && let (Ok(line), Ok(column)) = (c[1].parse(), c[2].parse())
    {
        pos = Pos { line, column };
    }
    if raw.contains("more than one document") {
        pos = second_document(text);
    }
    let line_text = text.lines().nth(pos.line.saturating_sub(1)).unwrap_or("");
    let at_char = line_text.chars().nth(pos.column.saturating_sub(1));
    let indent_has_tab = line_text
        .chars()
        .take_while(|c| c.is_whitespace())
        .any(|c| c == '\t');
    let stripped = strip_marks(&raw);
    let (field, message) = match SERDE_PATH.captures(&stripped) {
        Some(c) if raw.contains(TAG_REFUSED) => (c[1].to_owned(), c[2].to_owned()),
        _ => ("yaml".to_owned(), stripped.clone()),
    };
    let (message, fix) = if at_char == Some('\t')
        || raw.contains("tab character")
        || (indent_has_tab && raw.contains("cannot start any token"))
    {
        (
            format!("a tab character is used for indentation ({message})"),
            "indent with spaces only; YAML does not allow tabs there".to_owned(),
        )
    } else if raw.contains("quoted scalar") {
        (
            message,
            "close the quote that starts here (or escape a quote inside the text)".to_owned(),
        )
    } else if raw.contains("mapping values are not allowed") {
        (
            message,
            "quote a value that contains \": \", e.g. kickoff: \"note: read this\"".to_owned(),
        )
    } else if raw.contains("did not find expected key")
        || raw.contains("expected '-' indicator")
        || raw.contains("block mapping")
    {
        (message, "check the indentation: the keys of one mapping line up in one column, and nested keys are indented further".to_owned())
    } else if raw.contains("flow sequence") || raw.contains("flow mapping") {
        (
            message,
            "close the [ ] or { } and separate the items with commas".to_owned(),
        )
    } else if raw.contains("unknown anchor") {
        (
            message,
            "define the anchor (&name) before using it (*name)".to_owned(),
        )
    } else if raw.contains(TAG_REFUSED) {
        (
            message,
            "remove the tag and write the plain value".to_owned(),
        )
    } else if raw.contains("more than one document") {
        ("the YAML holds more than one document".to_owned(), "keep one workflow per file: remove this `---` and what follows, or move it to its own file".to_owned())
    } else if raw.contains("recursion limit") {
        (
            "the YAML is nested too deeply".to_owned(),
            "flatten it".to_owned(),
        )
    } else {
        (message, "correct the YAML syntax here (indent with spaces; quote values containing \": \" or \" #\")".to_owned())
    };
    SpecError {
        file: label.to_owned(),
        line: pos.line,
        column: pos.column,
        field,
        message: clean(message),
        fix: clean(fix),
    }
}

/// The line of the second `---` (the first one may open the document).
fn second_document(text: &str) -> Pos {
    let mut seen_content = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_end();
        let is_marker = t == "---" || t.starts_with("--- ") || t == "...";
        if is_marker && seen_content {
            return Pos {
                line: i + 1,
                column: 1,
            };
        }
        if !is_marker && !t.trim_start().is_empty() && !t.trim_start().starts_with('#') {
            seen_content = true;
        }
    }
    Pos::START
}
