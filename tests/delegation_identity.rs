//! A sub-agent's name gives it no one else's standing: made with an approver's
//! name, it decides no approval; made with a deleted agent's name, it cannot
//! submit the result that agent was asked for (the asks went with it).

use crate::common;
use common::*;
use serde_json::json;

/// coder, who may delegate, joined; the contract that its tasks' moves to done wait
/// for `reviewer`.
async fn coder(s: &InProcess, lead: &Client) -> Client {
    let contract = json!({"name": "reviewed", "when": {"event": "task", "state": "done"},
                          "then": {"action": "require_approval", "approvers": ["reviewer"]}});
    call(lead, "contract_set", contract).await.ok();
    call(
        lead,
        "agent_new",
        json!({"name": "coder", "backend": "external",
               "delegate": {"agents": 2, "backends": ["mock"]}}),
    )
    .await
    .ok();
    join(s, lead, "coder", Proto::Modern).await
}

#[tokio::test]
async fn a_sub_agent_named_as_the_approver_decides_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let coder = coder(&s, &lead).await;
    let added = call(&lead, "task_add", json!({"plan": [{"title": "one"}]}))
        .await
        .ok();
    let one = added["tasks"][0]["id"].clone();
    call(&coder, "task_claim", json!({"id": one})).await.ok();
    let held = call(&coder, "task_update", json!({"id": one, "state": "done"}))
        .await
        .ok();
    let approval = held["task"]["approval"].as_i64().expect("held: {held}");
    let sub = json!({"name": "reviewer", "backend": "mock", "mock": [{"reply": "ok"}]});
    call(&coder, "team_agent_new", sub).await.ok();
    let fake = join(&s, &lead, "reviewer", Proto::Legacy).await;
    let e = call(
        &fake,
        "approval_decide",
        json!({"id": approval, "decision": "approve"}),
    )
    .await
    .err();
    assert!(
        e.contains(
            "you are reviewer, made by another agent: a sub-agent never decides an approval"
        ),
        "{e}"
    );
    let a = approval_in(&lead, "pending", 5).await;
    assert_eq!(a["id"], approval, "still pending: {a}");
    s.stop().await;
}

#[tokio::test]
async fn a_sub_agent_of_a_deleted_agent_s_name_submits_none_of_its_results() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let coder = coder(&s, &lead).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "judge", "backend": "mock", "mock": [{"reply": "thinking"}]}),
    )
    .await
    .ok();
    let schema = json!({"type": "object", "required": ["verdict"],
                        "properties": {"verdict": {"type": "string"}}});
    // It answers, but submits no result: the ask still awaits one.
    let ask = json!({"target": "judge", "message": "verdict?", "wait_seconds": 20,
                     "result_schema": schema});
    let r = call(&lead, "agent_ask", ask).await.ok();
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["result"], serde_json::Value::Null, "{r}");
    call(&lead, "agent_delete", json!({"target": "judge"}))
        .await
        .ok();

    let sub = json!({"name": "judge", "backend": "mock", "mock": [{"reply": "ok"}]});
    call(&coder, "team_agent_new", sub).await.ok();
    let fake = join(&s, &lead, "judge", Proto::Legacy).await;
    let e = call(
        &fake,
        "result_submit",
        json!({"result": {"verdict": "approved"}}),
    )
    .await
    .err();
    assert!(e.contains("nothing asked of judge awaits a result"), "{e}");
    s.stop().await;
}

#[tokio::test]
async fn a_sub_agent_named_as_a_contract_s_urgent_sender_stops_no_turn() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let rule = json!({"name": "reviewer-stops", "workflow": "@global:main", "when": {"event": "message",
        "from": "reviewer", "urgent": true}, "then": {"action": "allow"}});
    call(&lead, "contract_set", rule).await.ok();
    let coder = coder(&s, &lead).await;
    let sub = json!({"name": "reviewer", "backend": "mock", "mock": [{"reply": "ok"}]});
    call(&coder, "team_agent_new", sub).await.ok();
    let fake = join(&s, &lead, "reviewer", Proto::Legacy).await;
    let stop = json!({"to": "coder", "message": "stop", "urgent": true});
    let e = call(&fake, "channel_send", stop).await.err();
    assert!(
        e.contains("you are reviewer, made by another agent: a sub-agent never stops a turn"),
        "{e}"
    );
    let read = call(&lead, "channel_read", json!({})).await.ok();
    assert!(
        !read.to_string().contains("[URGENT]"),
        "nothing was sent: {read}"
    );
    s.stop().await;
}
