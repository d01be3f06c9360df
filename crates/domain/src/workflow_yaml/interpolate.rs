//! `${{ name }}` interpolation.
//!
//! One scanner ([`expressions`]) serves both the validator (which checks every
//! name when the YAML is read, with the position of its `${{`) and the runtime
//! ([`interpolate`]), so that what passed validation resolves the same way.
//! Names: setup outputs (bare `diff`), `params.X`, `env.X`, `workflow.name`,
//! `workflow.tag`, `source.dir`. An unknown name is an error, never left in the
//! text. There is no escape: `$${{` is not special.

use std::collections::BTreeMap;
use std::path::Path;

/// The names that are always available (besides `env.X`).
pub(crate) const BUILTINS: &[&str] = &["workflow.name", "workflow.tag", "source.dir"];

/// Prefixes that setup outputs (`as`) may not take as their name.
pub(crate) const RESERVED_OUTPUTS: &[&str] = &[
    "env", "workflow", "params", "source", "trigger", "previous", "steps",
];

/// One `${{ ... }}` in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expr<'a> {
    /// Byte offset of its `${{`.
    pub start: usize,
    /// Byte offset just past its `}}`.
    pub end: usize,
    pub name: &'a str,
}

/// A `${{` that is not a well-formed `${{ name }}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadExpr {
    pub start: usize,
    pub message: String,
}

/// Every `${{ name }}` of `text`, in order; stops at the first malformed one.
pub(crate) fn expressions(text: &str) -> Result<Vec<Expr<'_>>, BadExpr> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("${{") {
        let start = from + i;
        let inner_start = start + 3;
        let Some(close) = text[inner_start..].find("}}") else {
            return Err(BadExpr {
                start,
                message: "`${{` is not closed with `}}`".into(),
            });
        };
        let inner = &text[inner_start..inner_start + close];
        let name = inner.trim();
        if !is_name(name) {
            let shown: String = name.chars().take(60).collect();
            return Err(BadExpr {
                start,
                message: format!(
                    "`${{{{ {shown} }}}}` is not a name: only names such as `${{{{ params.pr }}}}` or \
                     `${{{{ diff }}}}` can be interpolated (no expressions)"
                ),
            });
        }
        let end = inner_start + close + 2;
        out.push(Expr { start, end, name });
        from = end;
    }
    Ok(out)
}

