//! `params` and `setup`: the workflow's inputs and the shell steps that run
//! before its agents.

use super::*;

impl Doc<'_> {
    pub(super) fn params(&self, n: &Node, path: &[Step]) -> Result<Vec<ParamDef>, SpecError> {
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

    pub(super) fn param_default(
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

    pub(super) fn setup(
        &self,
        n: &Node,
        path: &[Step],
        params: &[&str],
    ) -> Result<Vec<SetupStep>, SpecError> {
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
            let scope = KnownNames {
                outputs: out.iter().filter_map(|s| s.as_name.as_deref()).collect(),
                params: params.to_vec(),
                steps: None,
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
}
