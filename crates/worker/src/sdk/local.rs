//! The sdk backend's local tools: files and commands in the agent's folder,
//! each asked of the agent's permissions before it runs.
//!
//! They are offered under every profile; a call the profile does not allow is not
//! made, and the model gets the reason as the tool's result (as a CLI's denial
//! reads), so it can do without or say what it needs. The kernel records each
//! refusal with the run.

use super::ToolDef;
use super::command::run_command;
use super::fs::{self, Root};
use crate::Reporter;
use domain::permissions::{Decision, Permissions, Request};
use domain::protocol::Report;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub const NAMES: &[&str] = &[
    "read_file",
    "list_files",
    "search_files",
    "write_file",
    "edit_file",
    "run_command",
];

fn def(name: &str, description: &str, schema: Value) -> ToolDef {
    ToolDef {
        name: name.into(),
        description: description.into(),
        schema,
    }
}

/// The tools as the model sees them.
pub fn tools() -> Vec<ToolDef> {
    let path = json!({"type": "string", "description": "A path relative to your folder."});
    vec![
        def(
            "read_file",
            "Read a text file in your folder (at most 256 KiB; give offset and limit, in lines, for part of a bigger one).",
            json!({"type": "object", "properties": {
                "path": path,
                "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines."}},
                "required": ["path"], "additionalProperties": false}),
        ),
        def(
            "list_files",
            "List the files and folders in your folder or a subfolder (recursive: everything below).",
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "A subfolder (default: your folder)."},
                "recursive": {"type": "boolean"}},
                "additionalProperties": false}),
        ),
        def(
            "search_files",
            "Search the text files in your folder for lines matching a regular expression; returns path:line: text.",
            json!({"type": "object", "properties": {
                "pattern": {"type": "string", "description": "A regular expression (Rust syntax)."},
                "path": {"type": "string", "description": "A subfolder or file (default: your folder)."}},
                "required": ["pattern"], "additionalProperties": false}),
        ),
        def(
            "write_file",
            "Create or replace a file in your folder with the given content (folders are made as needed).",
            json!({"type": "object", "properties": {
                "path": path, "content": {"type": "string"}},
                "required": ["path", "content"], "additionalProperties": false}),
        ),
        def(
            "edit_file",
            "Replace the exact text old_string with new_string in a file; old_string must occur once (or set replace_all).",
            json!({"type": "object", "properties": {
                "path": path, "old_string": {"type": "string"}, "new_string": {"type": "string"},
                "replace_all": {"type": "boolean"}},
                "required": ["path", "old_string", "new_string"], "additionalProperties": false}),
        ),
        def(
            "run_command",
            "Run a shell command in your folder (sh -c, no input; default time limit 120 s, at most 600). Returns its exit status and output.",
            json!({"type": "object", "properties": {
                "command": {"type": "string"},
                "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 600}},
                "required": ["command"], "additionalProperties": false}),
        ),
    ]
}

/// What a call needs from the agent's permissions.
fn request(name: &str, args: &Value) -> Option<Request> {
    let s = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Some(match name {
        "read_file" | "list_files" | "search_files" => Request::Read {
            path: match s("path") {
                p if p.is_empty() => ".".into(),
                p => p,
            },
        },
        "write_file" | "edit_file" => Request::Edit { path: s("path") },
        "run_command" => Request::Shell {
            command: s("command"),
        },
        _ => return None,
    })
}

/// The local side of one run.
pub struct Local<'a> {
    pub root: Root,
    pub permissions: &'a Permissions,
    /// The kernel, asked before a tool runs (its contracts).
    pub client: &'a crate::client::KernelClient,
    pub stop: &'a CancellationToken,
    pub report: &'a Reporter,
}

