//! Reading a contract from JSON (the tools) or YAML turned into JSON (workflow
//! files). Every error names the field and says what to write instead; unknown
//! fields are refused, so a misspelt filter never silently matches everything.

use super::*;
use serde_json::{Map, Value};

use super::fields::{glob_field, members, object, only, text, word};

type R<T> = Result<T, String>;

const EVENTS: &str =
    "tool_request, message, spend, run_end, doc_write, merge, agent_new, task or hook";
const ACTIONS: &str = "allow, deny, require_approval, require_votes, notify, pause or route";
const NAME_HELP: &str = "1 to 64 letters, digits, '-', '_' or '.'";

/// Parses a list of contracts (a workflow's `contracts:`); errors are prefixed with
/// `contracts[i]`.
pub fn parse_list(v: &Value) -> R<Vec<Contract>> {
    let Value::Array(items) = v else {
        return Err(
            "contracts: write a list of contracts (- name: ... when: ... then: ...)".into(),
        );
    };
    if items.len() > MAX_CONTRACTS {
        return Err(format!("contracts: at most {MAX_CONTRACTS}"));
    }
    let mut out: Vec<Contract> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let c = parse(item).map_err(|e| format!("contracts[{i}].{e}"))?;
        if out.iter().any(|o| o.name == c.name) {
            return Err(format!(
                "contracts[{i}].name: {:?} is used twice; give each contract its own name",
                c.name
            ));
        }
        out.push(c);
    }
    Ok(out)
}

/// The design document's names for a contract's fields (`condition`, `action`,
/// `scope`), with what is written now. They are refused, not read as aliases: the
/// design's values are strings (`"bash_tool_call"`, `"route(@reviewer, @coder)"`)
/// that are not the objects `when` and `then` take, and `action` is already the
/// key inside `then`.
pub fn renamed_field(k: &str) -> Option<&'static str> {
    Some(match k {
        "condition" => {
            "the design's `condition` is written `when` here, an event and its filters, e.g. \
             when: {event: tool_request, tool: shell}"
        }
        "action" => {
            "the design's `action` is written `then` here, e.g. then: {action: route, to: [reviewer, coder]}"
        }
        "scope" => {
            "the design's `scope` is written `org` here (an organisation; leave it out for global), or \
             `workflow` for one workflow"
        }
        _ => return None,
    })
}

/// Parses one contract. Errors start with the field's path (`when.tool: ...`).
pub fn parse(v: &Value) -> R<Contract> {
    let o = object(v, "contract")?;
    if let Some((k, hint)) = o.keys().find_map(|k| Some((k, renamed_field(k)?))) {
        return Err(format!("{k}: {hint}"));
    }
    only(
        o,
        "",
        &["name", "description", "workflow", "org", "when", "then"],
    )?;
    let name = text(o, "name")?.ok_or("name: every contract needs a name")?;
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(format!(
            "name: {name:?} is not a contract name; use {NAME_HELP}"
        ));
    }
    let description = text(o, "description")?;
    if description
        .as_ref()
        .is_some_and(|d| d.chars().count() > 500)
    {
        return Err("description: at most 500 characters".into());
    }
    let workflow = text(o, "workflow")?.map(|w| w.trim_start_matches('@').to_owned());
    if let Some(w) = &workflow
        && crate::names::WorkflowRef::parse(&format!("@{w}")).is_err()
    {
        return Err(format!(
            "workflow: {w:?} is not a workflow; write \"review\" (every instance) or \"review:pr-1\""
        ));
    }
    let org = match text(o, "org")? {
        None => None,
        Some(g) => match crate::names::org_name(&g).map_err(|e| format!("org: {e}"))? {
            None => {
                return Err(
                    "org: @global has no contracts of its own; leave org out for a contract \
                            in force in every instance"
                        .into(),
                );
            }
            some => some,
        },
    };
    if org.is_some() && workflow.is_some() {
        return Err(
            "org: a contract is bound to an organisation or to a workflow, not both; leave out one"
                .into(),
        );
    }
    let when_v = o
        .get("when")
        .ok_or("when: say which event, e.g. {event: tool_request, tool: shell}")?;
    let (when, rate) = when(when_v)
        .and_then(|w| Ok((w, rate(when_v)?)))
        .map_err(|e| format!("when.{e}"))?;
    let then = then(
        o.get("then")
            .ok_or("then: say what to do, e.g. {action: deny, reason: ...}")?,
    )
    .map_err(|e| format!("then.{e}"))?;
    fits(&when, &then)?;
    urgent_sender(&when, &then)?;
    if rate.is_some() {
        fits_rate(&when, &then)?;
    }
    Ok(Contract {
        name,
        description,
        workflow,
        org,
        when,
        rate,
        then,
    })
}

