//! How each backend holds a permission profile, and what it cannot express.
//!
//! One translation per backend, pure data: the worker builds its command line from
//! it and the kernel calls [`check`] at agent_new and agent_update, so a profile a
//! backend cannot hold exactly is refused with the reason before any run, never
//! silently widened. Every mapping was verified against the real CLI (see the
//! permission rows of the interop tests), except Cursor's, which is not on npm.

use super::{Class, Kind, Permissions, Profile};
use crate::backends::Backend;

/// Claude Code: a permission mode and `--allowedTools` / `--disallowedTools` rules.
/// In `-p` a tool that is neither allowed by a rule nor by the mode is denied (and
/// listed in the result's `permission_denials`), never prompted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claude {
    /// `default` (read), `acceptEdits` (edit: file edits inside the working
    /// directory) or `bypassPermissions` (full).
    pub mode: &'static str,
    pub allowed: Vec<String>,
    pub disallowed: Vec<String>,
}

pub(super) const CLAUDE_READ: &[&str] = &["Read", "Glob", "Grep"];
pub(super) const CLAUDE_EDIT: &[&str] = &["Edit", "Write", "MultiEdit", "NotebookEdit"];
pub(super) const CLAUDE_WEB: &[&str] = &["WebFetch", "WebSearch"];

pub fn claude(p: &Permissions, servers: &[&str]) -> Claude {
    let mut allowed = vec![format!("mcp__{}", crate::protocol::TEAM_SERVER)];
    allowed.extend(servers.iter().map(|s| format!("mcp__{s}")));
    let mut disallowed = Vec::new();
    let names = |c: &Class| -> Vec<String> {
        match c {
            Class::Read => CLAUDE_READ.iter().map(|s| s.to_string()).collect(),
            Class::Edit => CLAUDE_EDIT.iter().map(|s| s.to_string()).collect(),
            Class::Web => CLAUDE_WEB.iter().map(|s| s.to_string()).collect(),
            Class::Shell(None) => vec!["Bash".into()],
            Class::Shell(Some(p)) => vec![format!("Bash({p})")],
            Class::Mcp { server, tool: None } => vec![format!("mcp__{server}")],
            Class::Mcp {
                server,
                tool: Some(t),
            } => vec![format!("mcp__{server}__{t}")],
            // A granted path is the OS sandbox's, not a tool rule.
            Class::Path { .. } => Vec::new(),
        }
    };
    for c in &p.allow {
        if *c != Class::Edit {
            allowed.extend(names(c));
        }
    }
    for c in &p.deny {
        disallowed.extend(names(c));
    }
    let edit_allowed = p.allow.contains(&Class::Edit);
    let mode = match p.profile {
        Profile::Full => "bypassPermissions",
        Profile::Edit => "acceptEdits",
        Profile::Read if edit_allowed => "acceptEdits",
        Profile::Read => "default",
    };
    Claude {
        mode,
        allowed,
        disallowed,
    }
}

/// Codex: a sandbox for every command it runs, and its shell tools on or off.
/// Codex reads files by running commands, so commands run under every profile,
/// inside the sandbox: `read-only`, `workspace-write` (writes in its folder only,
/// no network) or `danger-full-access`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Codex {
    pub sandbox: &'static str,
    /// Codex features to turn off (its shell tools, when `shell` is denied).
    pub disable: Vec<&'static str>,
    /// Own servers not to give it (denied whole).
    pub hidden_servers: Vec<String>,
}

