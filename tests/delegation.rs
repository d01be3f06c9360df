//! Delegation through real sessions: an sdk agent allowed to delegate (against the
//! fake model) makes a mock sub-agent, asks it and uses its answer; an agent without
//! `delegate` neither sees nor may call the tools; the limits (backends,
//! permissions, depth, count, budget share) refuse with the reason; deleting the
//! parent takes its sub-agents and their workers with it; agent_new contracts deny
//! the making or hold it for an approval.

use crate::common;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const TOOLS: [&str; 3] = ["team_agent_ask", "team_agent_delete", "team_agent_new"];

/// An external agent `name` (a joined client plays it) with `delegate`, and its session.
async fn delegating(s: &InProcess, lead: &Client, name: &str, delegate: Value) -> Client {
    let mut a = json!({"name": name});
    if !delegate.is_null() {
        a["delegate"] = delegate;
    }
    external(s, lead, a).await
}

/// An external agent of this definition (`backend` added), and its joined session.
async fn external(s: &InProcess, lead: &Client, mut def: Value) -> Client {
    def["backend"] = json!("external");
    let name = def["name"].as_str().unwrap().to_owned();
    call(lead, "agent_new", def).await.ok();
    join(s, lead, &name, Proto::Modern).await
}

fn has_tools(names: &[String]) -> bool {
    TOOLS.iter().all(|t| names.iter().any(|n| n == t))
}

#[tokio::test]
async fn an_sdk_agent_makes_a_sub_agent_asks_it_and_uses_the_answer() {
    let llm = FakeLlm::start(Script::steps(
        &[
            (
                "team_agent_new",
                json!({"name": "scout", "backend": "mock",
                       "mock": [{"reply": "the build is green at 4f2a"}]}),
            ),
            (
                "team_agent_ask",
                json!({"name": "scout", "message": "is the build green?", "wait_seconds": 30}),
            ),
        ],
        "scout says the build is green",
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "boss", "backend": "sdk", "model": "claude-sonnet-4-5",
               "env": {"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test"},
               "delegate": {"agents": 2, "backends": ["mock"]}}),
    )
    .await
    .ok();
    let r = ask(&lead, "boss", "Is the build green?", 45).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["reply"]["final_text"], "scout says the build is green");

    let calls = llm.model_calls();
    assert_eq!(calls.len(), 3, "make, ask, answer");
    let offered = calls[0]["body"]["tools"].to_string();
    assert!(offered.contains("team_agent_new"), "{offered}");
    // The sub-agent's answer reaches the parent's next model call.
    let third = calls[2]["body"]["messages"].to_string();
    assert!(third.contains("the build is green at 4f2a"), "{third}");

    let scout = agent_named(&call(&lead, "agent_list", json!({})).await.ok(), "scout").clone();
    assert_eq!(scout["parent"], "boss", "{scout}");
    assert_eq!(scout["backend"], "mock");
    let lead_tools = tool_names(&lead).await;
    assert!(
        !lead_tools.iter().any(|t| t.starts_with("team_agent_")),
        "the lead has agent_new; an agent's own tools are not its"
    );
    s.stop().await;
}

#[tokio::test]
async fn an_agent_without_delegate_gets_tool_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let plain = delegating(&s, &lead, "plain", Value::Null).await;
    let names = tool_names(&plain).await;
    assert!(
        !names.iter().any(|t| t.starts_with("team_agent_")),
        "{names:?}"
    );
    for tool in TOOLS {
        let e = try_call(
            &plain,
            tool,
            json!({"name": "x", "backend": "mock", "message": "hi"}),
        )
        .await
        .expect_err("an unknown tool");
        assert!(
            e.to_string().contains(&format!("tool not found: {tool}")),
            "{e}"
        );
    }
    let boss = delegating(&s, &lead, "boss", json!({"agents": 1})).await;
    assert!(has_tools(&tool_names(&boss).await));
    // The lead grants it, and takes it back: the same session sees the change.
    let update = |d: Value| json!({"target": "plain", "delegate": d});
    call(&lead, "agent_update", update(json!({"agents": 1})))
        .await
        .ok();
    assert!(has_tools(&tool_names(&plain).await));
    call(&lead, "agent_update", update(json!("off"))).await.ok();
    assert!(!has_tools(&tool_names(&plain).await));
    let e = call(&lead, "agent_update", update(json!("on"))).await.err();
    assert!(e.contains("delegate: \"on\"; give \"off\""), "{e}");
    s.stop().await;
}