/// An allow of urgent messages names its one sender literally: a glob (or none)
/// would let whoever takes a matching name, a sub-agent included, stop turns.
fn urgent_sender(when: &When, then: &Then) -> R<()> {
    let When::Message {
        urgent: true, from, ..
    } = when
    else {
        return Ok(());
    };
    if !matches!(then, Then::Allow) {
        return Ok(());
    }
    match from {
        Some(f) if !f.is_empty() && !f.contains(['*', '?', '[', ']']) => Ok(()),
        _ => Err(format!(
            "when.from: an allow of urgent messages names one member, no glob (given {}); e.g. \
             {{event: message, from: reviewer, urgent: true}}, one contract per member",
            from.as_deref().unwrap_or("none")
        )),
    }
}

/// A `message` event's filters.
fn message(o: &Map<String, Value>) -> R<When> {
    let known = [
        "event",
        "from",
        "to",
        "text",
        "urgent",
        "more_than",
        "within",
    ];
    only(o, "", &known)?;
    let text = text(o, "text")?
        .map(|re| TextPattern::new(&re))
        .transpose()?;
    let urgent = match o.get("urgent") {
        None | Some(Value::Null) => false,
        Some(v) => v.as_bool().ok_or(
            "urgent: true (only urgent messages) or false; e.g. {event: message, from: reviewer, urgent: true}",
        )?,
    };
    Ok(When::Message {
        from: glob_field(o, "from")?,
        to: glob_field(o, "to")?,
        text,
        urgent,
    })
}

fn when(v: &Value) -> R<When> {
    let o = object(v, "when")?;
    let event = text(o, "event")?.ok_or(format!("event: name one of {EVENTS}"))?;
    let agent = || glob_field(o, "agent");
    Ok(match event.as_str() {
        "tool_request" => {
            only(
                o,
                "",
                &["event", "tool", "match", "agent", "more_than", "within"],
            )?;
            let tool = tool_class(o)?;
            When::ToolRequest {
                tool,
                matches: glob_field(o, "match")?,
                agent: agent()?,
            }
        }
        "message" => message(o)?,
        "spend" => {
            only(o, "", &["event", "usd", "tokens", "per", "agent"])?;
            let usd = match o.get("usd") {
                None | Some(Value::Null) => None,
                Some(v) => Some(
                    v.as_f64()
                        .filter(|x| x.is_finite() && *x >= 0.0)
                        .ok_or("usd: a number of dollars, e.g. 5 or 0.5")?,
                ),
            };
            let tokens = match o.get("tokens") {
                None | Some(Value::Null) => None,
                Some(v) => Some(
                    v.as_u64()
                        .ok_or("tokens: a whole number of tokens, e.g. 100000")?,
                ),
            };
            if usd.is_none() && tokens.is_none() {
                return Err("usd: a spend contract needs a threshold: usd or tokens".into());
            }
            let per = match text(o, "per")?.as_deref() {
                None | Some("workflow") => Per::Workflow,
                Some("agent") => Per::Agent,
                Some(p) => return Err(format!("per: {p:?}; use agent or workflow")),
            };
            When::Spend {
                usd,
                tokens,
                per,
                agent: agent()?,
            }
        }
        "run_end" => {
            only(o, "", &["event", "status", "agent"])?;
            When::RunEnd {
                status: word(o, "status", &["succeeded", "failed", "stopped", "lost"])?,
                agent: agent()?,
            }
        }
        "doc_write" => {
            only(o, "", &["event", "file", "agent"])?;
            When::DocWrite {
                file: glob_field(o, "file")?,
                agent: agent()?,
            }
        }
        "merge" => merge_when(o)?,
        "agent_new" => agent_new_when(o)?,
        "task" => task_when(o)?,
        "hook" => {
            only(o, "", &["event", "hook", "kind"])?;
            When::Hook {
                hook: glob_field(o, "hook")?,
                kind: glob_field(o, "kind")?,
            }
        }
        "step" => step_when(o)?,
        other => return Err(format!("event: unknown event {other:?}; use {EVENTS}")),
    })
}

