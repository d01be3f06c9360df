//! Every contract as one plain English sentence (contract_list shows them, and a
//! refusal without its own reason quotes it), so a person reads what the kernel
//! will do without reading YAML.

use super::*;

pub fn sentence(c: &Contract) -> String {
    let scope = match &c.workflow {
        None if c.org.is_some() => format!(
            " (in every instance run within the organisation @{})",
            c.org.as_deref().unwrap_or_default()
        ),
        None => String::new(),
        Some(w) if w.contains(':') => format!(" (in @{w})"),
        Some(w) => format!(" (in every @{w} instance)"),
    };
    format!(
        "{}{}, {}{scope}.",
        subject(&c.when),
        rate(c.rate),
        action(c)
    )
}

/// " more than 10 times within 1h": the events a rate lets through first.
fn rate(r: Option<Rate>) -> String {
    match r {
        None => String::new(),
        Some(Rate { more_than, within }) => format!(
            " more than {more_than} time{} within {}",
            if more_than == 1 { "" } else { "s" },
            humantime::format_duration(within)
        ),
    }
}

/// "When …": the event a contract is about.
/// "When a "push" event at a hook matching "git*" arrives".
fn hook_subject(hook: &Option<String>, kind: &Option<String>) -> String {
    format!(
        "When {}{} arrives",
        kind.as_ref()
            .map(|k| format!("a \"{k}\" event"))
            .unwrap_or_else(|| "an event".into()),
        hook.as_ref()
            .map(|h| format!(" at a hook matching \"{h}\""))
            .unwrap_or_else(|| " at a hook".into())
    )
}

/// A `message` event in words.
fn message(
    from: Option<&str>,
    to: Option<&str>,
    text: Option<&TextPattern>,
    urgent: bool,
) -> String {
    let mut s = format!(
        "When {} sends {}",
        from.map(|f| format!("@{f}"))
            .unwrap_or_else(|| "anyone".into()),
        if urgent {
            "an urgent message (one that stops its addressee's turn)"
        } else {
            "a message"
        }
    );
    if let Some(t) = to {
        s.push_str(&format!(" to @{t}"));
    }
    if let Some(t) = text {
        s.push_str(&format!(" whose text matches /{t}/"));
    }
    s
}

fn subject(when: &When) -> String {
    let who = |agent: &Option<String>, default: &str| match agent {
        Some(a) => format!("agent {a}"),
        None => default.to_owned(),
    };
    match when {
        When::ToolRequest {
            tool,
            matches,
            agent,
        } => {
            let what = match tool {
                None => "to use a tool".to_owned(),
                Some(ToolClass::Read) => "to read a file".into(),
                Some(ToolClass::Edit) => "to create or change a file".into(),
                Some(ToolClass::Shell) => "to run a command".into(),
                Some(ToolClass::Web) => "to use the web".into(),
                Some(ToolClass::Mcp) => "to call one of its own MCP servers".into(),
            };
            let m = matches
                .as_ref()
                .map(|m| format!(" matching \"{m}\""))
                .unwrap_or_default();
            format!("When {} asks {what}{m}", who(agent, "any agent"))
        }
        When::Message {
            from,
            to,
            text,
            urgent,
        } => message(from.as_deref(), to.as_deref(), text.as_ref(), *urgent),
        When::Spend {
            usd,
            tokens,
            per,
            agent,
        } => {
            let limit = match (usd, tokens) {
                (Some(u), Some(t)) => format!("more than ${u} or {t} tokens"),
                (Some(u), None) => format!("more than ${u}"),
                (None, Some(t)) => format!("more than {t} tokens"),
                (None, None) => "anything".into(),
            };
            match per {
                Per::Agent => format!("When {} has spent {limit}", who(agent, "an agent")),
                Per::Workflow => format!("When the workflow has spent {limit}"),
            }
        }
        When::RunEnd { status, agent } => format!(
            "When a run of {} ends{}",
            who(agent, "any agent"),
            status.as_ref().map(|s| format!(" {s}")).unwrap_or_default()
        ),
        When::DocWrite { file, agent } => format!(
            "When {} writes {}",
            who(agent, "any agent"),
            file.as_ref()
                .map(|f| format!("a document matching \"{f}\""))
                .unwrap_or_else(|| "a document".into())
        ),
        When::Merge { agent, into, mode } => merge_subject(agent, into, mode),
        When::Step { on } => format!("When {}", crate::steps::on_words(on)),
        When::AgentNew { by, backend } => format!(
            "When {} makes an agent of its own{}",
            who(by, "an agent"),
            backend
                .as_ref()
                .map(|b| format!(" with backend {b}"))
                .unwrap_or_default()
        ),
        When::Hook { hook, kind } => hook_subject(hook, kind),
        When::Task {
            state,
            title,
            agent,
        } => format!(
            "When {} moves {} to {}",
            who(agent, "any agent"),
            title
                .as_ref()
                .map(|t| format!("a task matching \"{t}\""))
                .unwrap_or_else(|| "a task".into()),
            state.as_deref().unwrap_or("any state")
        ),
    }
}