#[tokio::test]
async fn the_limits_refuse_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let delegate = json!({"agents": 1, "depth": 2, "backends": ["mock"],
                          "budget": {"max_tokens": 1000}});
    let boss = delegating(&s, &lead, "boss", delegate).await;
    let mock = |extra: Value| {
        let mut a =
            json!({"name": "h1", "backend": "mock", "mock": [{"reply": "done: {message}"}]});
        a.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        a
    };
    for (extra, want) in [
        (json!({"backend": "sdk", "mock": []}), "delegate.backends"),
        (
            json!({"permissions": "full"}),
            "permissions.profile: full is wider than this agent's own edit",
        ),
        (
            json!({"delegate": {"agents": 1, "depth": 2}}),
            "delegate.depth: 2 is too deep",
        ),
        (
            json!({"budget": {"max_tokens": 5000}}),
            "budget.max_tokens: 5000 is over what is left of your sub-agents' share",
        ),
        (json!({"workflow": "@other:x"}), "unknown"),
    ] {
        let e = call(&boss, "team_agent_new", mock(extra.clone()))
            .await
            .err();
        assert!(e.contains(want), "{extra}: {e}");
    }
    let made = call(&boss, "team_agent_new", mock(json!({}))).await.ok();
    assert_eq!(made["agent"]["parent"], "boss", "{made}");
    assert_eq!(made["agent"]["workflow"], "@global:main");
    assert_eq!(
        made["agent"]["budget"]["max_tokens"], 1000,
        "the share is its budget"
    );
    let e = call(&boss, "team_agent_new", mock(json!({"name": "h2"})))
        .await
        .err();
    assert!(
        e.contains("delegate.agents: you have 1 sub-agents alive"),
        "{e}"
    );

    // Asked, it answers the asker; an agent asks only its own.
    let r = call(
        &boss,
        "team_agent_ask",
        json!({"name": "h1", "message": "sum it up", "wait_seconds": 20}),
    )
    .await
    .ok();
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["reply"]["final_text"], "done: sum it up");
    new_mock(&lead, "other", json!([{"reply": "no"}])).await;
    let e = call(
        &boss,
        "team_agent_ask",
        json!({"name": "other", "message": "hi"}),
    )
    .await
    .err();
    assert!(e.contains("no agent \"other\" of yours; yours: h1"), "{e}");
    let e = call(&boss, "team_agent_delete", json!({"name": "other"}))
        .await
        .err();
    assert!(e.contains("of yours"), "{e}");

    s.stop().await;
}

#[tokio::test]
async fn a_definition_and_a_sub_agents_budget_are_held_where_they_are_set() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    // Never over the parent's own budget.
    call(
        &lead,
        "agent_new",
        json!({"name": "frugal", "backend": "external", "budget": {"max_cost_usd": 1},
               "delegate": {"agents": 1, "backends": ["mock"]}}),
    )
    .await
    .ok();
    let frugal = join(&s, &lead, "frugal", Proto::Legacy).await;
    let e = call(
        &frugal,
        "team_agent_new",
        json!({"name": "h9", "backend": "mock", "budget": {"max_cost_usd": 5}}),
    )
    .await
    .err();
    assert!(
        e.contains("budget.max_cost_usd: 5 is over your own budget.max_cost_usd 1"),
        "{e}"
    );

    // A definition is checked where it is set, naming the field.
    let e = call(
        &lead,
        "agent_new",
        json!({"name": "x", "backend": "mock", "delegate": {"agents": 0}}),
    )
    .await
    .err();
    assert!(e.contains("delegate.agents"), "{e}");
    let e = call(&lead, "agent_new", json!({"name": "x", "backend": "mock", "budget": {"max_tokens": 10},
                                            "delegate": {"agents": 1, "budget": {"max_tokens": 99}}}))
        .await
        .err();
    assert!(
        e.contains("delegate.budget.max_tokens 99 is over the agent's own budget.max_tokens 10"),
        "{e}"
    );
    s.stop().await;
}

