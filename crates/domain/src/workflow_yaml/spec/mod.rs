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

use super::interpolate::{KnownNames, RESERVED_OUTPUTS, expressions, is_identifier};
use super::locate::{Pos, Step, extract, locate, nth_expression, pos_of};
use super::node::{self, Node, TAG_REFUSED};
use super::suggest::did_you_mean;
use super::{AgentDef, BACKENDS, ContextDef, ParamDef, ParamKind, SetupStep, SpecError, Workflow};
use crate::guards::Budget;
use crate::protocol::MockRule;
use crate::trigger::Trigger;
use regex::Regex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

mod agent;
mod agent_fields;
mod context;
mod doc;
mod flow;
mod hooks;
pub use hooks::HookDecl;
mod steps;

/// Larger YAML is refused before parsing: a workflow is a page, not a data set.
const MAX_YAML: usize = 4 << 20;
/// Largest system prompt file.
const MAX_PROMPT_FILE: usize = crate::guards::MAX_SYSTEM_PROMPT;
/// Longest timeout of a setup step or an agent's run.
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_STEPS: i128 = 500;

const TOP_KEYS: &[&str] = &[
    "name",
    "agents",
    "context",
    "params",
    "setup",
    "kickoff",
    "budget",
    "contracts",
    "trigger",
    "steps",
    "org",
    "hooks",
];
const AGENT_KEYS: &[&str] = &[
    "backend",
    "schedule",
    "permissions",
    "mcp_servers",
    "model",
    "system_prompt",
    "cwd",
    "workspace",
    "skills",
    "env",
    "node",
    "wakeup",
    "wakeup_prompt",
    "budget",
    "mock",
    "max_steps",
    "timeout",
    "max_tokens",
    "delegate",
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
        let scope = KnownNames {
            outputs: setup.iter().filter_map(|s| s.as_name.as_deref()).collect(),
            params: param_names.clone(),
            steps: None,
        };

        let (agents, warnings) = match get("agents") {
            Some((i, n)) => (self.agents(n, i, &scope)?, Vec::new()),
            // Seed 001 names its agents only in `steps:`: they take the defaults.
            None => self.step_agents(get("steps"), &scope)?,
        };
        let agent_names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();

        let context = match get("context") {
            Some((i, n)) => self.context(n, &[Step::Entry(i)], &agent_names)?,
            None => ContextDef::default(),
        };
        let kickoff = self.kickoff(get("kickoff"), &scope)?;
        let budget = match get("budget") {
            Some((i, n)) => self.budget(n, &[Step::Entry(i)])?,
            None => None,
        };
        let contracts = match get("contracts") {
            Some((_, Node::Null)) | None => Vec::new(),
            Some((i, n)) => self.contracts(n, &[Step::Entry(i)], &agent_names)?,
        };
        let (trigger, steps) = self.flow(
            get("trigger"),
            get("steps"),
            get("kickoff"),
            &agent_names,
            &scope,
        )?;
        let org = self.org(get("org"))?;
        let hooks = match get("hooks") {
            Some((_, Node::Null)) | None => Vec::new(),
            Some((i, n)) => self.hooks(n, &[Step::Entry(i)], &agent_names)?,
        };
        Ok(Workflow {
            hooks,
            org,
            trigger,
            steps,
            contracts,
            name,
            file: file.map(Path::to_path_buf),
            source_dir: self.source_dir.clone(),
            agents,
            context,
            params,
            setup,
            kickoff,
            budget,
            warnings,
        })
    }

    /// `org:` the organisation the instance runs within (None: global).
    fn org(&self, given: Option<(usize, &Node)>) -> Result<Option<String>, SpecError> {
        match given {
            Some((_, Node::Null)) | None => Ok(None),
            Some((i, n)) => {
                let path = [Step::Entry(i)];
                let g = self.text(n, &path, "review-team")?;
                crate::names::org_name(g).map_err(|e| {
                    self.err(
                        &path,
                        e.to_string(),
                        "name an organisation workflow_list shows, or global",
                    )
                })
            }
        }
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
            if s.to_ascii_lowercase().starts_with(crate::names::ORG_PREFIX) {
                return Err(self.err(
                    &path,
                    "names starting with \"org.\" are the organisations' own instances",
                    "choose another name (`org:` runs the workflow within an organisation)",
                ));
            }
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
        let org = stem
            .to_ascii_lowercase()
            .starts_with(crate::names::ORG_PREFIX);
        match crate::names::check_name("workflow name", &stem) {
            Ok(()) if stem != crate::names::GLOBAL_WORKFLOW && !org => Ok(stem.into_owned()),
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

    /// `contracts:` a list of contracts, as contract_set takes them, for this
    /// instance only (`workflow:` is not theirs to set).
    fn contracts(
        &self,
        n: &Node,
        path: &[Step],
        agents: &[&str],
    ) -> Result<Vec<(String, serde_json::Value)>, SpecError> {
        let items = self.list(
            n,
            path,
            "contracts must be a list",
            "write contracts: [ { name: no-rm, when: { event: tool_request, tool: shell, match: \"rm *\" }, then: { action: deny } } ]",
        )?;
        let mut out: Vec<(String, serde_json::Value)> = Vec::new();
        for i in 0..items.len() {
            let mut at = path.to_vec();
            at.push(Step::Item(i));
            let v: serde_json::Value =
                extract(self.text, &at).map_err(|e| self.typed_error(&e, &at))?;
            if v.get("workflow").is_some() || v.get("org").is_some() {
                return Err(self.err(
                    &at,
                    "a workflow's contract applies to its own instance; it has no `workflow` or `org`",
                    "remove it (contract_set takes them, for contracts set by the lead; `org:` at the top runs the instance within an organisation)",
                ));
            }
            let c = crate::contracts::parse(&v).map_err(|e| {
                self.err(
                    &at,
                    format!("contract: {e}"),
                    "see the Contracts section of the README for each event's filters and actions",
                )
            })?;
            if matches!(c.when, crate::contracts::When::Step { .. }) {
                return Err(self.err(
                    &at,
                    "a step contract is made from `steps:`",
                    "write the step under `steps:` (agent, on, prompt)",
                ));
            }
            if c.name.starts_with("step-") {
                return Err(self.err(
                    &at,
                    format!(
                        "contract {:?}: names starting with step- are the steps' own",
                        c.name
                    ),
                    "rename the contract",
                ));
            }
            if out.iter().any(|(name, _)| *name == c.name) {
                return Err(self.err(
                    &at,
                    format!("contract {:?} is named twice", c.name),
                    "give each its own name",
                ));
            }
            // A member a contract names must be one of this workflow's (or the lead).
            let named: Vec<&String> = match &c.then {
                crate::contracts::Then::RequireApproval { approvers, .. } => {
                    approvers.iter().collect()
                }
                crate::contracts::Then::Notify { to } => to.iter().collect(),
                crate::contracts::Then::Route { to } => to.iter().collect(),
                _ => Vec::new(),
            };
            if let Some(m) = named.into_iter().find(|m| {
                m.as_str() != crate::names::LEAD
                    && !agents.iter().any(|a| a.eq_ignore_ascii_case(m))
            }) {
                return Err(self.err(
                    &at,
                    format!(
                        "contract {:?} names {m:?}, who is not an agent of this workflow",
                        c.name
                    ),
                    format!("name one of: user, {}", agents.join(", ")),
                ));
            }
            out.push((c.name.clone(), v));
        }
        Ok(out)
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
