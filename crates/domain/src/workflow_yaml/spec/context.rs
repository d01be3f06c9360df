//! `context`: the workflow's documents (provider, folder, owner), in either
//! form the format accepts.

use super::*;

/// A documents folder as written, with where it was written.
type Folder<'n> = (Vec<Step>, &'n str);

impl Doc<'_> {
    /// `context:` in either form: DESIGN (`documents`, `dir`, `document_owner`) or
    /// the original (`provider`, `config: {dir | bind}`, `documentOwner`).
    pub(super) fn context(
        &self,
        n: &Node,
        path: &[Step],
        agents: &[&str],
    ) -> Result<ContextDef, SpecError> {
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
        let mut dir: Option<Folder> = None;

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
        if let Some((_, dp, dn)) = get("documents") {
            let (provider, folder) = self.context_documents(dn, &dp)?;
            out.documents = provider;
            dir = folder;
        }
        if let Some((_, pp, pn)) = get("provider").filter(|(_, _, v)| **v != Node::Null) {
            out.documents = Some(self.document_provider(self.text(pn, &pp, "file")?, &pp, true)?);
        }
        let pending = self.context_folders(n, path)?;
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

    /// A document provider's name in either form (`memory` is the original's name
    /// for the database provider, kept as `sqlite`).
    fn document_provider(&self, s: &str, p: &[Step], original: bool) -> Result<String, SpecError> {
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
    }

    /// `documents:` as a provider's name or as `{provider, dir}`: the provider and
    /// the folder, if given.
    fn context_documents<'n>(
        &self,
        dn: &'n Node,
        dp: &[Step],
    ) -> Result<(Option<String>, Option<Folder<'n>>), SpecError> {
        let (mut provider, mut folder) = (None, None);
        match dn {
            Node::Null => {}
            Node::Map(_) => {
                self.mapping(dn, dp, &["provider", "dir"], "context.documents")?;
                if let Some((i, pn)) = dn.entry("provider").filter(|(_, v)| **v != Node::Null) {
                    let pp = with(dp, Step::Entry(i));
                    provider =
                        Some(self.document_provider(self.text(pn, &pp, "file")?, &pp, false)?);
                }
                if let Some((i, d)) = dn.entry("dir").filter(|(_, v)| **v != Node::Null) {
                    let p = with(dp, Step::Entry(i));
                    folder = Some((p.clone(), self.non_empty_text(d, &p, "./docs")?));
                }
            }
            _ => provider = Some(self.document_provider(self.text(dn, dp, "file")?, dp, false)?),
        }
        Ok((provider, folder))
    }

    /// The documents folder as the original form gives it: `dir`, or `config: {dir
    /// | bind}` (at most one of those two).
    fn context_folders<'n>(
        &self,
        n: &'n Node,
        path: &[Step],
    ) -> Result<Vec<(Vec<Step>, &'n Node)>, SpecError> {
        let mut pending: Vec<(Vec<Step>, &Node)> = Vec::new();
        if let Some((_, p, d)) = n
            .entry("dir")
            .filter(|(_, v)| **v != Node::Null)
            .map(|(i, v)| (i, with(path, Step::Entry(i)), v))
        {
            pending.push((p, d));
        }
        if let Some((_, cp, cn)) = n
            .entry("config")
            .filter(|(_, v)| **v != Node::Null)
            .map(|(i, v)| (i, with(path, Step::Entry(i)), v))
        {
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
        Ok(pending)
    }

    /// The folder, with `${{ workflow.name }}` / `${{ workflow.tag }}` kept (in one
    /// spelling) for the kernel to fill in; nothing else can be known this early.
    pub(super) fn context_dir(&self, raw: &str, path: &[Step]) -> Result<PathBuf, SpecError> {
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
