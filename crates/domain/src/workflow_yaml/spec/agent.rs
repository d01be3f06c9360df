//! `agents`: each agent's keys (backend, model, prompt, folder, env, schedule,
//! guards, mock script, permissions, own MCP servers).

use super::agent_fields::Fields;
use super::*;
use crate::permissions::{Permissions, PermissionsArg};
use crate::protocol::McpServer;

/// The kernel's default backend for agents that name none.
pub const DEFAULT_BACKEND_ENV: &str = "AGENT_WORKER_DEFAULT_BACKEND";

/// The key of the entry a value path points at (errors about a setting as a
/// whole point at its key).
pub(super) fn key_of(path: &[Step], value: &[Step]) -> Vec<Step> {
    match value.last() {
        Some(Step::Entry(i)) => with(path, Step::Key(*i)),
        _ => value.to_vec(),
    }
}

impl Doc<'_> {
    pub(super) fn agents(
        &self,
        n: &Node,
        at: usize,
        scope: &KnownNames,
    ) -> Result<Vec<AgentDef>, SpecError> {
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

    pub(super) fn agent(
        &self,
        name: &str,
        n: &Node,
        path: &[Step],
        key: &[Step],
        scope: &KnownNames,
    ) -> Result<AgentDef, SpecError> {
        let what = format!("agent `{name}`");
        self.refuse_unsupported(name, n, path)?;
        if *n == Node::Null {
            return Err(self.err(
                key,
                format!("{what} has no settings"),
                format!("give it at least a backend, e.g. {name}: {{ backend: claude }}"),
            ));
        }
        self.mapping(n, path, AGENT_KEYS, &what)?;
        let f = Fields { node: n, path };
        let (get, set) = (|k: &str| f.get(k), |k: &str| f.set(k));

        let backend = self.agent_backend(&f, key)?;
        let model = match set("model") {
            None => None,
            Some((mp, mn)) => Some(self.non_empty_text(mn, &mp, "sonnet")?.to_owned()),
        };
        let system_prompt = match set("system_prompt") {
            None => None,
            Some((sp, sn)) => Some(self.system_prompt(sn, &sp, scope)?),
        };
        let cwd = self.agent_cwd(&f, scope)?;
        let workspace = self.agent_workspace(&f)?;
        let skills = self.agent_skills(&f)?;
        let env = match set("env") {
            None => BTreeMap::new(),
            Some((ep, en)) => self.env(en, &ep)?,
        };
        let (wakeup, wakeup_prompt) = self.agent_wakeup(&f, scope)?;
        let budget = match get("budget") {
            Some((bp, bn)) => self.budget(bn, &bp)?,
            None => None,
        };
        let mock = match set("mock") {
            None => Vec::new(),
            Some((mp, mn)) => self.mock(mn, &mp, scope)?,
        };
        let node = self.agent_node(&f)?;
        let (max_steps, timeout) = self.agent_limits(&f)?;
        let (permissions, mcp_servers) = self.agent_powers(&f, &backend, key)?;
        let delegate = match set("delegate") {
            None => None,
            Some((dp, dn)) => self.delegate(dn, &dp, budget.as_ref())?,
        };
        Ok(AgentDef {
            delegate,
            name: name.to_owned(),
            backend,
            model,
            system_prompt,
            cwd,
            env,
            node,
            wakeup,
            wakeup_prompt,
            budget,
            mock,
            max_steps,
            timeout,
            permissions,
            mcp_servers,
            workspace,
            skills,
        })
    }

    /// The backend of an agent that names none (or `default`): the kernel's
    /// `AGENT_WORKER_DEFAULT_BACKEND`, else `sdk`.
    pub(super) fn default_backend(&self, at: &[Step]) -> Result<String, SpecError> {
        match std::env::var(DEFAULT_BACKEND_ENV) {
            Ok(v) if !v.trim().is_empty() => {
                let v = v.trim();
                if BACKENDS.contains(&v) {
                    Ok(v.to_owned())
                } else {
                    Err(self.err(
                        at,
                        format!(
                            "the agent takes the default backend, and {DEFAULT_BACKEND_ENV} is {v:?}, which is no backend"
                        ),
                        format!(
                            "set {DEFAULT_BACKEND_ENV} to one of {} where the server starts, or give the agent a backend",
                            BACKENDS.join(", ")
                        ),
                    ))
                }
            }
            _ => Ok("sdk".to_owned()),
        }
    }

    /// `permissions`: a profile name, or `{profile, allow, deny}` (as agent_new).
    pub(super) fn permissions(&self, n: &Node, path: &[Step]) -> Result<Permissions, SpecError> {
        let arg = match n {
            Node::Str(s) => PermissionsArg::Profile(s.clone()),
            Node::Map(_) => PermissionsArg::Detailed(
                extract(self.text, path).map_err(|e| self.typed_error(&e, path))?,
            ),
            other => {
                return Err(self.err(
                    path,
                    format!(
                        "permissions must be a profile name or a mapping, found {}",
                        other.kind()
                    ),
                    "write e.g. permissions: read, or permissions: { profile: edit, allow: [\"shell:npm test*\"] }",
                ));
            }
        };
        arg.read().map_err(|e| {
            self.err(
                path,
                format!("permissions: {e}"),
                "profiles are read, edit and full; classes are read, edit, shell, shell:<glob>, web, mcp:<server>",
            )
        })
    }

    /// `mcp_servers`: by name, `{command, args, env}` or `{url, headers}`.
    pub(super) fn mcp_servers(
        &self,
        n: &Node,
        path: &[Step],
    ) -> Result<BTreeMap<String, McpServer>, SpecError> {
        let example =
            "write e.g. mcp_servers: { tracker: { command: tracker-mcp, args: [--stdio] } }";
        let Node::Map(entries) = n else {
            return Err(self.err(
                path,
                format!(
                    "mcp_servers must be a mapping of server names to servers, found {}",
                    n.kind()
                ),
                example,
            ));
        };
        let mut out = BTreeMap::new();
        for (i, (k, v)) in entries.iter().enumerate() {
            let name = k.as_str().unwrap_or_default().to_owned();
            let vp = with(path, Step::Entry(i));
            let server = match v.entry("url") {
                Some(_) => {
                    McpServer::Http(extract(self.text, &vp).map_err(|e| self.typed_error(&e, &vp))?)
                }
                None if matches!(v, Node::Map(_)) => McpServer::Stdio(
                    extract(self.text, &vp).map_err(|e| self.typed_error(&e, &vp))?,
                ),
                None => {
                    return Err(self.err(
                        &vp,
                        format!("the server {name} must be a mapping, found {}", v.kind()),
                        example,
                    ));
                }
            };
            McpServer::validate(&name, &server)
                .map_err(|e| self.err(&with(path, Step::Key(i)), e, example))?;
            out.insert(name, server);
        }
        Ok(out)
    }

    /// Literal text, or a single line ending in .md/.txt: a file next to the YAML.
    pub(super) fn system_prompt(
        &self,
        n: &Node,
        path: &[Step],
        scope: &KnownNames,
    ) -> Result<String, SpecError> {
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
                        "the system prompt file {} is larger than 64 KiB (the limit of a system prompt)",
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

    pub(super) fn env(
        &self,
        n: &Node,
        path: &[Step],
    ) -> Result<BTreeMap<String, String>, SpecError> {
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

    pub(super) fn mock(
        &self,
        n: &Node,
        path: &[Step],
        scope: &KnownNames,
    ) -> Result<Vec<MockRule>, SpecError> {
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
            return Err(self.err(&at, m, "see the mock rule fields: when, sleep, send, to, doc_append, vote, propose, resource, task, fail, times, reply"));
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

    pub(super) fn check_texts(
        &self,
        n: &Node,
        path: &[Step],
        scope: &KnownNames,
    ) -> Result<(), SpecError> {
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
}
