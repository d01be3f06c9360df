//! The hook mode (`__hook FILE`): what a CLI runs after each tool call of a run, so
//! that what arrived in the agent's inbox since the run began reaches its model at
//! its next step, as the sdk loop adds it before its next model call. Claude Code
//! and Codex run it as a `PostToolUse` hook (a per-run settings file; a `-c`
//! override), Gemini CLI as an `AfterTool` hook. Each reads the hook's
//! `additionalContext`; the answer names the event the CLI said it ran for
//! (`hook_event_name` on stdin).
//!
//! `FILE` (in the run's scratch folder, private to this user) holds the kernel's URL
//! and the ids already shown; the run's token comes from the environment the CLI
//! passes on (never in an argument or a file). Gemini CLI's hook is in the user
//! settings of the agent's own home, kept from run to run (see [`shared_entry`]):
//! its command is the same for every run and names `FILE` by the variable
//! [`FILE_ENV`] of the CLI's environment, which its shell expands. Hooks of
//! parallel tool calls take turns on `FILE` (a lock). Reading the inbox marks what it shows
//! seen by the run, which acks it when it succeeds. Nothing new, or any failure:
//! nothing is printed, and the message waits for the next run as before.

use crate::cli::Scratch;
use crate::client::KernelClient;
use crate::sdk::arrivals::{self, Arrivals};
use crate::{Failure, Run};
use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

pub const HOOK_MODE: &str = "__hook";
/// The hook's file in the run's scratch folder.
pub const HOOK_FILE: &str = "inbox-hook.json";

/// The variable naming the hook's file in a CLI's environment (see [`shared_entry`]).
pub const FILE_ENV: &str = "AW_HOOK_FILE";

/// How long the hook waits for the kernel's MCP session.
const CONNECT_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// What the hook keeps between its calls in one run.
#[derive(Serialize, Deserialize)]
pub struct HookState {
    pub url: String,
    pub shown: Vec<String>,
}

fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// One hook on every tool after its call, running `command`.
fn on_every_tool(command: String) -> serde_json::Value {
    serde_json::json!([{"matcher": "*", "hooks": [{"type": "command", "command": command}]}])
}

/// A CLI's settings for a run: one hook on every tool after its call (`event`:
/// `PostToolUse` for Claude Code), this binary in hook mode reading `file`.
pub fn settings(exe: &Path, file: &Path, event: &str) -> serde_json::Value {
    let command = format!("{} {HOOK_MODE} {}", quote(exe), quote(file));
    serde_json::json!({"hooks": {event: on_every_tool(command)}})
}

/// The hook list for `event` in settings kept from run to run: the same
/// for every run, the file named by [`FILE_ENV`] in the CLI's environment.
pub fn shared_entry(exe: &Path) -> serde_json::Value {
    on_every_tool(format!("{} {HOOK_MODE} \"${FILE_ENV}\"", quote(exe)))
}

/// Writes the hook's file: what the run has shown so far (the inbox it read).
pub fn write_state(run: &Run<'_>, scratch: &Scratch) -> Result<PathBuf, Failure> {
    let state = HookState {
        url: run.cfg.url.clone(),
        shown: run.context.inbox.iter().map(|m| m.id.clone()).collect(),
    };
    let json = serde_json::to_string(&state).unwrap_or_default();
    scratch.write(HOOK_FILE, &json)
}

/// This binary, which the hook runs.
pub fn own_binary() -> Result<PathBuf, Failure> {
    std::env::current_exe().map_err(|e| {
        Failure::new(
            domain::protocol::ErrorClass::Other,
            format!("cannot find the worker's own binary for its inbox hook: {e}"),
        )
    })
}

/// Writes the hook's file and the run's settings file holding the hook for
/// `event`; the settings file's path.
pub fn write(run: &Run<'_>, scratch: &Scratch, event: &str) -> Result<PathBuf, Failure> {
    let file = write_state(run, scratch)?;
    let settings = settings(&own_binary()?, &file, event).to_string();
    scratch.write(
        &format!("{}-hook-settings.json", event.to_lowercase()),
        &settings,
    )
}