/// `when.more_than` and `when.within`: a rate, both or neither (the event's own
/// `only` refuses them where no rate can be counted).
fn rate(v: &Value) -> R<Option<Rate>> {
    let o = object(v, "when")?;
    let more_than = match o.get("more_than") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|n| *n <= u64::from(MAX_RATE_COUNT))
                .ok_or(format!(
                    "more_than: a whole number of events, 0 to {MAX_RATE_COUNT}, e.g. 10"
                ))? as u32,
        ),
    };
    let within = text(o, "within")?;
    let (more_than, within) = match (more_than, within) {
        (None, None) => return Ok(None),
        (Some(n), Some(w)) => (n, w),
        (Some(n), None) => {
            return Err(format!(
                "within: a rate needs its window too, e.g. more_than: {n}, within: 1h"
            ));
        }
        (None, Some(w)) => {
            return Err(format!(
                "more_than: a rate needs its count too, e.g. more_than: 10, within: {w}"
            ));
        }
    };
    let within = humantime::parse_duration(&within).map_err(|_| {
        format!("within: {within:?} is not a duration; write e.g. \"1h\" or \"10m\"")
    })?;
    if within < Duration::from_secs(1) || within > MAX_RATE_WINDOW {
        return Err("within: between 1s and 7d".into());
    }
    Ok(Some(Rate { more_than, within }))
}

/// The actions a contract with a rate can take: what stops or holds the events
/// past it, or tells someone. A message cannot be held for an approval or pause
/// its sender; an allow or a route past a rate would say nothing useful.
fn fits_rate(when: &When, then: &Then) -> R<()> {
    let ok: &[&str] = match when {
        When::ToolRequest { .. } => &[
            "deny",
            "pause",
            "require_approval",
            "require_votes",
            "notify",
        ],
        _ => &["deny", "notify"],
    };
    if ok.contains(&then.action()) {
        return Ok(());
    }
    Err(format!(
        "then.action: a {} contract with a rate can {}, not {}",
        when.event(),
        ok.join(", "),
        then.action()
    ))
}

/// `when.tool`: the class of tool requests a contract is about.
fn tool_class(o: &Map<String, Value>) -> R<Option<ToolClass>> {
    Ok(match text(o, "tool")?.as_deref() {
        None => None,
        Some("read") => Some(ToolClass::Read),
        Some("edit") => Some(ToolClass::Edit),
        Some("shell") => Some(ToolClass::Shell),
        Some("web") => Some(ToolClass::Web),
        Some("mcp") => Some(ToolClass::Mcp),
        Some("team") => {
            return Err(
                "tool: team tools are governed by message and doc_write contracts, not tool_request"
                    .into(),
            );
        }
        Some(t) => {
            return Err(format!(
                "tool: unknown tool class {t:?}; use read, edit, shell, web or mcp"
            ));
        }
    })
}

