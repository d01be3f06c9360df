//! The sdk backend's conversation, kept from run to run (as a CLI resumes its
//! session), in the agent's own folder in the data dir.
//!
//! It belongs to one model, system prompt and working folder: a run whose
//! fingerprint of those differs starts afresh (the old file is replaced). It is
//! trimmed to a budget, oldest first, cutting only before a run's opening prompt so
//! a tool call and its result are never separated. Only a run that succeeded saves
//! it, or one that was stopped (an urgent message, a pause) once every tool call it
//! made is answered, so a failed run's half-turn never becomes the next run's
//! history.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Roughly how many tokens of history a run carries (about 4 bytes of JSON each).
pub const BUDGET_TOKENS: usize = 60_000;
const FILE: &str = "sdk-conversation.json";

#[derive(Serialize, Deserialize)]
struct Saved {
    fingerprint: String,
    messages: Vec<Value>,
}

pub struct Conversation {
    path: PathBuf,
    fingerprint: String,
}

impl Conversation {
    pub fn new(state_dir: &Path, provider: &str, model: &str, system: &str, cwd: &Path) -> Self {
        let mut h = Sha256::new();
        for part in [provider, model, system, &cwd.display().to_string()] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        Self {
            path: state_dir.join(FILE),
            fingerprint: hex::encode(&h.finalize()[..8]),
        }
    }

    /// The fingerprint (reported as the run's session).
    pub fn id(&self) -> &str {
        &self.fingerprint
    }

    /// The history to continue, or nothing (none yet, another fingerprint, unreadable).
    pub fn load(&self) -> Vec<Value> {
        let Ok(text) = crate::sdk::fs::read_text(&self.path, 16 * 1024 * 1024) else {
            return Vec::new();
        };
        match serde_json::from_str::<Saved>(&text) {
            Ok(s) if s.fingerprint == self.fingerprint => s.messages,
            _ => Vec::new(),
        }
    }

    /// Saves `messages` trimmed to the budget. `is_prompt` tells a run's opening
    /// prompt (a safe place to cut) from the rest.
    pub fn save(
        &self,
        messages: &[Value],
        is_prompt: impl Fn(&Value) -> bool,
    ) -> std::io::Result<()> {
        let kept = trim(messages, BUDGET_TOKENS * 4, is_prompt);
        let body = serde_json::to_vec(&Saved {
            fingerprint: self.fingerprint.clone(),
            messages: kept.to_vec(),
        })?;
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, body)?;
        std::fs::rename(&tmp, &self.path)
    }
}

/// The newest messages within `budget` bytes, starting at an opening prompt.
fn trim(messages: &[Value], budget: usize, is_prompt: impl Fn(&Value) -> bool) -> &[Value] {
    let mut size = 0;
    let mut start = messages.len();
    for (i, m) in messages.iter().enumerate().rev() {
        size += m.to_string().len();
        if size > budget {
            break;
        }
        if is_prompt(m) {
            start = i;
        }
    }
    &messages[start..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn prompt(v: &Value) -> bool {
        v["role"] == "user" && v["content"].is_string()
    }

    #[test]
    fn trimming_keeps_whole_runs_newest_first() {
        let runs: Vec<Value> = (0..10)
            .flat_map(|i| {
                vec![
                    json!({"role": "user", "content": format!("task {i} {}", "x".repeat(100))}),
                    json!({"role": "assistant", "content": [{"type": "tool_use", "id": i}]}),
                    json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": i}]}),
                ]
            })
            .collect();
        let kept = trim(&runs, 700, prompt);
        assert!(prompt(&kept[0]), "starts at a prompt");
        assert_eq!(kept.len() % 3, 0);
        assert!(kept.len() < runs.len() && !kept.is_empty());
        assert!(kept.last().unwrap()["content"][0]["tool_use_id"] == 9);
    }

    #[test]
    fn another_fingerprint_starts_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let a = Conversation::new(dir.path(), "anthropic", "m", "sys", dir.path());
        let msgs = vec![json!({"role": "user", "content": "hi"})];
        a.save(&msgs, prompt).unwrap();
        assert_eq!(a.load(), msgs);
        let b = Conversation::new(dir.path(), "anthropic", "m", "another system", dir.path());
        assert!(b.load().is_empty());
    }
}