/// The worker processes running in `data_dir` (this binary in worker mode, its
/// folder there).
fn workers_in(data_dir: &Path) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
            String::from_utf8_lossy(&cmd).contains("__worker") && cwd.starts_with(data_dir)
        })
        .collect()
}

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(15);
    while !f() {
        assert!(Instant::now() < end, "not within 15 s: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn pausing_and_deleting_the_parent_take_its_sub_agents_and_workers() {
    let dir = tempfile::tempdir().unwrap();
    let data = std::fs::canonicalize(dir.path()).unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let boss = delegating(
        &s,
        &lead,
        "boss",
        json!({"agents": 2, "backends": ["mock"]}),
    )
    .await;
    for n in ["slow", "idle"] {
        call(
            &boss,
            "team_agent_new",
            json!({"name": n, "backend": "mock", "mock": [{"sleep": "60s", "reply": "late"}]}),
        )
        .await
        .ok();
    }
    call(&lead, "agent_pause", json!({"target": "boss"}))
        .await
        .ok();
    assert_eq!(info(&lead, "idle").await["agent"]["state"], "paused");
    call(
        &lead,
        "agent_pause",
        json!({"target": "boss", "resume": true}),
    )
    .await
    .ok();
    assert_eq!(info(&lead, "idle").await["agent"]["state"], "idle");

    let r = call(
        &boss,
        "team_agent_ask",
        json!({"name": "slow", "message": "go", "wait_seconds": 0}),
    )
    .await
    .ok();
    assert_ne!(r["status"], "failed", "{r}");
    until("a worker runs", || !workers_in(&data).is_empty()).await;
    call(&lead, "agent_delete", json!({"target": "boss"}))
        .await
        .ok();
    let left = call(&lead, "agent_list", json!({})).await.ok();
    assert_eq!(left["agents"], json!([]), "{left}");
    until("no worker remains", || workers_in(&data).is_empty()).await;
    s.stop().await;
}

#[tokio::test]
async fn contracts_deny_or_hold_the_making() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let boss = delegating(
        &s,
        &lead,
        "boss",
        json!({"agents": 3, "backends": ["mock"]}),
    )
    .await;
    let set = call(&lead, "contract_set",
        json!({"name": "no-mock-subs", "when": {"event": "agent_new", "by": "boss", "backend": "mock"},
               "then": {"action": "deny", "reason": "no sub-agents here"}}))
        .await
        .ok();
    assert!(
        set.to_string()
            .contains("When agent boss makes an agent of its own with backend mock"),
        "{set}"
    );
    let e = call(
        &boss,
        "team_agent_new",
        json!({"name": "h1", "backend": "mock"}),
    )
    .await
    .err();
    assert!(
        e.contains("refused by contract \"no-mock-subs\": no sub-agents here"),
        "{e}"
    );
    call(
        &lead,
        "contract_set",
        json!({"name": "no-mock-subs", "remove": true}),
    )
    .await
    .ok();

    call(
        &lead,
        "contract_set",
        json!({"name": "ask-me", "when": {"event": "agent_new"},
               "then": {"action": "require_approval", "timeout": "1m"}}),
    )
    .await
    .ok();
    let making = tokio::spawn({
        let boss = boss.clone();
        async move {
            call(
                &boss,
                "team_agent_new",
                json!({"name": "h1", "backend": "mock"}),
            )
            .await
        }
    });
    let a = approval_in(&lead, "pending", 10).await;
    assert!(a.to_string().contains("boss makes agent h1 (mock)"), "{a}");
    call(
        &lead,
        "approval_decide",
        json!({"id": a["id"], "decision": "approve"}),
    )
    .await
    .ok();
    let made = making.await.unwrap().ok();
    assert_eq!(made["agent"]["name"], "h1", "{made}");

    let refused = tokio::spawn({
        let boss = boss.clone();
        async move {
            call(
                &boss,
                "team_agent_new",
                json!({"name": "h2", "backend": "mock"}),
            )
            .await
        }
    });
    let a = approval_in(&lead, "pending", 10).await;
    call(
        &lead,
        "approval_decide",
        json!({"id": a["id"], "decision": "deny", "reason": "enough"}),
    )
    .await
    .ok();
    let e = refused.await.unwrap().err();
    assert!(e.contains("was not given"), "{e}");
    s.stop().await;
}

