//! The prompt a run gives its model: built here, in the worker, from what it read
//! over MCP (the kernel never builds prompts).
//!
//! Two parts: the system prompt (the agent's role plus how to work with the team,
//! passed through each backend's system-prompt channel) and the task (this run's
//! inbox, the recent channel and the main document).

use super::context::{Context, DOC_PROMPT_BYTES, Message};
use super::protocol::RunConfig;
use std::fmt::Write;

/// Room for the inbox and for the recent channel in a task. A CLI gets its prompt as
/// one command-line argument, which Linux caps at 128 KiB: a full inbox page (50
/// messages of up to 4,000 characters) could pass that and make every run fail to
/// start. Past these sizes each message is cut, and says where to read it whole.
pub const INBOX_PROMPT_BYTES: usize = 48 * 1024;
pub const RECENT_PROMPT_BYTES: usize = 12 * 1024;
/// The agent's own role text in the system prompt (a CLI argument too).
pub const ROLE_PROMPT_BYTES: usize = 24 * 1024;
/// A result schema shown with the message that asks for it, at most (a schema
/// is at most 16 KiB; result_submit's refusal repeats it whole).
const RESULT_SCHEMA_PROMPT_BYTES: usize = 4 * 1024;
/// A message is never cut shorter than this.
const MIN_MESSAGE_BYTES: usize = 300;

/// The agent's role followed by the team rules every backend gets.
pub fn system(cfg: &RunConfig) -> String {
    let role = cfg
        .system
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| format!("You are {}, a member of an AI agent team.", cfg.agent));
    let role = if role.len() > ROLE_PROMPT_BYTES {
        format!(
            "{}\n(The rest of your role description was cut: it is longer than {} KiB.)",
            super::clip(&role, ROLE_PROMPT_BYTES),
            ROLE_PROMPT_BYTES / 1024
        )
    } else {
        role
    };
    format!(
        "{role}\n\n\
         ## Working with your team\n\
         You are `{agent}` in the team {wf}, which works through the agent-worker MCP tools.\n\
         - Only `channel_send` reaches others. Your final answer is private: use it for a short note of what you did.\n\
         - Start a message with @name to ask that member to act; `to` makes it a direct message. The human lead is @user.\n\
         - Mention only who must act, and do not reply just to acknowledge: every mention wakes its agent.\n\
         - Shared documents: team_doc_read / team_doc_write / team_doc_append. Long content: resource_create.\n\
         - Decisions: team_proposal_create and team_vote.\n\
         - When nothing needs doing, finish without sending anything.",
        agent = cfg.agent,
        wf = cfg.workflow,
    )
}

/// One message; its text cut at `max` bytes with a pointer to `whole` (where to read it).
fn line(out: &mut String, m: &Message, max: usize, whole: &str) {
    let mut tags = String::new();
    if m.dm {
        tags.push_str(" [DM]");
    }
    if m.priority == "high" {
        tags.push_str(" [HIGH]");
    }
    if m.priority == URGENT {
        tags.push_str(" [URGENT]");
    }
    let _ = write!(
        out,
        "- {} from @{}{tags}: {}",
        m.id,
        m.from,
        super::clip(&m.content, max)
    );
    if m.content.len() > max {
        let _ = write!(out, " [cut at {max} bytes: {whole} shows it whole]");
    }
    out.push('\n');
    if let Some(schema) = &m.result_schema {
        let _ = writeln!(
            out,
            "  This asks you for a result: call result_submit {{\"ask\": \"{}\", \"result\": ...}} with JSON \
             fitting this schema: {}",
            m.id,
            super::clip(&schema.to_string(), RESULT_SCHEMA_PROMPT_BYTES)
        );
    }
}

/// How many bytes each of `msgs` may show so that together they fit in `budget`.
fn share(msgs: &[&Message], budget: usize) -> usize {
    let total: usize = msgs.iter().map(|m| m.content.len()).sum();
    if total <= budget {
        usize::MAX
    } else {
        (budget / msgs.len().max(1)).max(MIN_MESSAGE_BYTES)
    }
}

/// The priority of a message from the lead that stopped the agent's last turn.
pub const URGENT: &str = "urgent";

/// This run's task: an urgent message first (it stopped the turn before this one).
pub fn task(cfg: &RunConfig, ctx: &Context) -> String {
    let mut p = String::new();
    let (urgent, rest): (Vec<&Message>, Vec<&Message>) =
        ctx.inbox.iter().partition(|m| m.priority == URGENT);
    if !urgent.is_empty() {
        p.push_str("## Urgent: this stopped your last turn; act on it first\n");
        let max = share(&urgent, INBOX_PROMPT_BYTES);
        for m in &urgent {
            line(&mut p, m, max, "my_inbox");
        }
        if !rest.is_empty() {
            p.push('\n');
        }
    }
    if ctx.inbox.is_empty() {
        p.push_str("## Your inbox\nNo new messages.\n");
    } else if !rest.is_empty() {
        let _ = writeln!(p, "## Your inbox ({} new, oldest first)", rest.len());
        let inbox = rest;
        let max = share(&inbox, INBOX_PROMPT_BYTES);
        for m in inbox {
            line(&mut p, m, max, "my_inbox");
        }
        if ctx.remaining > 0 {
            let _ = writeln!(
                p,
                "({} more wait: call my_inbox after handling these.)",
                ctx.remaining
            );
        }
    }
    let inbox_ids: Vec<&str> = ctx.inbox.iter().map(|m| m.id.as_str()).collect();
    let others: Vec<&Message> = ctx
        .recent
        .iter()
        .filter(|m| !inbox_ids.contains(&m.id.as_str()))
        .collect();
    if !others.is_empty() {
        p.push_str("\n## Recent channel activity\n");
        let max = share(&others, RECENT_PROMPT_BYTES);
        for m in others {
            line(&mut p, m, max, "channel_read");
        }
    }
    if let Some(doc) = &ctx.document {
        p.push_str("\n## Shared document notes.md\n");
        let _ = writeln!(p, "{}", super::clip(doc, DOC_PROMPT_BYTES));
        if doc.len() > DOC_PROMPT_BYTES {
            p.push_str("(truncated; read the rest with team_doc_read)\n");
        }
    }
    p.push_str("\n## Now\n");
    match cfg.prompt.as_deref() {
        Some(extra) if !extra.trim().is_empty() => {
            let _ = writeln!(p, "{extra}");
        }
        _ if ctx.inbox.is_empty() => {
            p.push_str("Nothing is addressed to you. Check whether anything needs doing; otherwise finish.\n")
        }
        _ => p.push_str(
            "Handle your inbox: do what is asked, reply with channel_send where someone waits for an answer, then finish.\n",
        ),
    }
    if ctx.inbox.iter().any(|m| m.result_schema.is_some()) {
        p.push_str(
            "End by submitting each result asked of you with result_submit. If it is refused, fix the fields \
             it names and submit again.\n",
        );
    }
    p
}

