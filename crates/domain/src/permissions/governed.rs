//! A profile under contracts (see `crate::contracts`): what changes when contracts
//! govern some of an agent's tools. Claude Code asks the kernel for those classes
//! (its permission prompt tool); a backend that cannot ask holds the contracts'
//! refusals as deny rules, narrowed until it can hold them.

use super::backends::{CLAUDE_EDIT, CLAUDE_READ, CLAUDE_WEB, Claude, check_agent, claude};
use super::{Class, Kind, Permissions, Profile};

/// Claude Code when contracts govern some tool classes for the agent: those
/// classes are taken out of its rules and its mode, so that Claude Code asks its
/// permission prompt tool (the kernel's `permission_request`) before each such call,
/// and the kernel answers from the profile and the contracts. What the profile
/// denies stays in `--disallowedTools`; what it allows in other classes stays allowed.
pub fn claude_governed(p: &Permissions, servers: &[&str], governed: &[Kind]) -> Claude {
    let mut rules = claude(p, servers);
    let team = format!("mcp__{}", crate::protocol::TEAM_SERVER);
    let kind_of = |rule: &str| -> Option<Kind> {
        let head = rule.split('(').next().unwrap_or(rule);
        if CLAUDE_READ.contains(&head) {
            Some(Kind::Read)
        } else if CLAUDE_EDIT.contains(&head) {
            Some(Kind::Edit)
        } else if CLAUDE_WEB.contains(&head) {
            Some(Kind::Web)
        } else if head == "Bash" {
            Some(Kind::Shell)
        } else if head.starts_with("mcp__") && head != team {
            Some(Kind::Mcp)
        } else {
            None
        }
    };
    rules
        .allowed
        .retain(|r| kind_of(r).is_none_or(|k| !governed.contains(&k)));
    let mut grant = |names: &[&str]| {
        for n in names {
            if !rules.allowed.iter().any(|a| a == n) {
                rules.allowed.push((*n).to_owned());
            }
        }
    };
    match rules.mode {
        "bypassPermissions" => {
            // Full, minus what is governed: the rest stays allowed by rule.
            rules.mode = "default";
            for (kind, names) in [
                (Kind::Read, CLAUDE_READ),
                (Kind::Edit, CLAUDE_EDIT),
                (Kind::Web, CLAUDE_WEB),
                (Kind::Shell, &["Bash"][..]),
            ] {
                if !governed.contains(&kind) {
                    grant(names);
                }
            }
            if !governed.contains(&Kind::Mcp) {
                let own: Vec<String> = servers.iter().map(|s| format!("mcp__{s}")).collect();
                grant(&own.iter().map(String::as_str).collect::<Vec<_>>());
            }
        }
        "acceptEdits" if governed.contains(&Kind::Edit) => rules.mode = "default",
        _ => {}
    }
    rules
}

/// `p` with `denials` added as deny rules, narrowed until `backend` can hold it
/// (never widened): a command pattern it cannot match becomes the whole shell;
/// then a denied class the profile grants lowers the profile (Codex holds "no
/// edits" only as its read-only sandbox, "no shell" at full by turning it off).
/// If even that cannot be held, the run fails with the backend's reason.
pub fn with_denials(
    backend: &str,
    p: &Permissions,
    denials: Vec<Class>,
    servers: &[&str],
) -> Permissions {
    let mut p = p.clone();
    for c in denials {
        if !p.deny.contains(&c) {
            p.deny.push(c);
        }
    }
    let holds = |p: &Permissions| check_agent(backend, p, servers).is_ok();
    if !holds(&p) {
        for c in p.deny.iter_mut() {
            if matches!(c, Class::Shell(Some(_))) {
                *c = Class::Shell(None);
            }
        }
        p.deny.dedup();
    }
    if !holds(&p) && p.deny.contains(&Class::Edit) && p.profile > Profile::Read {
        p.profile = Profile::Read;
        p.deny
            .retain(|c| !matches!(c, Class::Edit | Class::Shell(None) | Class::Web));
        p.allow.clear();
    }
    if !holds(&p) && p.profile == Profile::Full {
        p.profile = Profile::Edit;
        p.deny
            .retain(|c| !matches!(c, Class::Shell(None) | Class::Web));
        p.allow.clear();
    }
    p
}