/// An sdk sub-agent spends from the share its parent gives: once its runs used
/// it, the parent's next question is refused naming the limit, and so is a new
/// sub-agent, even once the one that spent it is deleted.
#[tokio::test]
async fn a_sub_agent_stops_at_the_share_its_parent_gives() {
    let llm = FakeLlm::start(Script::text("checked")).await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let boss = external(
        &s,
        &lead,
        json!({"name": "boss",
               "env": {"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test"},
               "delegate": {"agents": 1, "backends": ["sdk"], "budget": {"max_tokens": 10}}}),
    )
    .await;
    call(
        &boss,
        "team_agent_new",
        json!({"name": "scout", "backend": "sdk", "model": "claude-sonnet-4-5"}),
    )
    .await
    .ok();
    let ask = json!({"name": "scout", "message": "check", "wait_seconds": 30});
    let r = call(&boss, "team_agent_ask", ask.clone()).await.ok();
    assert_eq!(r["reply"]["final_text"], "checked", "{r}");
    let e = call(&boss, "team_agent_ask", ask).await.err();
    assert!(
        e.contains("the sub-agents of boss used")
            && e.contains("the limit is 10 (delegate.budget.max_tokens)"),
        "{e}"
    );
    let e = call(
        &boss,
        "team_agent_new",
        json!({"name": "scout2", "backend": "sdk"}),
    )
    .await
    .err();
    assert!(
        e.contains("delegate.budget.max_tokens: your sub-agents have used 132 tokens of their 10"),
        "the share is checked before the count: {e}"
    );
    // Deleting the one that spent it makes no room: its spending stays counted.
    call(&boss, "team_agent_delete", json!({"name": "scout"}))
        .await
        .ok();
    let e = call(
        &boss,
        "team_agent_new",
        json!({"name": "scout2", "backend": "sdk"}),
    )
    .await
    .err();
    assert!(e.contains("have used 132 tokens of their 10"), "{e}");
    s.stop().await;
}

/// A parent whose own budget its sub-agents spent makes no new one: the limit is
/// named, as the gate would name it for its next run.
#[tokio::test]
async fn a_parent_over_its_own_budget_makes_no_sub_agent() {
    let llm = FakeLlm::start(Script::text("checked")).await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let boss = external(
        &s,
        &lead,
        json!({"name": "boss", "budget": {"max_tokens": 10},
               "env": {"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test"},
               "delegate": {"agents": 2, "backends": ["sdk"]}}),
    )
    .await;
    let scout = json!({"name": "scout", "backend": "sdk", "model": "claude-sonnet-4-5"});
    call(&boss, "team_agent_new", scout).await.ok();
    let ask = json!({"name": "scout", "message": "check", "wait_seconds": 30});
    let r = call(&boss, "team_agent_ask", ask).await.ok();
    assert_eq!(r["reply"]["final_text"], "checked", "{r}");
    let e = call(
        &boss,
        "team_agent_new",
        json!({"name": "scout2", "backend": "sdk"}),
    )
    .await
    .err();
    assert!(
        e.contains("boss with its sub-agents used 132 tokens, the limit is 10 (budget.max_tokens)")
            || e.contains("boss used 132 tokens, the limit is 10 (budget.max_tokens)"),
        "{e}"
    );
    assert!(e.contains("nothing was made"), "{e}");
    s.stop().await;
}
