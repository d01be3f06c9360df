//! What reaches the model in the middle of a run: before each model call after the
//! first, the loop reads the inbox again and adds what arrived since the run began
//! (messages, task changes, approval outcomes: whatever lands in the inbox), each as
//! what it is (sender, time, DM or channel). Reading it marks it seen by this run,
//! so the run's end acks it as it acks the inbox the run read first; a message not
//! shown stays for the next run, as before.

use super::Provider;
use crate::client::KernelClient;
use crate::context::Message;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::fmt::Write;

/// The ids this run has shown its model, and what arrives beyond them.
pub struct Arrivals {
    shown: HashSet<String>,
}

#[derive(Deserialize)]
struct Page {
    messages: Vec<Message>,
}

impl Arrivals {
    /// Starting from the inbox the run read first.
    pub fn new(first: &[Message]) -> Self {
        Self::shown(first.iter().map(|m| m.id.clone()))
    }

    /// Starting from these ids, already shown.
    pub fn shown(ids: impl IntoIterator<Item = String>) -> Self {
        Self {
            shown: ids.into_iter().collect(),
        }
    }

    /// The ids shown so far.
    pub fn ids(&self) -> Vec<String> {
        self.shown.iter().cloned().collect()
    }

    /// The messages that arrived since the last look (none when the inbox cannot be
    /// read: a read that fails leaves them for the next run, as before).
    pub async fn fetch(&mut self, client: &KernelClient) -> Vec<Message> {
        let Ok(v) = client.must("my_inbox", json!({})).await else {
            return Vec::new();
        };
        let Ok(page) = serde_json::from_value::<Page>(v) else {
            return Vec::new();
        };
        page.messages
            .into_iter()
            .filter(|m| self.shown.insert(m.id.clone()))
            .collect()
    }
}

/// The text the model gets for messages that arrived mid-run.
pub fn text(msgs: &[Message]) -> String {
    let mut t = format!(
        "## {} new in your inbox while you worked (already read by you; handle it now if it changes your work)\n",
        msgs.len()
    );
    for m in msgs {
        let whence = if m.dm { "DM" } else { "channel" };
        let mut tags = String::new();
        if m.priority != "normal" && !m.priority.is_empty() {
            let _ = write!(tags, " [{}]", m.priority.to_uppercase());
        }
        let _ = writeln!(
            t,
            "- {} from @{} ({whence}, {}){tags}: {}",
            m.id,
            m.from,
            m.created_at,
            crate::clip(
                &m.content,
                crate::prompt::INBOX_PROMPT_BYTES / msgs.len().max(1)
            )
        );
    }
    t
}

/// Adds `text` to the conversation after the tool results: in Anthropic's format a
/// text block of the same user turn (two user turns in a row are not allowed), in
/// OpenAI's a user message after the tool messages.
pub fn push(convo: &mut Vec<Value>, provider: Provider, text: String) {
    match provider {
        Provider::Anthropic => {
            let block = json!({ "type": "text", "text": text });
            match convo.last_mut() {
                Some(last) if last["role"] == "user" && last["content"].is_array() => {
                    if let Some(a) = last["content"].as_array_mut() {
                        a.push(block);
                    }
                }
                _ => convo.push(json!({ "role": "user", "content": [block] })),
            }
        }
        Provider::OpenAi => convo.push(json!({ "role": "user", "content": text })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str, dm: bool, priority: &str) -> Message {
        Message {
            id: id.into(),
            from: "lead".into(),
            content: "use the other branch".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            priority: priority.into(),
            dm,
            to: None,
            result_schema: None,
        }
    }

    #[test]
    fn an_arrival_says_who_when_and_where() {
        let cases = [
            (
                msg("m1", true, "normal"),
                "- m1 from @lead (DM, 2026-01-01T00:00:00Z): use the other branch\n",
            ),
            (
                msg("m2", false, "high"),
                "- m2 from @lead (channel, 2026-01-01T00:00:00Z) [HIGH]: use the other branch\n",
            ),
        ];
        for (m, want) in cases {
            let t = text(std::slice::from_ref(&m));
            assert!(
                t.starts_with("## 1 new in your inbox while you worked"),
                "{t}"
            );
            assert!(t.ends_with(want), "{t}");
        }
    }

    #[test]
    fn arrivals_join_the_tool_results_turn_or_follow_it() {
        let results =
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]});
        let mut convo = vec![results];
        push(&mut convo, Provider::Anthropic, "new".into());
        assert_eq!(convo.len(), 1);
        assert_eq!(
            convo[0]["content"][1],
            json!({"type": "text", "text": "new"})
        );
        let mut convo = vec![json!({"role": "tool", "tool_call_id": "a", "content": "ok"})];
        push(&mut convo, Provider::OpenAi, "new".into());
        assert_eq!(convo[1], json!({"role": "user", "content": "new"}));
    }
}
