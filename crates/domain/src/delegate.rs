//! Delegation: what an agent's definition may allow it, making and asking agents of
//! its own (`delegate: {agents, depth, backends, budget}`), and the rules a
//! sub-agent's definition is held to (never wider than its parent's). Pure: the
//! kernel counts what is alive and spent, and asks these functions.

use crate::backends::Backend;
use crate::permissions::Permissions;
use serde::{Deserialize, Serialize};

/// The most sub-agents one agent may keep alive.
pub const MAX_AGENTS: u32 = 20;
/// The deepest nesting a definition may allow.
pub const MAX_DEPTH: u32 = 5;

/// An agent's `delegate`: off when absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Delegate {
    /// Sub-agents alive at once, at most (1..=20).
    pub agents: u32,
    /// Nesting: 1 = its sub-agents cannot delegate (default 1).
    #[serde(default = "one")]
    pub depth: u32,
    /// Backends its sub-agents may have (default: its own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backends: Vec<String>,
    /// What all its sub-agents together may spend, out of its own spending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Share>,
}

fn one() -> u32 {
    1
}

/// The share of an agent's spending its sub-agents may spend together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Share {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

impl Delegate {
    /// Reads a `delegate` value; the error names the field.
    pub fn read(v: &serde_json::Value) -> Result<Self, String> {
        let d: Delegate =
            serde_json::from_value(v.clone()).map_err(|e| format!("delegate: {e}"))?;
        d.check()?;
        Ok(d)
    }

    /// Refuses limits that could never be met or make no sense.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_AGENTS).contains(&self.agents) {
            return Err(format!(
                "delegate.agents: {} sub-agents; give 1 to {MAX_AGENTS}",
                self.agents
            ));
        }
        if !(1..=MAX_DEPTH).contains(&self.depth) {
            return Err(format!(
                "delegate.depth: {}; give 1 (its sub-agents cannot delegate) to {MAX_DEPTH}",
                self.depth
            ));
        }
        for (i, b) in self.backends.iter().enumerate() {
            match b.parse::<Backend>() {
                Ok(b) if !b.has_no_worker() => {}
                Ok(_) => {
                    return Err(format!(
                        "delegate.backends[{i}]: {b:?} has no worker; a sub-agent needs one"
                    ));
                }
                Err(_) => {
                    return Err(format!(
                        "delegate.backends[{i}]: unknown backend {b:?}; use one of {}",
                        crate::backends::BACKENDS.join(", ")
                    ));
                }
            }
        }
        if let Some(s) = &self.budget {
            if s.max_tokens == Some(0) {
                return Err("delegate.budget.max_tokens must be at least 1".into());
            }
            if let Some(c) = s.max_cost_usd
                && !(c.is_finite() && c > 0.0)
            {
                return Err(format!(
                    "delegate.budget.max_cost_usd must be a positive number, got {c}"
                ));
            }
        }
        Ok(())
    }

    /// The share within the agent's own budget: a share over its own limit could
    /// never be spent.
    pub fn check_within(&self, own: Option<&crate::guards::Budget>) -> Result<(), String> {
        let (Some(s), Some(own)) = (&self.budget, own) else {
            return Ok(());
        };
        if let (Some(t), Some(o)) = (s.max_tokens, own.max_tokens)
            && t > o
        {
            return Err(format!(
                "delegate.budget.max_tokens {t} is over the agent's own budget.max_tokens {o}"
            ));
        }
        if let (Some(t), Some(o)) = (s.max_cost_usd, own.max_cost_usd)
            && t > o
        {
            return Err(format!(
                "delegate.budget.max_cost_usd {t} is over the agent's own budget.max_cost_usd {o}"
            ));
        }
        Ok(())
    }

    /// Whether a sub-agent of an agent with this `delegate` (and `own` backend)
    /// may have `backend`.
    pub fn allows_backend(&self, own: &str, backend: &str) -> Result<(), String> {
        let ok = if self.backends.is_empty() {
            backend == own
        } else {
            self.backends.iter().any(|b| b == backend)
        };
        if ok {
            return Ok(());
        }
        let allowed = if self.backends.is_empty() {
            own.to_owned()
        } else {
            self.backends.join(", ")
        };
        Err(format!(
            "backend: {backend:?} is not among the backends this agent may give its sub-agents \
             ({allowed}; delegate.backends)"
        ))
    }

    /// The `delegate` a sub-agent asks for, held within this one (of an agent whose
    /// own backend is `own`): no more sub-agents, less deep, no other backends (an
    /// empty `backends` is `own` alone), no larger share.
    pub fn check_sub(&self, own: &str, sub: &Delegate) -> Result<(), String> {
        if self.depth <= 1 {
            return Err(format!(
                "delegate: this agent's sub-agents cannot delegate (its delegate.depth is {}); \
                 leave delegate out",
                self.depth
            ));
        }
        if sub.agents > self.agents {
            return Err(format!(
                "delegate.agents: {} is more than this agent's own delegate.agents ({}); give {} or fewer",
                sub.agents, self.agents, self.agents
            ));
        }
        if sub.depth >= self.depth {
            return Err(format!(
                "delegate.depth: {} is too deep; a sub-agent of this agent may have at most {}",
                sub.depth,
                self.depth - 1
            ));
        }
        let mine: Vec<&str> = if self.backends.is_empty() {
            vec![own]
        } else {
            self.backends.iter().map(String::as_str).collect()
        };
        if let Some(b) = sub.backends.iter().find(|b| !mine.contains(&b.as_str())) {
            return Err(format!(
                "delegate.backends: {b:?} is not among the backends this agent may give its \
                 sub-agents ({}; delegate.backends)",
                mine.join(", ")
            ));
        }
        let own = self.budget.as_ref().map(|s| crate::guards::Budget {
            max_tokens: s.max_tokens,
            max_cost_usd: s.max_cost_usd,
            ..Default::default()
        });
        sub.check_within(own.as_ref())
    }
}

