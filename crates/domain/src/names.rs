//! Names and targets: the one place that says what a valid name is and how
//! `alice@review:pr-1` is read.
//!
//! Target syntax (compatible with the original): `alice` = `alice@global:main`,
//! `alice@review` = `alice@review:main`, `alice@review:pr-1`, and `@review:pr-1`
//! for a workflow instance.

use crate::error::{Error, Result};
use std::fmt;

pub const GLOBAL_WORKFLOW: &str = "global";
pub const DEFAULT_TAG: &str = "main";
/// The lead's (human side) identity in channels.
pub const LEAD: &str = "user";
/// The sender of the kernel's own channel posts (proposal events).
pub const SYSTEM: &str = "system";
/// What a hook's posts are sent as, before its name (`hook:github`): no member
/// (a name cannot hold a colon), so it sees nothing and nobody's reading moves.
pub const HOOK_SENDER: &str = "hook:";
/// Names that cannot be agents: they mean something in mentions or senders.
pub const RESERVED: &[&str] = &[LEAD, "all", SYSTEM, "kernel"];
pub const MAX_NAME_LEN: usize = 64;

/// The organisation every instance runs within unless it names another: no
/// members, no contracts of its own.
pub const GLOBAL_ORG: &str = "global";
/// The instances that hold an organisation's channel and documents are
/// `@org.<name>`; no workflow or agent_new may take such a name.
pub const ORG_PREFIX: &str = "org.";

/// The instance holding organisation `name`'s channel and documents.
pub fn org_instance(name: &str) -> WorkflowRef {
    WorkflowRef {
        name: format!("{ORG_PREFIX}{}", name.to_ascii_lowercase()),
        tag: DEFAULT_TAG.into(),
    }
}

/// The longest organisation name: its instance's name is `org.` and it.
pub const MAX_ORG_NAME_LEN: usize = MAX_NAME_LEN - ORG_PREFIX.len();

/// An organisation's name as given (`review-team`, `@review-team`, `Review-Team`),
/// checked, in lower case; None for `@global`. The one rule, stated once: 1 to
/// [`MAX_ORG_NAME_LEN`] of A-Z a-z 0-9 _ - (no dots or colons), any letter case (a
/// name and its instance `@org.<name>` are read in lower case).
pub fn org_name(given: &str) -> Result<Option<String>> {
    let n = given.trim().trim_start_matches('@');
    if n.eq_ignore_ascii_case(GLOBAL_ORG) {
        return Ok(None);
    }
    let ok = !n.is_empty()
        && n.len() <= MAX_ORG_NAME_LEN
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if !ok {
        return Err(Error::invalid(format!(
            "invalid organisation name {n:?}: {ORG_NAME_RULE}, e.g. \"review-team\""
        )));
    }
    Ok(Some(n.to_ascii_lowercase()))
}

/// How an organisation's name is written, as every refusal says it.
pub const ORG_NAME_RULE: &str =
    "1 to 60 characters of A-Z a-z 0-9 _ - (no dots or colons), in any letter case";

/// Workflow names and tags: `[A-Za-z0-9._-]+`, at most 64 characters.
pub fn check_name(kind: &str, s: &str) -> Result<()> {
    if s.is_empty() || s.len() > MAX_NAME_LEN {
        return Err(Error::invalid(format!(
            "invalid {kind} {s:?}: must be 1..={MAX_NAME_LEN} characters of A-Z a-z 0-9 . _ -"
        )));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(Error::invalid(format!(
            "invalid {kind} {s:?}: character {c:?} is not allowed; use only A-Z a-z 0-9 . _ -"
        )));
    }
    // Names become directories (`workflows/<name>/<tag>/documents`): `.`, `..` and
    // hidden names would escape or hide them.
    if s.starts_with('.') {
        return Err(Error::invalid(format!(
            "invalid {kind} {s:?}: must not start with '.'"
        )));
    }
    Ok(())
}

/// Agent names are stricter than the general rule (`[A-Za-z][A-Za-z0-9_-]*`) so that
/// every agent can be @mentioned: the mention syntax has no dots and starts with a letter.
pub fn check_agent_name(s: &str) -> Result<()> {
    let ok = !s.is_empty()
        && s.len() <= MAX_NAME_LEN
        && s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if !ok {
        return Err(Error::invalid(format!(
            "invalid agent name {s:?}: start with a letter, then letters, digits, '_' or '-' \
             (at most {MAX_NAME_LEN}), so that @{s} can be mentioned; e.g. \"reviewer\" or \"coder-2\""
        )));
    }
    if RESERVED.contains(&s.to_ascii_lowercase().as_str()) {
        return Err(Error::invalid(format!(
            "agent name {s:?} is reserved ({}); choose another name",
            RESERVED.join(", ")
        )));
    }
    Ok(())
}

/// A workflow instance: `@name:tag`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkflowRef {
    pub name: String,
    pub tag: String,
}