pub fn codex(p: &Permissions) -> Result<Codex, String> {
    let why = |what: &str, instead: &str| {
        Err(format!(
            "the codex backend cannot express {what}: {instead} (Codex runs every command in its sandbox: \
             read-only for read, writes in the agent's folder for edit, none for full)"
        ))
    };
    let mut sandbox = match p.profile {
        Profile::Read => "read-only",
        Profile::Edit => "workspace-write",
        Profile::Full => "danger-full-access",
    };
    for c in &p.allow {
        match c {
            Class::Read => {}
            Class::Edit if p.profile == Profile::Read => sandbox = "workspace-write",
            Class::Edit => {}
            Class::Shell(None) if p.profile == Profile::Full => {}
            Class::Shell(_) => {
                return why(
                    &format!("allow {c}"),
                    "use profile full to run commands outside the sandbox, or another backend to limit commands by pattern",
                );
            }
            Class::Web if p.profile == Profile::Full => {}
            Class::Web => return why("allow web below full", "use profile full"),
            Class::Mcp { .. } | Class::Path { .. } => {}
        }
    }
    let mut disable = Vec::new();
    let mut hidden_servers = Vec::new();
    for c in &p.deny {
        match c {
            Class::Shell(None) => disable.extend(["shell_tool", "unified_exec"]),
            Class::Shell(Some(_)) => {
                return why(
                    &format!("deny {c}"),
                    "deny shell as a whole, or use a backend that matches commands (claude, gemini, opencode, sdk)",
                );
            }
            Class::Mcp { server, tool: None } => hidden_servers.push(server.clone()),
            Class::Mcp { tool: Some(_), .. } => {
                return why(&format!("deny {c}"), "deny the whole server (mcp:<server>)");
            }
            Class::Path { .. } => {}
            Class::Read => {
                return why("deny read", "Codex reads with commands; deny shell instead");
            }
            Class::Edit if sandbox == "read-only" => {}
            Class::Edit => return why("deny edit", "use profile read"),
            Class::Web if p.profile == Profile::Full => {
                return why(
                    "deny web with full",
                    "full has no sandbox; use profile edit",
                );
            }
            Class::Web => {}
        }
    }
    Ok(Codex {
        sandbox,
        disable,
        hidden_servers,
    })
}

/// Gemini CLI: an approval mode and policy rules (its policy engine, a TOML file
/// passed with `--policy`; user rules outrank Gemini's defaults). Headless, a tool
/// that would need approval is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gemini {
    /// `default` (read), `auto_edit` (edit) or `yolo` (full).
    pub approval_mode: &'static str,
    /// The policy file's text.
    pub policy: String,
    pub hidden_servers: Vec<String>,
}

const GEMINI_READ: &[&str] = &[
    "read_file",
    "read_many_files",
    "list_directory",
    "glob",
    "grep_search",
];
const GEMINI_EDIT: &[&str] = &["write_file", "replace"];
const GEMINI_WEB: &[&str] = &["web_fetch", "google_web_search"];