/// `when` of a merge contract.
fn merge_when(o: &Map<String, Value>) -> R<When> {
    only(o, "", &["event", "agent", "into", "mode"])?;
    Ok(When::Merge {
        agent: glob_field(o, "agent")?,
        into: glob_field(o, "into")?,
        mode: word(o, "mode", &["auto", "ff", "merge", "squash"])?,
    })
}

/// `when` of an agent_new contract (an agent making an agent of its own).
fn agent_new_when(o: &Map<String, Value>) -> R<When> {
    only(o, "", &["event", "by", "backend"])?;
    Ok(When::AgentNew {
        by: glob_field(o, "by")?,
        backend: text(o, "backend")?,
    })
}

/// `when` of a task contract.
fn task_when(o: &Map<String, Value>) -> R<When> {
    only(o, "", &["event", "agent", "state", "title"])?;
    Ok(When::Task {
        agent: glob_field(o, "agent")?,
        state: word(o, "state", &["open", "done", "failed", "cancelled"])?,
        title: glob_field(o, "title")?,
    })
}

fn then(v: &Value) -> R<Then> {
    let o = object(v, "then")?;
    let action = text(o, "action")?.ok_or(format!("action: name one of {ACTIONS}"))?;
    let reason = || -> R<Option<String>> {
        let r = text(o, "reason")?;
        if r.as_ref()
            .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
        {
            return Err(format!("reason: at most {MAX_REASON_CHARS} characters"));
        }
        Ok(r)
    };
    Ok(match action.as_str() {
        "allow" => {
            only(o, "", &["action"])?;
            Then::Allow
        }
        "deny" => {
            only(o, "", &["action", "reason"])?;
            Then::Deny { reason: reason()? }
        }
        "pause" => {
            only(o, "", &["action", "reason"])?;
            Then::Pause { reason: reason()? }
        }
        "require_approval" => {
            only(
                o,
                "",
                &["action", "approvers", "count", "timeout", "on_timeout"],
            )?;
            let approvers = match o.get("approvers") {
                None | Some(Value::Null) => vec![crate::names::LEAD.to_owned()],
                Some(v) => members(v, "approvers")?,
            };
            let count = match o.get("count") {
                None | Some(Value::Null) => 1,
                Some(v) => v
                    .as_u64()
                    .filter(|n| *n >= 1)
                    .ok_or("count: how many approvers must approve, at least 1")?
                    as usize,
            };
            if count > approvers.len() {
                return Err(format!(
                    "count: {count} approvals needed but only {} approver(s) named; lower count or name more approvers",
                    approvers.len()
                ));
            }
            let (timeout, on_timeout) = deadline(o)?;
            Then::RequireApproval {
                approvers,
                count,
                timeout,
                on_timeout,
            }
        }
        "require_votes" => {
            only(o, "", &["action", "votes", "timeout", "on_timeout"])?;
            let votes = match o.get("votes") {
                Some(Value::Number(n)) => n.to_string(),
                Some(Value::String(s)) => s.clone(),
                _ => {
                    return Err(
                        "votes: how many of the members must vote for it: 2, or a share such as \"2/3\""
                            .into(),
                    );
                }
            };
            let votes = votes.parse::<Votes>().map_err(|e| format!("votes: {e}"))?;
            let (timeout, on_timeout) = deadline(o)?;
            Then::RequireVotes {
                votes,
                timeout,
                on_timeout,
            }
        }
        "notify" => {
            only(o, "", &["action", "to"])?;
            let to = match o.get("to") {
                None | Some(Value::Null) => vec![crate::names::LEAD.to_owned()],
                Some(v) => members(v, "to")?,
            };
            Then::Notify { to }
        }
        "route" => {
            only(o, "", &["action", "to"])?;
            let to = members(
                o.get("to")
                    .ok_or("to: the member who gets the message first, or members in order")?,
                "to",
            )?;
            Then::Route { to }
        }
        "run" => run_then(o)?,
        other => return Err(format!("action: unknown action {other:?}; use {ACTIONS}")),
    })
}

