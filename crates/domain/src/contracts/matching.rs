//! Whether a contract's `when` matches an event.

use super::*;

/// Whether a contract's `when` matches an event.
pub fn matches(c: &Contract, e: &Event<'_>) -> bool {
    match (&c.when, e) {
        (
            When::ToolRequest { tool, matches, .. },
            Event::Tool {
                agent,
                request,
                reached,
            },
        ) => {
            c.agent_matches(agent)
                && tool.is_none_or(|t| t.kind() == request.kind())
                && request.kind() != Kind::Team
                && matches
                    .as_deref()
                    .is_none_or(|g| tool_detail_matches(g, request, *reached, &c.then))
        }
        (
            When::Message {
                to, text, urgent, ..
            },
            Event::Message {
                from,
                to: rcpt,
                text: t,
                urgent: u,
            },
        ) => {
            (!urgent || *u)
                && c.agent_matches(from)
                && to.as_deref().is_none_or(|g| {
                    rcpt.iter()
                        .any(|r| glob(&g.to_ascii_lowercase(), &r.to_ascii_lowercase()))
                })
                && text.as_ref().is_none_or(|re| re.is_match(t))
        }
        (
            When::Spend {
                usd, tokens, per, ..
            },
            Event::Spend {
                agent,
                agent_usd,
                agent_tokens,
                workflow_usd,
                workflow_tokens,
            },
        ) => {
            let (u, t) = match per {
                Per::Agent => (*agent_usd, *agent_tokens),
                Per::Workflow => (*workflow_usd, *workflow_tokens),
            };
            c.agent_matches(agent) && (usd.is_some_and(|x| u > x) || tokens.is_some_and(|x| t > x))
        }
        (When::RunEnd { status, .. }, Event::RunEnd { agent, status: s }) => {
            c.agent_matches(agent) && status.as_deref().is_none_or(|x| x == *s)
        }
        (When::DocWrite { file, .. }, Event::DocWrite { agent, file: f }) => {
            c.agent_matches(agent) && file.as_deref().is_none_or(|g| glob(g, f))
        }
        (
            When::Merge { into, mode, .. },
            Event::Merge {
                agent,
                into: i,
                mode: m,
            },
        ) => {
            c.agent_matches(agent)
                && into.as_deref().is_none_or(|g| glob(g, i))
                && mode.as_deref().is_none_or(|x| x == *m)
        }
        (When::AgentNew { backend, .. }, Event::AgentNew { by, backend: b, .. }) => {
            c.agent_matches(by) && backend.as_deref().is_none_or(|x| x == *b)
        }
        (
            When::Task { state, title, .. },
            Event::Task {
                agent,
                state: s,
                title: t,
            },
        ) => {
            c.agent_matches(agent)
                && state.as_deref().is_none_or(|x| x == *s)
                && title.as_deref().is_none_or(|g| glob(g, t))
        }
        (When::Hook { hook, kind }, Event::Hook { hook: h, kind: k }) => {
            hook.as_deref().is_none_or(|g| glob(g, h)) && kind.as_deref().is_none_or(|g| glob(g, k))
        }
        _ => false,
    }
}

/// A `match` glob against what a tool request is about. Shell commands are judged
/// by what they run (`crate::permissions::shell`): a deny (or approval, notify,
/// pause) matches when any program the line would run matches, or the line does
/// not show what runs, so `rm *` catches `cd x && /bin/rm y` and `sh -c 'rm y'`;
/// an allow only exempts a line whose every program matches. Paths: an allow
/// matches the path the request would reach (relative to the agent's folder when
/// inside it), so a symlink cannot borrow an exempt folder's name; anything else
/// matches that path or the path as given.
fn tool_detail_matches(g: &str, r: &Request, reached: Reached<'_>, then: &Then) -> bool {
    match r {
        Request::Shell { command } => {
            if matches!(then, Then::Allow) {
                shell::allow_matches(&[g], command)
            } else {
                shell::deny_matches(g, command)
            }
        }
        Request::Mcp { server, tool } => glob(g, &format!("{server}:{tool}")),
        Request::Read { path } | Request::Edit { path } => match reached {
            Reached::Unknown => !matches!(then, Then::Allow),
            Reached::At(p) if matches!(then, Then::Allow) => glob(g, p),
            Reached::At(p) => glob(g, path) || glob(g, p),
            Reached::AsGiven => glob(g, path),
        },
        other => glob(g, other.detail()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, sentence};
    use super::*;
    use serde_json::json;

    /// `urgent: true` matches only urgent messages (and still only its senders).
    #[test]
    fn an_urgent_rule_matches_only_urgent_messages() {
        let k = parse(
            &json!({"name": "reviewer-urgent", "when": {"event": "message",
            "from": "reviewer", "urgent": true}, "then": {"action": "allow"}}),
        )
        .unwrap();
        let to = vec!["coder".to_owned()];
        for (from, urgent, want) in [
            ("reviewer", true, true),
            ("reviewer", false, false),
            ("coder", true, false),
        ] {
            let e = Event::Message {
                from,
                to: &to,
                text: "stop",
                urgent,
            };
            assert_eq!(matches(&k, &e), want, "from {from}, urgent {urgent}");
        }
        assert_eq!(
            sentence(&k),
            "When @reviewer sends an urgent message (one that stops its addressee's turn), \
             let it be sent and deliver it directly (no routing)."
        );
    }

    /// An allow of urgent messages names one sender literally: none, `*` or a
    /// glob is refused at parse (a sub-agent could take a matching name).
    #[test]
    fn an_urgent_allow_names_its_one_sender() {
        let cases = [
            (json!({}), Err("(given none)")),
            (json!({"from": "*"}), Err("(given *)")),
            (json!({"from": "review*"}), Err("(given review*)")),
            (json!({"from": "rev?ewer"}), Err("(given rev?ewer)")),
            (json!({"from": "@reviewer"}), Ok(())),
        ];
        for (from, want) in cases {
            let mut when = json!({"event": "message", "urgent": true});
            when.as_object_mut()
                .unwrap()
                .extend(from.as_object().unwrap().clone());
            let v = json!({"name": "x", "when": when, "then": {"action": "allow"}});
            match (parse(&v), want) {
                (Ok(_), Ok(())) => {}
                (Err(e), Err(w)) => assert!(
                    e.starts_with(
                        "when.from: an allow of urgent messages names one member, no glob"
                    ) && e.contains(w),
                    "{v}: {e}"
                ),
                (got, want) => panic!("{v}: {got:?}, want {want:?}"),
            }
        }
        // A deny or notify of urgent messages may still name a glob.
        let deny = json!({"name": "x", "when": {"event": "message", "from": "*", "urgent": true},
            "then": {"action": "deny", "reason": "no"}});
        assert!(parse(&deny).is_ok());
    }
}
