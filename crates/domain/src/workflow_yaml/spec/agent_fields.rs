//! An agent's keys that take more than a line to read: its backend, folder,
//! schedule, limits and powers (permissions and own MCP servers).

use super::agent::{DEFAULT_BACKEND_ENV, key_of};
use super::*;
use crate::permissions::{self, Permissions};
use crate::placement::{self, Placement};
use crate::protocol::McpServer;
use crate::workspace::{self, Workspace};

/// One agent's mapping, with the path of each of its keys.
pub(super) struct Fields<'a> {
    pub(super) node: &'a Node,
    pub(super) path: &'a [Step],
}

impl<'a> Fields<'a> {
    /// A key's value and its path.
    pub(super) fn get(&self, k: &str) -> Option<(Vec<Step>, &'a Node)> {
        self.node
            .entry(k)
            .map(|(i, v)| (with(self.path, Step::Entry(i)), v))
    }

    /// A key's value and its path, unless it is absent or null.
    pub(super) fn set(&self, k: &str) -> Option<(Vec<Step>, &'a Node)> {
        self.get(k).filter(|(_, v)| **v != Node::Null)
    }
}

impl Doc<'_> {
    /// Keys of the original's agents that this one refuses, with what to write instead.
    pub(super) fn refuse_unsupported(
        &self,
        name: &str,
        n: &Node,
        path: &[Step],
    ) -> Result<(), SpecError> {
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
        Ok(())
    }

    /// The agent's backend: named, else (or `default`) the kernel's default backend.
    pub(super) fn agent_backend(&self, f: &Fields, key: &[Step]) -> Result<String, SpecError> {
        let get = |k: &str| f.get(k);
        // No backend, or `default`: the kernel's default backend (seed 004).
        let backend = match get("backend") {
            None | Some((_, Node::Null)) => self.default_backend(key)?,
            Some((bp, bn)) => {
                let b = self.text(bn, &bp, "claude")?;
                match b {
                    "default" => self.default_backend(&bp)?,
                    b if BACKENDS.contains(&b) => b.to_owned(),
                    b => {
                        return Err(self.err(
                            &bp,
                            format!("unknown backend `{b}`{}", did_you_mean(b, BACKENDS)),
                            format!(
                                "use one of: {} (or default: {DEFAULT_BACKEND_ENV}, else sdk)",
                                BACKENDS.join(", ")
                            ),
                        ));
                    }
                }
            }
        };
        Ok(backend)
    }

    /// The agent's folder: a path (relative to the YAML's folder), never `${{ }}`.
    pub(super) fn agent_cwd(
        &self,
        f: &Fields,
        scope: &KnownNames,
    ) -> Result<Option<PathBuf>, SpecError> {
        let Some((cp, cn)) = f.set("cwd") else {
            return Ok(None);
        };
        let raw = self.non_empty_text(cn, &cp, "../project")?;
        if raw.contains("${{") {
            // A param or a setup step's output names it: filled in when the run
            // starts, then taken relative to the YAML's folder.
            self.check_refs(raw, &cp, scope)?;
            return Ok(Some(PathBuf::from(raw.trim())));
        }
        Ok(Some(self.path(raw, &cp)?))
    }

    /// `skills`: folders holding a SKILL.md each (relative to the YAML's folder),
    /// read and checked now, so a mistake points at its line.
    pub(super) fn agent_skills(&self, f: &Fields) -> Result<Vec<PathBuf>, SpecError> {
        let Some((sp, sn)) = f.set("skills") else {
            return Ok(Vec::new());
        };
        let Node::Seq(items) = sn else {
            return Err(self.err(
                &sp,
                "skills must be a list of folders",
                "write skills: [./skills/review-checklist]",
            ));
        };
        let mut dirs = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let ip = with(&sp, Step::Item(i));
            let raw = self.non_empty_text(item, &ip, "./skills/review-checklist")?;
            dirs.push(self.path(raw, &ip)?);
        }
        if let Err(e) = crate::skills::load_all(&dirs) {
            return Err(self.err(
                &sp,
                e,
                "each skill is a folder holding SKILL.md with a frontmatter of name and description",
            ));
        }
        Ok(dirs)
    }

    /// `workspace`: `shared`, `worktree` or `{mode, repo, base, branch}` (as
    /// agent_new); a relative `repo` is the YAML's folder's.
    pub(super) fn agent_workspace(&self, f: &Fields) -> Result<Workspace, SpecError> {
        let Some((wp, _)) = f.set("workspace") else {
            return Ok(Workspace::Shared);
        };
        let value: serde_json::Value = crate::workflow_yaml::locate::extract(self.text, &wp)
            .map_err(|e| self.typed_error(&e, &wp))?;
        let mut ws = workspace::parse(&value).map_err(|e| {
            self.err(
                &wp,
                e,
                "write workspace: worktree, or workspace: { repo: ., base: main, branch: feat/x }",
            )
        })?;
        if let Workspace::Worktree(w) = &mut ws
            && let Some(repo) = w.repo.take()
        {
            w.repo = Some(self.path(&repo.to_string_lossy(), &wp)?);
        }
        Ok(ws)
    }

    /// `node`: a node's name, or `{labels: [..]}`.
    pub(super) fn agent_node(&self, f: &Fields) -> Result<Option<Placement>, SpecError> {
        let Some((np, _)) = f.set("node") else {
            return Ok(None);
        };
        let value: serde_json::Value = crate::workflow_yaml::locate::extract(self.text, &np)
            .map_err(|e| self.typed_error(&e, &np))?;
        placement::parse(&value)
            .map(Some)
            .map_err(|e| self.err(&np, e, "write node: build-1, or node: { labels: [gpu] }"))
    }

    /// `wakeup` (or the seed's `schedule`) and the prompt of the scheduled runs.
    pub(super) fn agent_wakeup(
        &self,
        f: &Fields,
        scope: &KnownNames,
    ) -> Result<(Option<String>, Option<String>), SpecError> {
        let (set, path) = (|k: &str| f.set(k), f.path);
        // `schedule` is the seed's name for the same thing.
        if let (Some(_), Some((sp, _))) = (set("wakeup"), set("schedule")) {
            return Err(self.err(
                &key_of(path, &sp),
                "both wakeup and schedule are given: they are the same setting",
                "keep one of them",
            ));
        }
        let wakeup = match set("wakeup").or_else(|| set("schedule")) {
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
                    return Err(self.err(
                        &key_of(path, &pp),
                        "wakeup_prompt needs wakeup: it is the prompt of the scheduled runs",
                        "add `wakeup:` (e.g. wakeup: 30m) or remove wakeup_prompt",
                    ));
                }
                self.check_refs(p, &pp, scope)?;
                Some(p.to_owned())
            }
        };
        Ok((wakeup, wakeup_prompt))
    }

    /// `max_steps` and `timeout`; `max_tokens` is checked and not kept.
    pub(super) fn agent_limits(
        &self,
        f: &Fields,
    ) -> Result<(Option<u32>, Option<Duration>), SpecError> {
        let set = |k: &str| f.set(k);
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
        Ok((max_steps, timeout))
    }

    /// The agent's permissions and own MCP servers, checked against its backend.
    pub(super) fn agent_powers(
        &self,
        f: &Fields,
        backend: &str,
        key: &[Step],
    ) -> Result<(Permissions, BTreeMap<String, McpServer>), SpecError> {
        let (set, path) = (|k: &str| f.set(k), f.path);
        let permissions = match set("permissions") {
            None => Permissions::default(),
            Some((pp, pn)) => self.permissions(pn, &pp)?,
        };
        let mcp_servers = match set("mcp_servers") {
            None => BTreeMap::new(),
            Some((mp, mn)) => self.mcp_servers(mn, &mp)?,
        };
        let names: Vec<&str> = mcp_servers.keys().map(String::as_str).collect();
        if let Err(e) = permissions::backends::check_agent(backend, &permissions, &names) {
            let at = set("permissions")
                .or_else(|| set("mcp_servers"))
                .map(|(p, _)| key_of(path, &p))
                .unwrap_or_else(|| key.to_vec());
            return Err(self.err(
                &at,
                e,
                "backend_list shows what each backend can hold (the Permissions chapter of the docs too)",
            ));
        }
        Ok((permissions, mcp_servers))
    }
}