/// `ident` or `ident.segment`, where a segment may also hold `-`.
fn is_name(s: &str) -> bool {
    let (head, tail) = match s.split_once('.') {
        Some((h, t)) => (h, Some(t)),
        None => (s, None),
    };
    is_identifier(head)
        && tail.is_none_or(|t| {
            !t.is_empty()
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_identifier(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What names exist, for validation (before anything has a value) and for the
/// runtime's error messages.
pub(crate) struct KnownNames<'a> {
    pub outputs: Vec<&'a str>,
    pub params: Vec<&'a str>,
    /// In a step's prompt: the step ids, for `${{ steps.<id> }}` (and
    /// `${{ trigger }}`, `${{ previous.output }}`); None elsewhere.
    pub steps: Option<Vec<&'a str>>,
}

impl KnownNames<'_> {
    /// Whether `name` can resolve; the error says what is available.
    pub(crate) fn check(&self, name: &str) -> Result<(), String> {
        if let Some(ids) = &self.steps {
            if name == "trigger" || name == "previous.output" {
                return Ok(());
            }
            if let Some(id) = name.strip_prefix("steps.") {
                return if ids.contains(&id) {
                    Ok(())
                } else {
                    Err(format!(
                        "`${{{{ {name} }}}}`: no step has the id {id:?}{}; step ids: {}",
                        super::suggest::did_you_mean(id, ids),
                        ids.join(", ")
                    ))
                };
            }
        }
        let known = if let Some(p) = name.strip_prefix("params.") {
            self.params.contains(&p)
        } else if let Some(v) = name.strip_prefix("env.") {
            is_identifier(v)
        } else if name.contains('.') {
            BUILTINS.contains(&name)
        } else {
            self.outputs.contains(&name)
        };
        if known {
            return Ok(());
        }
        let hint = if let Some(p) = name.strip_prefix("params.") {
            let mut h = format!(" (no parameter {p:?} is declared under `params:`");
            h += &super::suggest::did_you_mean(p, &self.params);
            h + ")"
        } else if name.starts_with("env.") {
            " (environment variable names are letters, digits and _)".into()
        } else if !name.contains('.') && self.params.contains(&name) {
            format!(" (a parameter is written `params.{name}`)")
        } else {
            let mut all: Vec<&str> = self.outputs.clone();
            all.extend_from_slice(BUILTINS);
            super::suggest::did_you_mean(name, &all)
        };
        Err(format!(
            "unknown name `{name}` in `${{{{ {name} }}}}`{hint}; available: {}",
            self.available()
        ))
    }

    pub(crate) fn available(&self) -> String {
        let mut all: Vec<String> = self.outputs.iter().map(|s| s.to_string()).collect();
        all.extend(self.params.iter().map(|p| format!("params.{p}")));
        all.push("env.NAME".into());
        all.extend(BUILTINS.iter().map(|s| s.to_string()));
        if let Some(ids) = &self.steps {
            all.extend(["trigger".to_owned(), "previous.output".to_owned()]);
            all.extend(ids.iter().map(|id| format!("steps.{id}")));
        }
        all.join(", ")
    }
}

/// The values `${{ }}` can take in one workflow run.
#[derive(Debug, Clone)]
pub struct Vars {
    workflow_name: String,
    tag: String,
    source_dir: String,
    params: BTreeMap<String, String>,
    outputs: BTreeMap<String, String>,
    /// The params came from outside (a hook's payload), not from the lead: see
    /// [`interpolate_shell`] and [`Vars::confined`].
    outside: bool,
}

impl Vars {
    pub fn new(
        workflow_name: &str,
        tag: &str,
        source_dir: &Path,
        params: BTreeMap<String, String>,
    ) -> Self {
        Self {
            workflow_name: workflow_name.to_owned(),
            tag: tag.to_owned(),
            source_dir: source_dir.display().to_string(),
            params,
            outputs: BTreeMap::new(),
            outside: false,
        }
    }

    /// These values with the params marked as from outside (`yes`) or not.
    pub fn from_outside(mut self, yes: bool) -> Self {
        self.outside = yes;
        self
    }

    /// Refuses a path filled in from outside params that is absolute or climbs
    /// (`..`): a payload does not choose where an agent works.
    pub fn confined(&self, field: &str, filled: &str) -> Result<(), String> {
        let p = Path::new(filled);
        let climbs = p
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir));
        if self.outside && (p.is_absolute() || climbs) {
            return Err(format!(
                "{field}: {filled:?} is absolute or holds `..` once filled in from a hook's payload; \
                 a workflow a hook starts keeps its agents' folders under its own"
            ));
        }
        Ok(())
    }

    /// A setup step's output, under its `as`.
    pub fn set_output(&mut self, name: &str, value: String) {
        self.outputs.insert(name.to_owned(), value);
    }

    /// The values as the store keeps them for a step workflow, whose prompts are
    /// filled in when each step runs.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.workflow_name,
            "tag": self.tag,
            "source_dir": self.source_dir,
            "params": self.params,
            "outputs": self.outputs,
            "outside": self.outside,
        })
    }

    /// [`to_json`](Self::to_json) read back (None: not what it wrote).
    pub fn from_json(v: &serde_json::Value) -> Option<Self> {
        let map = |k: &str| -> Option<BTreeMap<String, String>> {
            serde_json::from_value(v.get(k)?.clone()).ok()
        };
        Some(Self {
            workflow_name: v.get("name")?.as_str()?.to_owned(),
            tag: v.get("tag")?.as_str()?.to_owned(),
            source_dir: v.get("source_dir")?.as_str()?.to_owned(),
            params: map("params")?,
            outputs: map("outputs")?,
            outside: v.get("outside").and_then(|o| o.as_bool()).unwrap_or(false),
        })
    }

    /// A setup step's output, if it ran.
    pub fn output(&self, name: &str) -> Option<&str> {
        self.outputs.get(name).map(String::as_str)
    }

    fn resolve(&self, name: &str) -> Result<String, String> {
        let found = if let Some(p) = name.strip_prefix("params.") {
            self.params.get(p).cloned()
        } else if let Some(v) = name.strip_prefix("env.") {
            return match std::env::var(v) {
                Ok(s) => Ok(s),
                Err(std::env::VarError::NotPresent) => Err(format!(
                    "`${{{{ {name} }}}}`: the environment variable {v} is not set; set it before \
                     starting the kernel, or pass the value as a param"
                )),
                Err(std::env::VarError::NotUnicode(_)) => Err(format!(
                    "`${{{{ {name} }}}}`: the environment variable {v} is not valid UTF-8"
                )),
            };
        } else {
            match name {
                "workflow.name" => Some(self.workflow_name.clone()),
                "workflow.tag" => Some(self.tag.clone()),
                "source.dir" => Some(self.source_dir.clone()),
                _ => self.outputs.get(name).cloned(),
            }
        };
        found.ok_or_else(|| {
            let scope = KnownNames {
                outputs: self.outputs.keys().map(String::as_str).collect(),
                params: self.params.keys().map(String::as_str).collect(),
                steps: None,
            };
            match scope.check(name) {
                Err(e) => e,
                Ok(()) => format!("`${{{{ {name} }}}}` has no value yet"),
            }
        })
    }
}