impl Local<'_> {
    /// Runs a local tool, or `None` if `name` is not one. The text and whether it
    /// is an error, as the model gets it.
    pub async fn call(&self, name: &str, args: &Value) -> Option<(String, bool)> {
        let req = request(name, args)?;
        if let Some(why) = self.ask(req, name) {
            return Some((why, true));
        }
        if let Some(why) = self.govern(name, args).await {
            return Some((why, true));
        }
        let s = |k: &str| args.get(k).and_then(Value::as_str);
        let n = |k: &str| args.get(k).and_then(Value::as_u64);
        let missing = |k: &str| format!("{name} needs `{k}`");
        let out = match name {
            "run_command" => match s("command") {
                None => Err(missing("command")),
                Some(c) => {
                    run_command(
                        self.root.dir(),
                        c,
                        n("timeout_seconds"),
                        self.stop,
                        self.report,
                    )
                    .await
                }
            },
            _ => {
                let root = &self.root;
                // File work is blocking: off the worker's async thread.
                let (name, args) = (name.to_owned(), args.clone());
                let root_dir = root.dir().to_owned();
                tokio::task::spawn_blocking(move || file_call(&root_dir, &name, &args))
                    .await
                    .unwrap_or_else(|e| Err(format!("the tool failed: {e}")))
            }
        };
        Some(match out {
            Ok(t) => (t, false),
            Err(e) => (e, true),
        })
    }
}

impl Local<'_> {
    /// Asks the agent's permissions; a refusal is reported to the kernel and its
    /// reason returned (for the model).
    pub fn ask(&self, req: Request, tool: &str) -> Option<String> {
        match self.permissions.decide(&req) {
            Decision::Allow => None,
            Decision::Deny(why) => {
                self.report.send(&Report::Denied {
                    tool: tool.to_owned(),
                    detail: req.detail().chars().take(500).collect(),
                    reason: why.clone(),
                });
                Some(why)
            }
        }
    }
}

impl Local<'_> {
    /// Asks the team's contracts (after the profile allowed it): None to go on, or
    /// the reason it is refused. A request the kernel cannot answer is refused:
    /// nothing runs unasked. It may wait for a person's approval.
    pub async fn govern(&self, tool: &str, args: &Value) -> Option<String> {
        let ask = serde_json::json!({"tool_name": tool, "input": args});
        // The answer is one text block holding JSON (Claude Code's shape).
        let parsed = |v: Value| match v {
            Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::Null),
            other => other,
        };
        match self
            .client
            .call(PERMISSION_TOOL, ask)
            .await
            .map(|r| r.map(parsed))
        {
            Ok(Ok(v)) if v["behavior"] == "allow" => None,
            Ok(Ok(v)) => Some(
                v["message"]
                    .as_str()
                    .unwrap_or("refused by the team's contracts")
                    .to_owned(),
            ),
            Ok(Err(crate::client::ToolFailed(e))) => Some(format!(
                "refused: the team's contracts could not be asked ({e})"
            )),
            Err(e) => Some(format!(
                "refused: the team's contracts could not be asked ({})",
                e.message
            )),
        }
    }
}

/// The kernel's tool a run asks through (never offered to the model).
pub const PERMISSION_TOOL: &str = "permission_request";

fn file_call(dir: &std::path::Path, name: &str, args: &Value) -> Result<String, String> {
    let root = Root::new(dir)?;
    let s = |k: &str| args.get(k).and_then(Value::as_str);
    let n = |k: &str| args.get(k).and_then(Value::as_u64).map(|v| v as usize);
    let b = |k: &str| args.get(k).and_then(Value::as_bool).unwrap_or(false);
    let need = |k: &str| s(k).ok_or_else(|| format!("{name} needs `{k}`"));
    match name {
        "read_file" => fs::read_file(&root, need("path")?, n("offset"), n("limit")),
        "list_files" => fs::list_files(&root, s("path"), b("recursive")),
        "search_files" => fs::search_files(&root, need("pattern")?, s("path")),
        "write_file" => fs::write_file(&root, need("path")?, need("content")?),
        "edit_file" => fs::edit_file(
            &root,
            need("path")?,
            need("old_string")?,
            need("new_string")?,
            b("replace_all"),
        ),
        other => Err(format!("unknown local tool {other}")),
    }
}
