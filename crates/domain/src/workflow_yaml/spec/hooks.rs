//! `hooks:`: events from outside that post into the instance the workflow starts
//! (see [`crate::hooks`]), by name:
//!
//! ```yaml
//! hooks:
//!   github:
//!     secret: ${{ env.GITHUB_HOOK_SECRET }}
//!     to: reviewer
//!     params: { pr: $.pull_request.number }
//! ```

use super::*;
use crate::hooks::{self as hk, Param};

const HOOK_KEYS: &[&str] = &["secret", "to", "params", "rate"];
/// The most hooks one workflow declares.
const MAX_HOOKS: usize = 16;

/// A hook as a workflow declares it; its `secret` is raw (interpolated, and its
/// length checked, when the instance starts).
#[derive(Clone, PartialEq)]
pub struct HookDecl {
    pub name: String,
    pub secret: String,
    /// The agent its posts address.
    pub to: Option<String>,
    pub params: BTreeMap<String, Param>,
    pub rate: Option<u32>,
}

impl HookDecl {
    /// This hook with its secret interpolated (`${{ env.X }}`) and checked.
    pub fn with_secret(&self, vars: &crate::workflow_yaml::Vars) -> Result<HookDecl, String> {
        let at = |e: String| format!("hooks.{}.secret: {e}", self.name);
        if let Some(var) = hk::unscrubbed_vars(&self.secret).first() {
            return Err(at(format!(
                "env.{var}: a hook's secret comes from a variable whose name ends in {suffix} \
                 (rename it, e.g. {var}{suffix}): no worker inherits those, so no agent reads it",
                suffix = hk::SECRET_VAR_SUFFIX
            )));
        }
        let secret =
            crate::workflow_yaml::interpolate(&self.secret, vars).map_err(|e| at(e.to_string()))?;
        let (min, max) = hk::SECRET_CHARS;
        let n = secret.chars().count();
        if n < min || n > max {
            return Err(at(format!("{min} to {max} characters, got {n}")));
        }
        Ok(HookDecl {
            secret,
            ..self.clone()
        })
    }
}

impl Doc<'_> {
    /// `hooks:`, each checked; `to` must be one of `agents`.
    pub(super) fn hooks(
        &self,
        n: &Node,
        path: &[Step],
        agents: &[&str],
    ) -> Result<Vec<HookDecl>, SpecError> {
        let Node::Map(entries) = n else {
            return Err(self.err(
                path,
                format!("hooks must be a mapping of names, found {}", n.kind()),
                "write hooks: { github: { secret: \"${{ env.GITHUB_HOOK_SECRET }}\", to: reviewer } }",
            ));
        };
        if entries.len() > MAX_HOOKS {
            return Err(self.err(
                path,
                format!("{} hooks; at most {MAX_HOOKS}", entries.len()),
                "declare the others with hook_set",
            ));
        }
        let mut out = Vec::new();
        for (i, (k, v)) in entries.iter().enumerate() {
            let name = k.as_str().unwrap_or_default();
            let at = with(path, Step::Entry(i));
            hk::check_name(name)
                .map_err(|e| self.err(&with(path, Step::Key(i)), e.to_string(), "rename it"))?;
            out.push(self.hook(name, v, &at, agents)?);
        }
        Ok(out)
    }

    fn hook(
        &self,
        name: &str,
        n: &Node,
        path: &[Step],
        agents: &[&str],
    ) -> Result<HookDecl, SpecError> {
        self.mapping(n, path, HOOK_KEYS, "a hook")?;
        let get = |k: &str| n.entry(k).map(|(i, v)| (with(path, Step::Entry(i)), v));
        let Some((sp, secret)) = get("secret") else {
            return Err(self.err(
                path,
                format!("hook {name} has no `secret`"),
                "add secret: \"${{ env.GITHUB_HOOK_SECRET }}\" (from the environment, not the file)",
            ));
        };
        let secret = self
            .text(secret, &sp, "${{ env.GITHUB_HOOK_SECRET }}")?
            .to_owned();
        let to = match get("to") {
            None | Some((_, Node::Null)) => None,
            Some((tp, t)) => {
                let t = self.text(t, &tp, "reviewer")?.trim_start_matches('@');
                if !agents.contains(&t) {
                    return Err(self.err(
                        &tp,
                        format!(
                            "`to: {t}` is not an agent of this workflow{}",
                            did_you_mean(t, agents)
                        ),
                        format!("use one of: {}", agents.join(", ")),
                    ));
                }
                Some(t.to_owned())
            }
        };
        let mut params = BTreeMap::new();
        if let Some((pp, p)) = get("params") {
            let entries = match p {
                Node::Map(e) => e,
                _ => {
                    return Err(self.err(
                        &pp,
                        "params must be a mapping",
                        "write params: { pr: $.pull_request.number }",
                    ));
                }
            };
            for (j, (pk, pv)) in entries.iter().enumerate() {
                let at = with(&pp, Step::Entry(j));
                let v = self.text(pv, &at, "$.pull_request.number")?;
                params.insert(pk.as_str().unwrap_or_default().to_owned(), Param::parse(v));
            }
        }
        let rate = match get("rate") {
            None => None,
            Some((rp, Node::Int(r))) if (1..=i128::from(hk::MAX_RATE)).contains(r) => {
                let _ = rp;
                Some(u32::try_from(*r).unwrap_or(hk::DEFAULT_RATE))
            }
            Some((rp, _)) => {
                return Err(self.err(
                    &rp,
                    format!("rate is requests a minute, 1 to {}", hk::MAX_RATE),
                    "write rate: 60",
                ));
            }
        };
        Ok(HookDecl {
            name: name.to_owned(),
            secret,
            to,
            params,
            rate,
        })
    }
}

/// Its secret is never printed, not even in a log.
impl std::fmt::Debug for HookDecl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookDecl")
            .field("name", &self.name)
            .field("secret", &"<set>")
            .finish_non_exhaustive()
    }
}