/// The event the CLI ran the hook for, from the JSON it writes on `input` (the
/// first MiB is enough for the name). The rest is read to its end: a CLI whose
/// write of a large tool result fails on a closed pipe drops the hook's answer.
fn event_of(mut input: impl Read) -> String {
    let mut head = Vec::new();
    let _ = (&mut input).take(1 << 20).read_to_end(&mut head);
    let _ = std::io::copy(&mut input, &mut std::io::sink());
    serde_json::from_slice::<serde_json::Value>(&head)
        .ok()
        .and_then(|v| v["hook_event_name"].as_str().map(str::to_owned))
        .or_else(|| name_in(&String::from_utf8_lossy(&head)))
        .unwrap_or_else(|| "PostToolUse".into())
}

/// The event's name in JSON cut short after the first MiB.
fn name_in(head: &str) -> Option<String> {
    const KEY: &str = "\"hook_event_name\"";
    let after = &head[head.find(KEY)? + KEY.len()..];
    let value = after.trim_start().strip_prefix(':')?.trim_start();
    let value = value.strip_prefix('"')?;
    Some(value[..value.find('"')?].to_owned())
}

/// The hook's answer (one JSON line for stdout), or nothing.
pub async fn main(file: &Path) -> Option<String> {
    let event = event_of(std::io::stdin());
    let token = std::env::var(crate::cli::TOKEN_ENV).ok()?;
    // Held from the read to the write: hooks of parallel tool calls take turns,
    // so no two show one message.
    let mut held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .ok()?;
    held.lock().ok()?;
    let mut body = Vec::new();
    held.read_to_end(&mut body).ok()?;
    let mut state: HookState = serde_json::from_slice(&body).ok()?;
    // Bounded before anything is read: a kernel that does not answer costs the
    // tool call a few seconds, not the CLI's own hook limit.
    let connect = KernelClient::connect(&state.url, &token);
    let client = tokio::time::timeout(CONNECT_WITHIN, connect)
        .await
        .ok()?
        .ok()?;
    let mut seen = Arrivals::shown(std::mem::take(&mut state.shown));
    // Bounded too: the read marks what it returns seen, so a read cut off by the
    // CLI's own hook limit would hide a message the model never got.
    let new = tokio::time::timeout(CONNECT_WITHIN, seen.fetch(&client)).await;
    client.close().await;
    let new = new.ok()?;
    if new.is_empty() {
        return None;
    }
    state.shown = seen.ids();
    // The file only keeps a later call from showing these again: failing to save
    // it must not withhold what the read already marked seen. Written in place,
    // under the lock (a renamed file would let a waiting hook hold the old one).
    if let Ok(body) = serde_json::to_vec(&state) {
        let _ = held
            .set_len(0)
            .and_then(|()| held.seek(std::io::SeekFrom::Start(0)))
            .and_then(|_| held.write_all(&body));
    }
    drop(held);
    let out = serde_json::json!({"hookSpecificOutput": {
        "hookEventName": event,
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
            "PostToolUse",
        );
        let hook = &s["hooks"]["PostToolUse"][0];
        assert_eq!(hook["matcher"], "*");
        assert_eq!(
            hook["hooks"][0]["command"],
            r"'/opt/a w/agent-worker' __hook '/tmp/it'\''s/h.json'"
        );
        let shared = shared_entry(Path::new("/opt/a w/agent-worker"));
        assert_eq!(
            shared[0]["hooks"][0]["command"],
            r#"'/opt/a w/agent-worker' __hook "$AW_HOOK_FILE""#
        );
    }

    #[test]
    fn the_hook_reads_all_its_input_and_names_the_event() {
        let big = format!(
            r#"{{"hook_event_name":"AfterTool","tool_response":"{}"}}"#,
            "x".repeat(3 << 20)
        );
        let cases = [
            (big.as_str(), "AfterTool"),
            (r#"{"hook_event_name":"PostToolUse"}"#, "PostToolUse"),
            ("not json", "PostToolUse"),
        ];
        for (input, want) in cases {
            let mut cursor = std::io::Cursor::new(input.as_bytes());
            let event = event_of(&mut cursor);
            assert_eq!(cursor.position() as usize, input.len(), "input left unread");
            assert_eq!(event, want);
        }
    }
}
