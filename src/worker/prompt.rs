//! The prompt a run gives its model: built here, in the worker, from what it read
//! over MCP (the kernel never builds prompts).
//!
//! Two parts: the system prompt (the agent's role plus how to work with the team,
//! passed through each backend's system-prompt channel) and the task (this run's
//! inbox, the recent channel and the main document).

use super::context::{Context, DOC_PROMPT_BYTES, Message};
use super::protocol::RunConfig;
use std::fmt::Write;

/// The agent's role followed by the team rules every backend gets.
pub fn system(cfg: &RunConfig) -> String {
    let role = cfg
        .system
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| format!("You are {}, a member of an AI agent team.", cfg.agent));
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

fn line(out: &mut String, m: &Message) {
    let mut tags = String::new();
    if m.dm {
        tags.push_str(" [DM]");
    }
    if m.priority == "high" {
        tags.push_str(" [HIGH]");
    }
    let _ = writeln!(out, "- {} from @{}{tags}: {}", m.id, m.from, m.content);
}

/// This run's task.
pub fn task(cfg: &RunConfig, ctx: &Context) -> String {
    let mut p = String::new();
    if ctx.inbox.is_empty() {
        p.push_str("## Your inbox\nNo new messages.\n");
    } else {
        let _ = writeln!(p, "## Your inbox ({} new, oldest first)", ctx.inbox.len());
        for m in &ctx.inbox {
            line(&mut p, m);
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
        for m in others {
            line(&mut p, m);
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
    p
}

/// System prompt and task in one text, for backends without a system channel.
pub fn combined(cfg: &RunConfig, ctx: &Context) -> String {
    format!("{}\n\n{}", system(cfg), task(cfg, ctx))
}
