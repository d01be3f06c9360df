//! The hook mode (`__hook FILE`): what Claude Code runs after each tool call of a
//! run (a `PostToolUse` hook in the run's own settings file), so that what arrived
//! in the agent's inbox since the run began reaches its model at its next step, as
//! the sdk loop adds it before its next model call.
//!
//! `FILE` (in the run's scratch folder, private to this user) holds the kernel's URL
//! and the ids already shown; the run's token comes from the environment Claude Code
//! passes on (never in an argument or a file). Reading the inbox marks what it shows
//! seen by the run, which acks it when it succeeds. Nothing new, or any failure:
//! nothing is printed, and the message waits for the next run as before.

use crate::client::KernelClient;
use crate::sdk::arrivals::{self, Arrivals};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub const HOOK_MODE: &str = "__hook";
/// The hook's file in the run's scratch folder.
pub const HOOK_FILE: &str = "inbox-hook.json";

/// What the hook keeps between its calls in one run.
#[derive(Serialize, Deserialize)]
pub struct HookState {
    pub url: String,
    pub shown: Vec<String>,
}

/// Claude Code's settings for a run: one `PostToolUse` hook on every tool, this
/// binary in hook mode reading `file`.
pub fn settings(exe: &Path, file: &Path) -> serde_json::Value {
    let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
    let command = format!("{} {HOOK_MODE} {}", quote(exe), quote(file));
    serde_json::json!({"hooks": {"PostToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": command, "timeout": 20}
    ]}]}})
}

/// The hook's answer (one JSON line for stdout), or nothing.
pub async fn main(file: &Path) -> Option<String> {
    let token = std::env::var(crate::cli::TOKEN_ENV).ok()?;
    let mut state: HookState = serde_json::from_slice(&std::fs::read(file).ok()?).ok()?;
    let client = KernelClient::connect(&state.url, &token).await.ok()?;
    let mut seen = Arrivals::shown(std::mem::take(&mut state.shown));
    let new = seen.fetch(&client).await;
    client.close().await;
    if new.is_empty() {
        return None;
    }
    state.shown = seen.ids();
    let body = serde_json::to_vec(&state).ok()?;
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, body)
        .and_then(|()| std::fs::rename(&tmp, file))
        .ok()?;
    let out = serde_json::json!({"hookSpecificOutput": {
        "hookEventName": "PostToolUse",
        "additionalContext": arrivals::text(&new),
    }});
    Some(out.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_command_quotes_its_paths() {
        let s = settings(
            Path::new("/opt/a w/agent-worker"),
            Path::new("/tmp/it's/h.json"),
        );
        let hook = &s["hooks"]["PostToolUse"][0];
        assert_eq!(hook["matcher"], "*");
        assert_eq!(
            hook["hooks"][0]["command"],
            r"'/opt/a w/agent-worker' __hook '/tmp/it'\''s/h.json'"
        );
    }
}