/// "When agent bob's branch is merged into a branch matching "main" (mode squash)".
fn merge_subject(agent: &Option<String>, into: &Option<String>, mode: &Option<String>) -> String {
    format!(
        "When {} is merged into {}{}",
        agent
            .as_ref()
            .map(|a| format!("agent {a}'s branch"))
            .unwrap_or_else(|| "an agent's branch".into()),
        into.as_ref()
            .map(|i| format!("a branch matching \"{i}\""))
            .unwrap_or_else(|| "any branch".into()),
        mode.as_ref()
            .map(|m| format!(" (mode {m})"))
            .unwrap_or_default()
    )
}

/// What the kernel does when the event happens.
fn action(c: &Contract) -> String {
    match &c.then {
        Then::Allow => match c.when {
            When::Message { urgent: true, .. } => {
                "let it be sent and deliver it directly (no routing)".to_owned()
            }
            When::Message { .. } => "deliver it directly (no routing)".to_owned(),
            _ => "allow it without asking anyone (what its permissions allow)".to_owned(),
        },
        Then::Deny { reason } => match reason {
            Some(r) => format!("refuse it: \"{r}\""),
            None => "refuse it".into(),
        },
        Then::RequireApproval {
            approvers,
            count,
            timeout,
            on_timeout,
        } => approval(&c.when, approvers, *count, *timeout, *on_timeout),
        Then::RequireVotes {
            votes,
            timeout,
            on_timeout,
        } => format!(
            "wait until {} of the members vote for it (a proposal, team_vote); if they have not decided \
             within {}, {}",
            match votes {
                Votes::Count(n) => n.to_string(),
                Votes::Share { .. } => votes.to_string(),
            },
            humantime::format_duration(*timeout),
            match on_timeout {
                OnTimeout::Deny => "refuse it",
                OnTimeout::Allow => "allow it",
            }
        ),
        Then::Notify { to } => format!(
            "tell {}",
            to.iter().map(|a| member(a)).collect::<Vec<_>>().join(", ")
        ),
        Then::Pause { reason } => {
            let r = reason
                .as_ref()
                .map(|r| format!(" (\"{r}\")"))
                .unwrap_or_default();
            match c.when {
                When::ToolRequest { .. } => {
                    format!("refuse it and pause the agent until it is resumed{r}")
                }
                _ => format!("pause the agent until it is resumed{r}"),
            }
        }
        Then::Route { to } => match to.as_slice() {
            [one] => format!("deliver it to @{one} instead, who forwards it or drops it"),
            _ => format!(
                "deliver it to {} in turn instead: each forwards it to the next or drops it, and what the \
                 last forwards is delivered",
                to.iter()
                    .map(|m| format!("@{m}"))
                    .collect::<Vec<_>>()
                    .join(", then ")
            ),
        },
        Then::Run {
            step,
            agent,
            prompt,
            ..
        } => {
            let shown: String = prompt.chars().take(80).collect();
            let more = if shown.len() < prompt.len() {
                "…"
            } else {
                ""
            };
            format!("run step {step}: @{agent} with \"{shown}{more}\"")
        }
    }
}

/// What a contract that requires an approval does: who must approve, how long
/// the run (or the agent's next runs) wait, and what happens if nobody decides.
fn approval(
    when: &When,
    approvers: &[String],
    count: usize,
    timeout: Duration,
    on_timeout: OnTimeout,
) -> String {
    let who = approvers.iter().map(|a| member(a)).collect::<Vec<_>>();
    let need = if approvers.len() == 1 {
        who[0].clone()
    } else if count == approvers.len() {
        format!("all of {}", who.join(", "))
    } else {
        format!("{count} of {}", who.join(", "))
    };
    let then = match on_timeout {
        OnTimeout::Deny => "refuse it",
        OnTimeout::Allow => "allow it",
    };
    let held = match when {
        When::Spend { .. } => "hold the agent's next runs until",
        When::Merge { .. } => "hold the merge until",
        When::AgentNew { .. } => "hold the new agent until",
        When::Task { .. } => "hold the move until",
        When::Hook { .. } => "hold the delivery until",
        _ => "wait until",
    };
    format!(
        "{held} {need} approve{}; if nobody decides within {}, {then}",
        if approvers.len() == 1 && approvers[0] != crate::names::LEAD {
            "s"
        } else {
            ""
        },
        humantime::format_duration(timeout)
    )
}

fn member(m: &str) -> String {
    if m == crate::names::LEAD {
        "you (the lead)".into()
    } else {
        format!("@{m}")
    }
}