impl WorkflowRef {
    pub fn global() -> Self {
        Self {
            name: GLOBAL_WORKFLOW.into(),
            tag: DEFAULT_TAG.into(),
        }
    }
    pub fn new(name: &str, tag: &str) -> Result<Self> {
        check_name("workflow name", name)?;
        check_name("tag", tag)?;
        // An organisation's instance is named in any letter case (`@ORG.Review-Team`),
        // as its organisation is; it is stored in lower case.
        let name = if name
            .get(..ORG_PREFIX.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(ORG_PREFIX))
        {
            name.to_ascii_lowercase()
        } else {
            name.to_owned()
        };
        Ok(Self {
            name,
            tag: tag.into(),
        })
    }
    /// Reads `@review:pr-1`, `review:pr-1`, `@review`, `review` (tag defaults to `main`).
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        let body = s.strip_prefix('@').unwrap_or(s);
        if body.is_empty() {
            return Err(Error::invalid(
                "empty workflow: write it as @name or @name:tag, e.g. @review:pr-1",
            ));
        }
        if body.contains('@') {
            return Err(Error::invalid(format!(
                "invalid workflow {s:?}: write it as @name or @name:tag (an agent target like \
                 alice@review:pr-1 is not a workflow)"
            )));
        }
        let (name, tag) = match body.split_once(':') {
            Some((n, t)) => (
                if n.is_empty() { GLOBAL_WORKFLOW } else { n },
                if t.is_empty() { DEFAULT_TAG } else { t },
            ),
            None => (body, DEFAULT_TAG),
        };
        Self::new(name, tag)
    }
    pub fn is_global(&self) -> bool {
        self.name == GLOBAL_WORKFLOW && self.tag == DEFAULT_TAG
    }
}

impl fmt::Display for WorkflowRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}:{}", self.name, self.tag)
    }
}

/// An agent in a workflow instance: `alice@review:pr-1`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AgentRef {
    pub name: String,
    pub workflow: WorkflowRef,
}

impl AgentRef {
    /// Reads `alice`, `alice@review`, `alice@review:pr-1`. A bare `@review:pr-1` is
    /// rejected here: it names a workflow, not an agent.
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        let (name, wf) = match s.split_once('@') {
            Some((n, w)) => (n, Some(w)),
            None => (s, None),
        };
        if name.is_empty() {
            return Err(Error::invalid(format!(
                "target {s:?} names a workflow, not an agent: write agent@workflow:tag, e.g. alice@review:pr-1"
            )));
        }
        check_agent_name(name).or_else(|e| {
            // Reserved names are still valid *targets* for lookups that will then fail as
            // not found; only the syntax matters here.
            if RESERVED.contains(&name.to_ascii_lowercase().as_str()) {
                Ok(())
            } else {
                Err(e)
            }
        })?;
        let workflow = match wf {
            Some(w) if !w.is_empty() => WorkflowRef::parse(w)?,
            _ => WorkflowRef::global(),
        };
        Ok(Self {
            name: name.into(),
            workflow,
        })
    }
}

impl fmt::Display for AgentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.workflow.is_global() {
            write!(f, "{}", self.name)
        } else {
            write!(f, "{}{}", self.name, self.workflow)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let a = AgentRef::parse("alice").unwrap();
        assert_eq!(
            (a.name.as_str(), a.workflow.to_string().as_str()),
            ("alice", "@global:main")
        );
        let a = AgentRef::parse("alice@review").unwrap();
        assert_eq!(a.workflow.to_string(), "@review:main");
        let a = AgentRef::parse("alice@review:pr-1").unwrap();
        assert_eq!(a.to_string(), "alice@review:pr-1");
        assert!(AgentRef::parse("@review:pr-1").is_err());
        assert!(AgentRef::parse("al ice").is_err());
        assert_eq!(WorkflowRef::parse("@review:pr-1").unwrap().tag, "pr-1");
        assert_eq!(
            WorkflowRef::parse("review").unwrap().to_string(),
            "@review:main"
        );
        assert!(WorkflowRef::parse("@a/b").is_err());
        assert!(WorkflowRef::parse("@").is_err());
    }

    #[test]
    fn organisation_names_follow_one_rule_in_any_letter_case() {
        let check = |given: &str, want: std::result::Result<Option<&str>, &str>| {
            let got = org_name(given).map_err(|e| e.to_string());
            match (got, want) {
                (Ok(g), Ok(w)) => assert_eq!(g.as_deref(), w, "{given}"),
                (Err(e), Err(w)) => {
                    assert!(e.contains(w), "{given}: {e}");
                    assert!(e.contains(ORG_NAME_RULE), "{given}: {e}");
                }
                (got, want) => panic!("{given}: got {got:?}, want {want:?}"),
            }
        };
        check("review-team", Ok(Some("review-team")));
        check("@Review-Team", Ok(Some("review-team")));
        check("@GLOBAL", Ok(None));
        check(&"a".repeat(60), Ok(Some(&"a".repeat(60))));
        check(&"a".repeat(61), Err("invalid organisation name"));
        check("a.b", Err("invalid organisation name"));
        check("a:b", Err("invalid organisation name"));
        check("", Err("invalid organisation name"));
        check("tëam", Err("invalid organisation name"));
        assert!(ORG_NAME_RULE.contains(&format!("1 to {MAX_ORG_NAME_LEN} ")));
        for w in [
            "@ORG.Review-Team",
            "@org.review-team:main",
            "Org.REVIEW-team",
        ] {
            let r = WorkflowRef::parse(w).unwrap();
            assert_eq!(r.to_string(), "@org.review-team:main", "{w}");
        }
        // Other workflow names keep their case.
        assert_eq!(WorkflowRef::parse("@Review").unwrap().name, "Review");
    }

    #[test]
    fn agent_names() {
        assert!(check_agent_name("coder-2").is_ok());
        assert!(check_agent_name("2coder").is_err());
        assert!(check_agent_name("a.b").is_err());
        assert!(check_agent_name("user").is_err());
        assert!(check_agent_name("All").is_err());
        assert!(check_agent_name(&"a".repeat(65)).is_err());
    }
}