/// `when: {event: step, on: [...]}`: a step's events.
fn step_when(o: &Map<String, Value>) -> R<When> {
    only(o, "", &["event", "on"])?;
    let items = match o.get("on") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        _ => return Err("on: the events the step waits for, a non-empty list".into()),
    };
    let on = items
        .iter()
        .enumerate()
        .map(|(i, v)| crate::steps::On::from_json(v).map_err(|e| format!("on[{i}]: {e}")))
        .collect::<R<Vec<_>>>()?;
    Ok(When::Step { on })
}

/// `then: {action: run, step, agent, prompt, result?}`: a step's run (and the
/// schema of the result it asks for).
fn run_then(o: &Map<String, Value>) -> R<Then> {
    only(o, "", &["action", "step", "agent", "prompt", "result"])?;
    let need =
        |k: &str| text(o, k)?.ok_or_else(|| format!("{k}: a run names its step, agent and prompt"));
    let result = match o.get("result") {
        None | Some(Value::Null) => None,
        Some(v) => {
            Some(crate::result_schema::ResultSchema::parse(v).map_err(|e| format!("result: {e}"))?)
        }
    };
    Ok(Then::Run {
        step: need("step")?,
        agent: need("agent")?,
        prompt: need("prompt")?,
        result,
    })
}

/// `timeout` and `on_timeout` of an approval or a vote.
fn deadline(o: &Map<String, Value>) -> R<(Duration, OnTimeout)> {
    let timeout = match text(o, "timeout")? {
        None => DEFAULT_APPROVAL_TIMEOUT,
        Some(t) => humantime::parse_duration(&t).map_err(|_| {
            format!("timeout: {t:?} is not a duration; write e.g. \"10m\" or \"1h\"")
        })?,
    };
    if timeout < Duration::from_secs(1) || timeout > MAX_APPROVAL_TIMEOUT {
        return Err("timeout: between 1s and 24h".into());
    }
    let on_timeout = match text(o, "on_timeout")?.as_deref() {
        None | Some("deny") => OnTimeout::Deny,
        Some("allow") => OnTimeout::Allow,
        Some(x) => return Err(format!("on_timeout: {x:?}; use deny or allow")),
    };
    Ok((timeout, on_timeout))
}

/// Which actions make sense for which event (the table in the module docs).
fn fits(when: &When, then: &Then) -> R<()> {
    let ok: &[&str] = match when {
        When::ToolRequest { .. } => &[
            "allow",
            "deny",
            "require_approval",
            "require_votes",
            "notify",
            "pause",
        ],
        When::Message { .. } => &["allow", "deny", "notify", "route"],
        When::Spend { .. } => &["require_approval", "notify", "pause"],
        When::RunEnd { .. } => &["notify", "pause"],
        When::DocWrite { .. } => &["allow", "deny", "notify"],
        When::Merge { .. } => &[
            "allow",
            "deny",
            "require_approval",
            "require_votes",
            "notify",
        ],
        When::Task { .. } => &[
            "allow",
            "deny",
            "require_approval",
            "require_votes",
            "notify",
        ],
        When::Step { .. } => &["run"],
        When::AgentNew { .. } => &["allow", "deny", "require_approval", "notify"],
        When::Hook { .. } => &["allow", "deny", "require_approval", "notify"],
    };
    if ok.contains(&then.action()) {
        return Ok(());
    }
    let hint = match (when, then) {
        (When::Message { .. }, Then::RequireApproval { .. }) => {
            " (to have messages reviewed, route them to the reviewer: {action: route, to: reviewer})"
        }
        (When::Spend { .. }, Then::Deny { .. }) => " (pause stops the agent until it is resumed)",
        _ => "",
    };
    Err(format!(
        "then.action: {} {} contract can {}, not {}{hint}",
        if when.event().starts_with('a') {
            "an"
        } else {
            "a"
        },
        when.event(),
        ok.join(", "),
        then.action()
    ))
}