/// Replaces every `${{ name }}` of `text`; an unknown or malformed one is an error.
pub fn interpolate(text: &str, vars: &Vars) -> Result<String, String> {
    let exprs = expressions(text).map_err(|b| b.message)?;
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for e in exprs {
        out.push_str(&text[from..e.start]);
        out.push_str(&vars.resolve(e.name)?);
        from = e.end;
    }
    out.push_str(&text[from..]);
    Ok(out)
}

/// Characters a param from outside may hold to be put in a shell command: none a
/// shell reads (quotes, `$`, `;`, spaces, backquotes...), so it is safe quoted or
/// not. It may not begin with `-` (an option).
const SHELL_SAFE: &str = "._-/+:@,=%";

/// [`interpolate`] for a shell command: a param from outside (a hook's payload)
/// holding anything but letters, digits and `._-/+:@,=%` (or beginning with `-`)
/// refuses the command instead of running what the payload wrote.
pub fn interpolate_shell(text: &str, vars: &Vars) -> Result<String, String> {
    if vars.outside {
        for e in expressions(text).map_err(|b| b.message)? {
            let Some(p) = e.name.strip_prefix("params.") else {
                continue;
            };
            let v = vars.resolve(e.name)?;
            let safe = v
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || SHELL_SAFE.contains(c));
            if !safe || v.starts_with('-') {
                return Err(format!(
                    "params.{p} came from a hook's payload and holds characters a shell reads \
                     (only letters, digits and {SHELL_SAFE} are put in a command, not first `-`)"
                ));
            }
        }
    }
    interpolate(text, vars)
}

/// Replaces every `${{ name }}` of `text` but those `keep` says to leave for
/// later (a step's prompt: its step names get their values when it runs).
pub fn interpolate_except(
    text: &str,
    vars: &Vars,
    keep: impl Fn(&str) -> bool,
) -> Result<String, String> {
    let exprs = expressions(text).map_err(|b| b.message)?;
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for e in exprs {
        out.push_str(&text[from..e.start]);
        if keep(e.name) {
            out.push_str(&text[e.start..e.end]);
        } else {
            out.push_str(&vars.resolve(e.name)?);
        }
        from = e.end;
    }
    out.push_str(&text[from..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        let mut v = Vars::new(
            "review",
            "pr-1",
            Path::new("/src"),
            BTreeMap::from([("pr".to_owned(), "42".to_owned())]),
        );
        v.set_output("diff", "+ a line".into());
        v
    }

    #[test]
    fn names_with_or_without_spaces() {
        let v = vars();
        assert_eq!(
            interpolate("${{diff}} | ${{ params.pr }} | ${{   workflow.name }}:${{workflow.tag}} in ${{ source.dir }}", &v)
                .unwrap(),
            "+ a line | 42 | review:pr-1 in /src"
        );
        assert_eq!(
            interpolate("no braces ${ x } {{ y }}", &v).unwrap(),
            "no braces ${ x } {{ y }}"
        );
        assert_eq!(interpolate("$${{ diff }}", &v).unwrap(), "$+ a line");
    }

    #[test]
    fn unknown_names_are_errors_listing_what_exists() {
        let v = vars();
        let e = interpolate("x ${{ dif }}", &v).unwrap_err();
        assert!(
            e.contains("unknown name `dif`") && e.contains("did you mean \"diff\""),
            "{e}"
        );
        assert!(e.contains("params.pr") && e.contains("workflow.tag"), "{e}");
        let e = interpolate("${{ params.nope }}", &v).unwrap_err();
        assert!(e.contains("params.nope") && e.contains("available"), "{e}");
        let e = interpolate("${{ pr }}", &v).unwrap_err();
        assert!(e.contains("params.pr"), "{e}");
        assert!(
            interpolate("${{ diff ", &v)
                .unwrap_err()
                .contains("not closed")
        );
        assert!(
            interpolate("${{ a || b }}", &v)
                .unwrap_err()
                .contains("not a name")
        );
        assert!(
            interpolate("${{ }}", &v)
                .unwrap_err()
                .contains("not a name")
        );
    }

    #[test]
    fn environment_variables() {
        let v = vars();
        // PATH is set for every test process; a name this odd is not.
        let path = std::env::var("PATH").unwrap();
        assert_eq!(interpolate("${{ env.PATH }}", &v).unwrap(), path);
        let e = interpolate("${{ env.AW_TEST_SURELY_UNSET_1729 }}", &v).unwrap_err();
        assert!(e.contains("AW_TEST_SURELY_UNSET_1729 is not set"), "{e}");
    }
}
