//! The sizes an agent's definition may carry, each bounded where it is set
//! (agent_new, agent_update, a workflow's YAML), so that every agent accepted can
//! be started: what reaches a process's environment or command line fits there
//! (Linux takes at most 128 KiB per string and about 2 MiB in all), and the rest
//! travels to the worker on its stdin, within [`crate::protocol::MAX_RUN_CONFIG`].
//!
//! The system prompt ([`crate::guards::MAX_SYSTEM_PROMPT`]), the number of mock rules
//! and of skills are bounded where they are read; this module adds the byte sizes.

use crate::protocol::{McpServer, MockRule};
use std::collections::BTreeMap;

/// The most environment variables an agent may set.
pub const MAX_ENV_VARS: usize = crate::guards::MAX_ENV_VARS;
/// The longest value of one of an agent's environment variables.
pub const MAX_ENV_VALUE: usize = 32 * 1024;
/// The most an agent's environment may take, names and values together: it reaches
/// the worker's and its CLI's environment beside the machine's own.
pub const MAX_ENV_BYTES: usize = 64 * 1024;
/// The most an agent's mock rules may take as JSON (a rule's `write` up to 1 MiB).
pub const MAX_MOCK_BYTES: usize = 2 * 1024 * 1024;
/// The most MCP servers of its own an agent may have.
pub const MAX_SERVERS: usize = 20;
/// The most one of those servers may take as JSON: its arguments and environment
/// reach its command line and environment when a CLI starts it.
pub const MAX_SERVER_BYTES: usize = 64 * 1024;

/// An agent's `env`: names, their count and sizes.
pub fn check_env(env: &BTreeMap<String, String>) -> Result<(), String> {
    if env.len() > MAX_ENV_VARS {
        return Err(format!(
            "env: {} variables; at most {MAX_ENV_VARS}",
            env.len()
        ));
    }
    let mut total = 0;
    for (k, v) in env {
        let ok = k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && k.len() <= 256;
        if !ok {
            return Err(format!(
                "environment variable name {:?} is not valid: use letters, digits and '_', not starting with a digit, at most 256",
                k.chars().take(80).collect::<String>()
            ));
        }
        if k.starts_with("AW_") || k.starts_with("AGENT_WORKER_") {
            return Err(format!(
                "environment variable {k:?} is reserved: names starting with AW_ or AGENT_WORKER_ carry the worker's own settings and tokens"
            ));
        }
        if v.len() > MAX_ENV_VALUE {
            return Err(format!(
                "env.{k}: {} bytes; a value may take at most {MAX_ENV_VALUE}: put large data in a file in the agent's folder and its path in the variable",
                v.len()
            ));
        }
        total += k.len() + v.len() + 2;
    }
    if total > MAX_ENV_BYTES {
        return Err(format!(
            "env: {total} bytes in all; at most {MAX_ENV_BYTES}: put large data in files in the agent's folder and their paths in the variables"
        ));
    }
    Ok(())
}

/// The mock rules' size as a whole (each rule is checked by [`MockRule::validate_all`]).
pub fn check_mock(rules: &[MockRule]) -> Result<(), String> {
    let bytes = json_len(rules);
    if bytes > MAX_MOCK_BYTES {
        return Err(format!(
            "mock: the rules take {bytes} bytes as JSON; at most {MAX_MOCK_BYTES}: write long replies and files in fewer rules"
        ));
    }
    Ok(())
}

/// An agent's own MCP servers: how many, and each one's size.
pub fn check_servers(servers: &BTreeMap<String, McpServer>) -> Result<(), String> {
    if servers.len() > MAX_SERVERS {
        return Err(format!(
            "mcp_servers: {} servers; at most {MAX_SERVERS}",
            servers.len()
        ));
    }
    for (name, s) in servers {
        let bytes = json_len(s);
        if bytes > MAX_SERVER_BYTES {
            return Err(format!(
                "mcp_servers.{name}: {bytes} bytes as JSON; at most {MAX_SERVER_BYTES} (its args, env and headers): keep large settings in a file the server reads"
            ));
        }
    }
    Ok(())
}

fn json_len<T: serde::Serialize + ?Sized>(v: &T) -> usize {
    serde_json::to_vec(v).map_or(usize::MAX, |b| b.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &[(&str, usize)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, n)| ((*k).to_owned(), "v".repeat(*n)))
            .collect()
    }

    #[test]
    fn env_sizes() {
        let check = |e: BTreeMap<String, String>, want: Option<&str>| match (check_env(&e), want) {
            (Ok(()), None) => {}
            (Err(got), Some(w)) => assert!(got.contains(w), "{got}"),
            (got, want) => panic!("got {got:?}, want {want:?}"),
        };
        check(env(&[("A", 10), ("_B2", 100)]), None);
        check(env(&[("A", MAX_ENV_VALUE)]), None);
        check(env(&[("A", MAX_ENV_VALUE + 1)]), Some("env.A: 32769 bytes"));
        check(
            env(&[("A", 30_000), ("B", 30_000), ("C", 10_000)]),
            Some("in all; at most 65536"),
        );
        check(env(&[("2A", 1)]), Some("is not valid"));
        check(env(&[("A-B", 1)]), Some("is not valid"));
        check(env(&[(&"A".repeat(257), 1)]), Some("at most 256"));
        check(env(&[("AW_RUN", 1)]), Some("reserved"));
        check(env(&[("AGENT_WORKER_TOKEN", 1)]), Some("reserved"));
        let many: Vec<(String, usize)> = (0..65).map(|i| (format!("V{i}"), 1)).collect();
        let many: Vec<(&str, usize)> = many.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        check(env(&many), Some("65 variables; at most 64"));
    }

    #[test]
    fn mock_and_server_sizes() {
        let rule = |n: usize| -> MockRule {
            serde_json::from_value(json!({"reply": "r".repeat(n)})).unwrap()
        };
        assert!(check_mock(&[rule(200_000)]).is_ok());
        assert!(check_mock(&vec![rule(3_000); 50]).is_ok());
        let e = check_mock(&vec![rule(1 << 20); 3]).unwrap_err();
        assert!(e.contains("at most 2097152"), "{e}");
        let server = |n: usize| -> McpServer {
            serde_json::from_value(json!({"command": "x", "args": ["a".repeat(n)]})).unwrap()
        };
        let one = |n| BTreeMap::from([("s".to_owned(), server(n))]);
        assert!(check_servers(&one(60_000)).is_ok());
        let e = check_servers(&one(70_000)).unwrap_err();
        assert!(
            e.starts_with("mcp_servers.s: ") && e.contains("at most 65536"),
            "{e}"
        );
        let many: BTreeMap<String, McpServer> =
            (0..21).map(|i| (format!("s{i}"), server(1))).collect();
        assert!(
            check_servers(&many)
                .unwrap_err()
                .contains("21 servers; at most 20")
        );
    }
}