pub fn gemini(p: &Permissions) -> Result<Gemini, String> {
    let mut rules = Vec::new();
    let rule = |tools: &[&str], extra: &str, decision: &str, priority: u32, msg: &str| {
        let list = tools
            .iter()
            .map(|t| format!("{t:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut r = format!(
            "[[rule]]\ntoolName = [{list}]\n{extra}decision = {decision:?}\npriority = {priority}\n"
        );
        if !msg.is_empty() {
            r.push_str(&format!("denyMessage = {msg:?}\n"));
        }
        r
    };
    let mut edit = p.profile >= Profile::Edit;
    let mut web = p.profile == Profile::Full;
    let mut hidden_servers = Vec::new();
    for c in &p.allow {
        match c {
            Class::Read => {}
            Class::Edit => edit = true,
            Class::Web => web = true,
            Class::Shell(None) => rules.push(rule(&["run_shell_command"], "", "allow", 500, "")),
            Class::Shell(Some(pat)) => {
                let prefix = gemini_prefix(pat, false)?;
                rules.push(rule(
                    &["run_shell_command"],
                    &format!("commandPrefix = {prefix:?}\n"),
                    "allow",
                    500,
                    "",
                ));
            }
            Class::Mcp { .. } | Class::Path { .. } => {}
        }
    }
    let denied = |what: &str| format!("refused: this agent's permissions deny {what}");
    for c in &p.deny {
        match c {
            Class::Read => rules.push(rule(GEMINI_READ, "", "deny", 900, &denied("read"))),
            Class::Edit => rules.push(rule(GEMINI_EDIT, "", "deny", 900, &denied("edit"))),
            Class::Web => rules.push(rule(GEMINI_WEB, "", "deny", 900, &denied("web"))),
            Class::Shell(None) => rules.push(rule(
                &["run_shell_command"],
                "",
                "deny",
                900,
                &denied("shell"),
            )),
            Class::Shell(Some(pat)) => {
                let prefix = gemini_prefix(pat, true)?;
                rules.push(rule(
                    &["run_shell_command"],
                    &format!("commandPrefix = {prefix:?}\n"),
                    "deny",
                    900,
                    &denied(&c.to_string()),
                ));
            }
            Class::Mcp { server, tool: None } => hidden_servers.push(server.clone()),
            Class::Mcp {
                server,
                tool: Some(t),
            } => rules.push(rule(
                &[&format!("{server}__{t}")],
                "",
                "deny",
                900,
                &denied(&c.to_string()),
            )),
            Class::Path { .. } => {}
        }
    }
    // Web search counts as reading to Gemini, and auto_edit lets web_fetch through:
    // without web, refuse both explicitly.
    if !web {
        rules.push(rule(
            GEMINI_WEB,
            "",
            "deny",
            800,
            &denied("web (not in its profile)"),
        ));
    }
    let approval_mode = match p.profile {
        Profile::Full => "yolo",
        _ if edit => "auto_edit",
        _ => "default",
    };
    if web && approval_mode == "default" {
        rules.push(rule(GEMINI_WEB, "", "allow", 500, ""));
    }
    Ok(Gemini {
        approval_mode,
        policy: rules.join("\n"),
        hidden_servers,
    })
}

/// Gemini matches commands by prefix: a glob must be `<prefix>*` to mean the same.
/// Gemini's prefix must be followed by a space or the end of the command (its rule
/// is `"command":"<prefix>` then whitespace or a quote), so `rm *` becomes `rm`
/// (the same commands, and bare `rm`). A prefix ending inside a word (`rm*`) would
/// match less than the glob: fine to allow, not to deny, so a deny must end at a
/// word (`rm *`).
fn gemini_prefix(pat: &str, deny: bool) -> Result<String, String> {
    match pat.strip_suffix('*') {
        Some(prefix) if !prefix.contains('*') && !prefix.trim().is_empty() => {
            if prefix.ends_with(char::is_whitespace) {
                Ok(prefix.trim_end().to_owned())
            } else if deny {
                Err(format!(
                    "the gemini backend matches whole words at the start of a command: deny shell:{pat:?} \
                     as \"{} *\" (a word, a space, then *), or use another backend",
                    prefix.trim_end()
                ))
            } else {
                Ok(prefix.to_owned())
            }
        }
        _ => Err(format!(
            "the gemini backend matches commands by their start only: write shell:{pat:?} as \
             \"<command start>*\" (e.g. \"npm test*\"), or use another backend"
        )),
    }
}

/// OpenCode: its `permission` config (`edit`, `bash` by glob, `webfetch`), each
/// `allow` or `deny`; a tool of an MCP server is switched off under `tools`.
pub fn opencode(p: &Permissions) -> serde_json::Value {
    use serde_json::{Map, Value, json};
    let word = |b: bool| if b { "allow" } else { "deny" };
    let edit = p.may(Kind::Edit);
    let web = p.may(Kind::Web);
    // Bash: the profile's default, then allowed and denied patterns (OpenCode takes
    // the last matching pattern, so denials come last).
    let mut bash = Map::new();
    let shell_all = p.profile == Profile::Full || p.allow.contains(&Class::Shell(None));
    bash.insert("*".into(), json!(word(shell_all)));
    for c in &p.allow {
        if let Class::Shell(Some(pat)) = c {
            bash.insert(pat.clone(), json!("allow"));
        }
    }
    for c in &p.deny {
        match c {
            Class::Shell(Some(pat)) => {
                bash.insert(pat.clone(), json!("deny"));
            }
            Class::Shell(None) => {
                bash.clear();
                bash.insert("*".into(), json!("deny"));
            }
            _ => {}
        }
    }
    let mut tools = Map::new();
    for c in &p.deny {
        if let Class::Mcp {
            server,
            tool: Some(t),
        } = c
        {
            tools.insert(format!("{server}_{t}"), Value::Bool(false));
        }
    }
    let mut v = json!({
        "permission": {
            "edit": word(edit),
            "bash": Value::Object(bash),
            "webfetch": word(web),
            // Outside its folder: refused (headless, OpenCode would ask, then refuse).
            "external_directory": "deny",
        },
    });
    if !tools.is_empty() {
        v["tools"] = Value::Object(tools);
    }
    v
}

/// Own servers a backend is not given at all (denied whole).
pub fn hidden_servers(p: &Permissions) -> Vec<String> {
    p.deny
        .iter()
        .filter_map(|c| match c {
            Class::Mcp { server, tool: None } => Some(server.clone()),
            _ => None,
        })
        .collect()
}

/// Cursor Agent: `--force` (run tools without asking) from `edit` up, and
/// permission rules in the workspace's `.cursor/cli.json`. Not verified here
/// (Cursor is not on npm); the mapping follows Cursor's documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub force: bool,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

pub fn cursor(p: &Permissions) -> Result<Cursor, String> {
    let token = |c: &Class| -> Result<String, String> {
        Ok(match c {
            Class::Read => "Read(**)".into(),
            Class::Edit => "Write(**)".into(),
            Class::Shell(None) => "Shell(*)".into(),
            Class::Shell(Some(pat)) => {
                let base = pat.strip_suffix('*').unwrap_or(pat).trim();
                if base.is_empty() || base.contains(['*', ' ', '\t']) {
                    return Err(format!(
                        "the cursor backend matches a command by its program name only: write shell:{pat:?} \
                         as \"<program>*\" (e.g. \"cargo*\"), or use another backend"
                    ));
                }
                format!("Shell({base})")
            }
            Class::Web => {
                return Err(
                    "the cursor backend has no separate web permission: leave web out, or use another backend"
                        .into(),
                );
            }
            Class::Mcp { server, tool } => {
                format!("Mcp({server}:{})", tool.as_deref().unwrap_or("*"))
            }
            // Left out below: granted by the OS sandbox, not by Cursor's rules.
            Class::Path { .. } => String::new(),
        })
    };
    let allow = p
        .allow
        .iter()
        .filter(|c| !matches!(c, Class::Path { .. }))
        .map(token)
        .collect::<Result<Vec<_>, _>>()?;
    let mut deny = p.deny.iter().map(token).collect::<Result<Vec<_>, _>>()?;
    // Without --force Cursor runs nothing that changes the machine; from edit up it
    // runs what is not denied, so edit denies every command except those allowed.
    let force = p.profile >= Profile::Edit || !allow.is_empty();
    if p.profile < Profile::Full && force {
        if allow
            .iter()
            .any(|a| a.starts_with("Shell(") && a != "Shell(*)")
        {
            return Err(
                "the cursor backend cannot allow some commands while refusing the rest below full: \
                 use profile full with deny rules, or another backend (claude, gemini, opencode, sdk)"
                    .into(),
            );
        }
        if !allow.iter().any(|a| a == "Shell(*)") {
            deny.push("Shell(*)".into());
        }
        if p.profile == Profile::Read && !allow.iter().any(|a| a == "Write(**)") {
            deny.push("Write(**)".into());
        }
    }
    Ok(Cursor { force, allow, deny })
}

/// Checks that `backend` can hold `p` exactly. The error says what it cannot
/// express and what to choose instead; a profile is never silently widened.
pub fn check(backend: &str, p: &Permissions) -> Result<(), String> {
    match backend.parse::<Backend>() {
        Ok(Backend::Codex) => codex(p).map(|_| ()),
        Ok(Backend::Gemini) => gemini(p).map(|_| ()),
        Ok(Backend::Cursor) => cursor(p).map(|_| ()),
        _ => Ok(()),
    }
}

/// Most own MCP servers per agent.
pub const MAX_SERVERS: usize = 16;

/// Everything about an agent's powers its backend must agree to: the profile
/// ([`check`]), and its own servers as its rules name them.
pub fn check_agent(backend: &str, p: &Permissions, servers: &[&str]) -> Result<(), String> {
    check(backend, p)?;
    if servers.len() > MAX_SERVERS {
        return Err(format!(
            "mcp_servers: at most {MAX_SERVERS} servers per agent"
        ));
    }
    let scripted = matches!(
        backend.parse::<Backend>(),
        Ok(Backend::Mock | Backend::External | Backend::Human)
    );
    if !servers.is_empty() && scripted {
        return Err(format!(
            "mcp_servers: a {backend} agent has no backend to give them to; leave them out"
        ));
    }
    for c in p.allow.iter().chain(&p.deny) {
        if let Class::Mcp { server, .. } = c
            && !servers.contains(&server.as_str())
        {
            return Err(format!(
                "permissions: {c} names no server of this agent's mcp_servers ({}); add the server or fix the name",
                if servers.is_empty() {
                    "it has none".to_owned()
                } else {
                    servers.join(", ")
                }
            ));
        }
    }
    Ok(())
}

/// What each profile becomes on `backend`, in words (backend_list shows it).
pub fn profiles(backend: &str) -> std::collections::BTreeMap<String, String> {
    let (read, edit, full) = match backend.parse::<Backend>() {
        Ok(Backend::Mock | Backend::External | Backend::Human) => (
            "its script only uses the team tools",
            "its script only uses the team tools",
            "its script only uses the team tools",
        ),
        Ok(Backend::Sdk) => (
            "read_file, list_files, search_files in its folder",
            "plus write_file and edit_file in its folder",
            "plus run_command (sh -c in its folder)",
        ),
        Ok(Backend::Claude) => (
            "--permission-mode default: Read, Glob, Grep; edits and Bash are refused",
            "--permission-mode acceptEdits: plus Edit and Write inside its folder; Bash is refused",
            "--permission-mode bypassPermissions: every tool (as root, IS_SANDBOX=1 is set)",
        ),
        Ok(Backend::Codex) => (
            "--sandbox read-only: commands run but cannot write",
            "--sandbox workspace-write: edits and commands write only in its folder, no network",
            "--sandbox danger-full-access: no sandbox",
        ),
        Ok(Backend::Gemini) => (
            "--approval-mode default: reading tools; edits, shell and web refused",
            "--approval-mode auto_edit: plus write_file and replace; web refused by a policy rule",
            "--approval-mode yolo: every tool",
        ),
        Ok(Backend::OpenCode) => (
            "permission edit deny, bash deny, webfetch deny",
            "permission edit allow, bash deny, webfetch deny",
            "permission edit allow, bash allow, webfetch allow",
        ),
        Ok(Backend::Cursor) => (
            "no --force: tools that change anything are not run",
            "--force with Shell(*) denied in .cursor/cli.json",
            "--force",
        ),
        Err(_) => ("", "", ""),
    };
    [("read", read), ("edit", edit), ("full", full)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// What a person should know about a profile on a backend that the profile alone
/// does not say (shown as a warning by agent_new and agent_update); `as_root`:
/// whether the kernel runs as root.
pub fn notes(backend: &str, p: &Permissions, as_root: bool) -> Vec<String> {
    let mut v = Vec::new();
    let backend = backend.parse::<crate::backends::Backend>().ok();
    if backend == Some(crate::backends::Backend::Claude) && p.profile == Profile::Full && as_root {
        v.push(
            "the kernel runs as root: Claude Code refuses its full mode (bypassPermissions) as root, so the \
             worker sets IS_SANDBOX=1 for this agent; run agent-worker as a normal user to keep Claude's guard"
                .to_owned(),
        );
    }
    if backend == Some(crate::backends::Backend::Codex)
        && p.profile < Profile::Full
        && !p.deny.contains(&Class::Shell(None))
    {
        v.push(
            "Codex reads files by running commands, so under this profile it runs commands inside its sandbox \
             (they cannot write outside what the profile allows, and have no network)"
                .to_owned(),
        );
    }
    v
}