/// Permissions never wider than `outer`'s: a profile no higher, nothing allowed
/// that `outer` does not allow, and every one of `outer`'s denials kept (added
/// when left out). The error names what exceeds.
pub fn within(inner: &Permissions, outer: &Permissions) -> Result<Permissions, String> {
    if inner.profile > outer.profile {
        return Err(format!(
            "permissions.profile: {} is wider than this agent's own {}",
            inner.profile.as_str(),
            outer.profile.as_str()
        ));
    }
    for (i, a) in inner.allow.iter().enumerate() {
        let own = Permissions::profile(outer.profile);
        if !outer.allow.contains(a) && !own.may_whole(a) {
            return Err(format!(
                "permissions.allow[{i}]: {a} is not allowed to this agent itself"
            ));
        }
    }
    // A sub-agent's sandbox is no looser than its parent's, nor its network wider.
    let loose = |m: crate::sandbox::Mode| m as u8;
    if loose(inner.sandbox_mode()) > loose(outer.sandbox_mode()) {
        return Err(format!(
            "permissions.sandbox: {} is looser than this agent's own {}",
            inner.sandbox_mode().as_str(),
            outer.sandbox_mode().as_str()
        ));
    }
    let reach = |n: crate::sandbox::Network| 2 - n as u8;
    if reach(inner.network_reach()) > reach(outer.network_reach()) {
        return Err(format!(
            "permissions.network: {} is wider than this agent's own {}",
            inner.network_reach().as_str(),
            outer.network_reach().as_str()
        ));
    }
    // Limits left out are the parent's own.
    let inner = &Permissions {
        limits: inner.limits.or(outer.limits),
        ..inner.clone()
    };
    let (i, o) = (inner.sandbox_limits(), outer.sandbox_limits());
    for (name, a, b) in [
        ("memory_mb", i.memory_mb, o.memory_mb),
        ("processes", i.processes, o.processes),
        ("file_mb", i.file_mb, o.file_mb),
        ("cpu_s", i.cpu_s, o.cpu_s),
    ] {
        if a > b {
            return Err(format!(
                "permissions.limits.{name}: {a} is above this agent's own {b}"
            ));
        }
    }
    let mut out = inner.clone();
    for d in &outer.deny {
        if !out.deny.contains(d) {
            out.deny.push(d.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permissions::PermissionsArg;

    fn perms(v: serde_json::Value) -> Permissions {
        serde_json::from_value::<PermissionsArg>(v)
            .unwrap()
            .read()
            .unwrap()
    }

    #[test]
    fn reads_and_checks_delegate() {
        let check = |v: serde_json::Value, expect: &str| match Delegate::read(&v) {
            Ok(d) => assert_eq!(expect, format!("ok depth {}", d.depth), "{v}"),
            Err(e) => assert!(e.contains(expect), "{v}: {e}"),
        };
        check(serde_json::json!({"agents": 2}), "ok depth 1");
        check(serde_json::json!({"agents": 2, "depth": 3}), "ok depth 3");
        check(serde_json::json!({"agents": 0}), "delegate.agents");
        check(
            serde_json::json!({"agents": 2, "depth": 9}),
            "delegate.depth",
        );
        check(
            serde_json::json!({"agents": 2, "backends": ["nope"]}),
            "delegate.backends[0]",
        );
        check(
            serde_json::json!({"agents": 2, "backends": ["human"]}),
            "has no worker",
        );
        check(
            serde_json::json!({"agents": 2, "budget": {"max_tokens": 0}}),
            "delegate.budget.max_tokens",
        );
        check(
            serde_json::json!({"agents": 2, "budget": {"max_hops": 3}}),
            "unknown field `max_hops`",
        );
        check(serde_json::json!({"agentz": 2}), "unknown field `agentz`");
    }

    #[test]
    fn a_sub_delegate_is_narrower() {
        let d = |v: serde_json::Value| Delegate::read(&v).unwrap();
        let parent = d(serde_json::json!({"agents": 3, "depth": 2, "budget": {"max_tokens": 100}}));
        let check =
            |sub: serde_json::Value, expect: &str| match parent.check_sub("sdk", &d(sub.clone())) {
                Ok(()) => assert_eq!(expect, "ok", "{sub}"),
                Err(e) => assert!(e.contains(expect), "{sub}: {e}"),
            };
        check(serde_json::json!({"agents": 1}), "ok");
        check(serde_json::json!({"agents": 3}), "ok");
        check(
            serde_json::json!({"agents": 4}),
            "delegate.agents: 4 is more than this agent's own delegate.agents (3)",
        );
        check(serde_json::json!({"agents": 1, "backends": ["sdk"]}), "ok");
        check(
            serde_json::json!({"agents": 1, "backends": ["claude"]}),
            "delegate.backends: \"claude\" is not among the backends this agent may give its sub-agents (sdk;",
        );
        let wide = d(serde_json::json!({"agents": 3, "depth": 2, "backends": ["mock", "sdk"]}));
        assert!(
            wide.check_sub(
                "claude",
                &d(serde_json::json!({"agents": 1, "backends": ["mock"]}))
            )
            .is_ok()
        );
        let e = wide
            .check_sub(
                "claude",
                &d(serde_json::json!({"agents": 1, "backends": ["claude"]})),
            )
            .unwrap_err();
        assert!(e.contains("(mock, sdk;"), "{e}");
        check(
            serde_json::json!({"agents": 1, "depth": 2}),
            "delegate.depth: 2 is too deep",
        );
        check(
            serde_json::json!({"agents": 1, "budget": {"max_tokens": 500}}),
            "delegate.budget.max_tokens 500",
        );
        let flat = d(serde_json::json!({"agents": 3}));
        let e = flat
            .check_sub("sdk", &d(serde_json::json!({"agents": 1})))
            .unwrap_err();
        assert!(
            e.contains("cannot delegate (its delegate.depth is 1)"),
            "{e}"
        );
    }

    #[test]
    fn backends_default_to_its_own() {
        let d = Delegate::read(&serde_json::json!({"agents": 1})).unwrap();
        assert!(d.allows_backend("sdk", "sdk").is_ok());
        let e = d.allows_backend("sdk", "claude").unwrap_err();
        assert!(
            e.contains("backend: \"claude\"") && e.contains("(sdk;"),
            "{e}"
        );
        let d = Delegate::read(&serde_json::json!({"agents": 1, "backends": ["mock"]})).unwrap();
        assert!(d.allows_backend("sdk", "mock").is_ok());
        assert!(d.allows_backend("sdk", "sdk").is_err());
    }

    #[test]
    fn permissions_never_wider() {
        let outer = perms(
            serde_json::json!({"profile": "edit", "allow": ["shell:npm test*"], "deny": ["mcp:github"]}),
        );
        let check =
            |inner: serde_json::Value, expect: &str| match within(&perms(inner.clone()), &outer) {
                Ok(p) => assert_eq!(expect, p.describe(), "{inner}"),
                Err(e) => assert!(e.contains(expect), "{inner}: {e}"),
            };
        check(
            serde_json::json!("read"),
            "may read and search files in its folder, but never mcp:github",
        );
        check(
            serde_json::json!({"profile": "edit", "allow": ["shell:npm test*"]}),
            "may read, create and edit files in its folder, and also shell:npm test*, but never mcp:github",
        );
        check(
            serde_json::json!("full"),
            "permissions.profile: full is wider than this agent's own edit",
        );
        check(
            serde_json::json!({"profile": "read", "allow": ["shell"]}),
            "permissions.allow[0]: shell is not allowed to this agent itself",
        );
        check(
            serde_json::json!({"profile": "read", "allow": ["edit"]}),
            "may read and search files in its folder, and also edit, but never mcp:github",
        );
        // Its sandbox is no looser, its network no wider, its limits no higher,
        // and no path is granted that its parent was not.
        check(
            serde_json::json!({"profile": "read", "sandbox": "off"}),
            "permissions.sandbox: off is looser than this agent's own required",
        );
        check(
            serde_json::json!({"profile": "read", "network": "any"}),
            "permissions.network: any is wider than this agent's own model",
        );
        check(
            serde_json::json!({"profile": "read", "limits": {"file_mb": 4096}}),
            "permissions.limits.file_mb: 4096 is above this agent's own 2048",
        );
        check(
            serde_json::json!({"profile": "read", "allow": ["read:~/.aws"]}),
            "permissions.allow[0]: read:~/.aws is not allowed to this agent itself",
        );
        check(
            serde_json::json!({"profile": "read", "network": "none", "limits": {"cpu_s": 60}}),
            "may read and search files in its folder, but never mcp:github",
        );
    }

    #[test]
    fn a_sub_agent_keeps_its_parents_lower_limits() {
        let outer = perms(serde_json::json!({"profile": "edit", "limits": {"processes": 64}}));
        let inner = within(&perms(serde_json::json!("read")), &outer).unwrap();
        assert_eq!(inner.sandbox_limits().processes, 64);
        let e = within(
            &perms(serde_json::json!({"profile": "read", "limits": {"processes": 65}})),
            &outer,
        )
        .unwrap_err();
        assert!(e.contains("limits.processes: 65"), "{e}");
    }
}
