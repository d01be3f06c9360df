//! Below the MCP client: a process's /proc figures, raw JSON-RPC requests, and
//! the Python of the tests' virtualenv.

use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;

/// A field of /proc/PID/status, in its own unit (KiB for memory).
pub fn proc_status(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// Resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    proc_status(pid, "VmRSS:")
}

/// The live worker processes (internal worker mode) whose parent is `parent`.
pub fn workers_of(parent: u32) -> Vec<u32> {
    use agent_worker::process::proc_stat;
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| proc_stat(*pid).is_some_and(|s| s.ppid == parent && s.alive()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("__worker"))
        })
        .collect()
}

/// A raw `initialize` request of the given protocol version.
pub fn raw_init(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
}

/// A raw MCP POST, in a legacy session when `session` is given.
pub fn raw_post(url: &str, token: &str, session: Option<&str>) -> reqwest::RequestBuilder {
    let mut r = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    if let Some(s) = session {
        r = r
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-11-25");
    }
    r
}

/// The Python of the tests' virtualenv (scripts/py-env sets it up from
/// tests/python/requirements.txt, idempotent and locked).
pub fn python() -> String {
    let out =
        std::process::Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/py-env"))
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/py-env (needs bash and python3 with venv)");
    assert!(
        out.status.success(),
        "scripts/py-env failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_owned()
}