/// System prompt and task in one text, for backends without a system channel.
pub fn combined(cfg: &RunConfig, ctx: &Context) -> String {
    format!("{}\n\n{}", system(cfg), task(cfg, ctx))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(i: usize, text: &str) -> Message {
        Message {
            id: format!("m{i:02}"),
            from: "bob".into(),
            content: text.into(),
            created_at: String::new(),
            priority: "normal".into(),
            dm: false,
            to: None,
            result_schema: None,
        }
    }

    #[test]
    fn the_largest_prompt_still_fits_in_one_command_line_argument() {
        let cfg: RunConfig = serde_json::from_value(serde_json::json!({
            "run_id": "r", "agent": "alice", "workflow": "@w:main", "backend": "gemini",
            "model": null, "system": "é".repeat(40_000), "cwd": "/tmp", "state_dir": "/tmp",
            "scratch": "/tmp/s",
            "idle_ms": 1000, "url": "http://x", "token": "t", "session_id": null,
            "trigger": "message", "prompt": null, "max_steps": 1,
        }))
        .unwrap();
        // The most a run can read: a full page of the longest messages in 4-byte characters.
        let long = "😀".repeat(4_000);
        let ctx = Context {
            inbox: (0..50).map(|i| msg(i, &long)).collect(),
            remaining: 3,
            recent: (50..60).map(|i| msg(i, &long)).collect(),
            document: Some("d".repeat(100_000)),
        };
        let all = combined(&cfg, &ctx);
        assert!(all.len() < 128 * 1024, "{} bytes", all.len());
        // Every message is still there by id, says it was cut and where to read it.
        for i in 0..60 {
            assert!(
                all.contains(&format!("- m{i:02} from @bob")),
                "m{i:02} missing"
            );
        }
        assert_eq!(all.matches("my_inbox shows it whole").count(), 50);
        assert_eq!(all.matches("channel_read shows it whole").count(), 10);
        assert!(all.contains("role description was cut"));
        // A small inbox is shown as it is.
        let ctx = Context {
            inbox: vec![msg(1, "please review")],
            ..Default::default()
        };
        let t = task(&cfg, &ctx);
        assert!(t.contains("- m01 from @bob: please review\n"), "{t}");
        assert!(!t.contains("cut"));
        assert!(
            !t.contains("result_submit"),
            "nothing asks for a result: {t}"
        );
        // A message that asks for a result shows its schema and how to answer it.
        let mut asking = msg(2, "review it");
        asking.result_schema = Some(serde_json::json!({"type": "object"}));
        let ctx = Context {
            inbox: vec![asking],
            ..Default::default()
        };
        let t = task(&cfg, &ctx);
        assert!(
            t.contains("call result_submit {\"ask\": \"m02\", \"result\": ...} with JSON fitting this schema: {\"type\":\"object\"}"),
            "{t}"
        );
        assert!(
            t.contains("End by submitting each result asked of you"),
            "{t}"
        );
    }

    #[test]
    fn an_urgent_message_opens_the_task() {
        let cfg: RunConfig = serde_json::from_value(serde_json::json!({
            "run_id": "r", "agent": "alice", "workflow": "@w:main", "backend": "sdk",
            "model": null, "system": null, "cwd": "/tmp", "state_dir": "/tmp",
            "scratch": "/tmp/s",
            "idle_ms": 1000, "url": "http://x", "token": "t", "session_id": null,
            "trigger": "message", "prompt": null, "max_steps": 1,
        }))
        .unwrap();
        let mut urgent = msg(2, "use main");
        urgent.priority = URGENT.into();
        let check = |inbox: Vec<Message>, want: &str| {
            let ctx = Context {
                inbox,
                ..Default::default()
            };
            let t = task(&cfg, &ctx);
            assert!(t.starts_with(want), "{t}");
        };
        check(
            vec![msg(1, "build it"), urgent.clone()],
            "## Urgent: this stopped your last turn; act on it first\n- m02 from @bob [URGENT]: use main\n\n\
             ## Your inbox (1 new, oldest first)\n- m01 from @bob: build it\n",
        );
        check(
            vec![urgent],
            "## Urgent: this stopped your last turn; act on it first\n- m02 from @bob [URGENT]: use main\n\n## Now\n",
        );
        check(vec![], "## Your inbox\nNo new messages.\n");
    }
}
