//! Positions and typed values: how a path in the tree becomes an error with its
//! line and column, and the readers of scalars, durations, paths and budgets that
//! every part of the format shares.

use super::*;

impl Doc<'_> {
    // ---- errors and positions -------------------------------------------------

    pub(super) fn node_at(&self, path: &[Step]) -> Option<&Node> {
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
    pub(super) fn pos(&self, path: &[Step]) -> Pos {
        let mut path = path.to_vec();
        if let (Some(Node::Null), Some(Step::Entry(i))) = (self.node_at(&path), path.last()) {
            let i = *i;
            path.pop();
            path.push(Step::Key(i));
        }
        locate(self.text, &path).unwrap_or(Pos::START)
    }

    /// `agents.alice.mock[0].send`.
    pub(super) fn field(&self, path: &[Step]) -> String {
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

    pub(super) fn err(
        &self,
        path: &[Step],
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> SpecError {
        self.err_at(self.pos(path), self.field(path), message, fix)
    }

    pub(super) fn err_at(
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
    pub(super) fn typed_error(&self, e: &serde_norway::Error, path: &[Step]) -> SpecError {
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
    pub(super) fn expr_pos(&self, path: &[Step], value: &str, start: usize) -> Pos {
        let scalar = self.pos(path);
        let k = value.get(..start).map_or(0, |s| s.matches("${{").count());
        nth_expression(self.text, scalar, k).unwrap_or(scalar)
    }

    /// Every `${{ name }}` in the scalar at `path` must be able to resolve.
    pub(super) fn check_refs(
        &self,
        value: &str,
        path: &[Step],
        scope: &KnownNames,
    ) -> Result<(), SpecError> {
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
    pub(super) fn check_tree(&self, n: &Node, path: &mut Vec<Step>) -> Result<(), SpecError> {
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
    pub(super) fn mapping<'n>(
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

    pub(super) fn text<'n>(
        &self,
        n: &'n Node,
        path: &[Step],
        example: &str,
    ) -> Result<&'n str, SpecError> {
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

    pub(super) fn non_empty_text<'n>(
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

    pub(super) fn boolean(&self, n: &Node, path: &[Step]) -> Result<bool, SpecError> {
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
    pub(super) fn duration(&self, n: &Node, path: &[Step]) -> Result<Duration, SpecError> {
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
    pub(super) fn path(&self, raw: &str, path: &[Step]) -> Result<PathBuf, SpecError> {
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
    pub(super) fn budget(&self, n: &Node, path: &[Step]) -> Result<Option<Budget>, SpecError> {
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

    /// An agent's `delegate: {agents, depth, backends, budget}` (as agent_new),
    /// within its own `budget`.
    pub(super) fn delegate(
        &self,
        n: &Node,
        path: &[Step],
        own: Option<&Budget>,
    ) -> Result<Option<crate::delegate::Delegate>, SpecError> {
        if *n == Node::Null {
            return Ok(None);
        }
        let d: crate::delegate::Delegate =
            extract(self.text, path).map_err(|e| self.typed_error(&e, path))?;
        if let Err(m) = d.check().and_then(|()| d.check_within(own)) {
            return Err(self.err(
                path,
                m,
                "write e.g. delegate: { agents: 2, depth: 1, backends: [sdk, mock], budget: { max_tokens: 200000 } }",
            ));
        }
        Ok(Some(d))
    }
}
