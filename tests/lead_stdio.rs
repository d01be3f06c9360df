//! The lead over stdio (both protocol generations): registry tools, bad input, and
//! that a failed call changes nothing.

use crate::common;
use common::*;
use serde_json::json;

/// Each kind of bad `agent_new` input is refused with its own error.
async fn agent_new_refuses_bad_input(lead: &Client) {
    // Bad input: each a specific error, nothing changed.
    let e = call(
        lead,
        "agent_new",
        json!({"name": "alice", "backend": "mock"}),
    )
    .await
    .err();
    assert!(e.contains("already exists"), "{e}");
    let e = call(
        lead,
        "agent_new",
        json!({"name": "ALICE", "backend": "mock"}),
    )
    .await
    .err();
    assert!(
        e.contains("already exists"),
        "names are unique ignoring case: {e}"
    );
    let e = call(
        lead,
        "agent_new",
        json!({"name": "9lives", "backend": "mock"}),
    )
    .await
    .err();
    assert!(e.contains("start with a letter"), "{e}");
    let e = call(lead, "agent_new", json!({"name": "a.b", "backend": "mock"}))
        .await
        .err();
    assert!(e.contains("invalid agent name"), "{e}");
    let e = call(
        lead,
        "agent_new",
        json!({"name": "user", "backend": "mock"}),
    )
    .await
    .err();
    assert!(e.contains("reserved"), "{e}");
    let e = call(
        lead,
        "agent_new",
        json!({"name": "carol", "backend": "gpt"}),
    )
    .await
    .err();
    assert!(
        e.contains("unknown backend") && e.contains("claude, codex"),
        "{e}"
    );
    let e = call(
        lead,
        "agent_new",
        json!({"name": "carol", "backend": "mock", "workflow": "@bad/name"}),
    )
    .await
    .err();
    assert!(e.contains("not allowed"), "{e}");
    let e = call(
        lead,
        "agent_new",
        json!({"name": "carol", "backend": "mock", "cwd": "relative/dir"}),
    )
    .await
    .err();
    assert!(e.contains("absolute"), "{e}");
    let e = call(
        lead,
        "agent_new",
        json!({"name": "carol", "backend": "mock", "env": {"1BAD": "x"}}),
    )
    .await
    .err();
    assert!(e.contains("not valid"), "{e}");
    let e = call(lead, "agent_new", json!({"backend": "mock"}))
        .await
        .err();
    assert!(e.contains("name"), "missing field is a tool error: {e}");
}

async fn registry_round_trip(p: Proto) {
    let dir = tempfile::tempdir().unwrap();
    let lead = stdio_client(dir.path(), p).await;
    assert_eq!(tool_names(&lead).await, lead_tools());
    // A lead's client shows every tool; keep the list short enough to read
    // (43 since result_submit, which agents answer asks with; 47 with the task
    // board's four; 48 with hook_set, events from outside).
    assert!(
        lead_tools().len() <= 48,
        "{} lead tools",
        lead_tools().len()
    );

    let a = call(&lead, "agent_new", json!({"name": "alice", "backend": "claude", "model": "sonnet", "system": "You review.", "env": {"FOO": "1"}})).await.ok();
    assert_eq!(a["agent"]["target"], "alice");
    assert_eq!(a["agent"]["workflow"], "@global:main");
    assert_eq!(a["agent"]["env"], json!(["FOO"]));
    let b = call(
        &lead,
        "agent_new",
        json!({"name": "bob", "backend": "mock", "workflow": "@review:pr-1"}),
    )
    .await
    .ok();
    assert_eq!(b["agent"]["target"], "bob@review:pr-1");

    agent_new_refuses_bad_input(&lead).await;

    let all = call(&lead, "agent_list", json!({})).await.ok();
    let targets: Vec<_> = all["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["target"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        targets,
        vec!["alice", "bob@review:pr-1"],
        "sorted by workflow, tag, name"
    );
    let only = call(&lead, "agent_list", json!({"workflow": "@review:pr-1"}))
        .await
        .ok();
    assert_eq!(only["agents"].as_array().unwrap().len(), 1);
    let e = call(&lead, "agent_list", json!({"workflow": "@nope:x"}))
        .await
        .err();
    assert!(
        e.contains("no workflow instance @nope:x") && e.contains("@review:pr-1"),
        "{e}"
    );

    let info = call(&lead, "agent_info", json!({"target": "bob@review:pr-1"}))
        .await
        .ok();
    assert_eq!(info["agent"]["backend"], "mock");
    assert_eq!(info["inbox"]["pending"], 0);
    let e = call(&lead, "agent_info", json!({"target": "zed"}))
        .await
        .err();
    assert!(e.contains("no agent \"zed\"") && e.contains("alice"), "{e}");
    let e = call(&lead, "agent_info", json!({"target": "@review:pr-1"}))
        .await
        .err();
    assert!(e.contains("names a workflow"), "{e}");

    let d = call(&lead, "agent_delete", json!({"target": "alice"}))
        .await
        .ok();
    assert_eq!(d["deleted"], "alice");
    let e = call(&lead, "agent_delete", json!({"target": "alice"}))
        .await
        .err();
    assert!(e.contains("no agent"), "{e}");
    let all = call(&lead, "agent_list", json!({})).await.ok();
    assert_eq!(all["agents"].as_array().unwrap().len(), 1);
    lead.cancel().await.unwrap();
}

#[tokio::test]
async fn registry_over_stdio_legacy() {
    registry_round_trip(Proto::Legacy).await;
}

#[tokio::test]
async fn registry_over_stdio_modern() {
    registry_round_trip(Proto::Modern).await;
}

#[tokio::test]
async fn unknown_tool_is_a_protocol_error() {
    let dir = tempfile::tempdir().unwrap();
    let lead = stdio_client(dir.path(), Proto::Legacy).await;
    let r = try_call(&lead, "no_such_tool", json!({})).await;
    assert!(r.is_err(), "an unknown tool is a JSON-RPC error, got {r:?}");
    // The session is still usable afterwards.
    call(&lead, "agent_list", json!({})).await.ok();
}

#[tokio::test]
async fn every_tool_has_object_output_schema_and_annotations() {
    let dir = tempfile::tempdir().unwrap();
    let lead = stdio_client(dir.path(), Proto::Legacy).await;
    for t in lead.list_all_tools().await.unwrap() {
        let out = t
            .output_schema
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no output schema", t.name));
        assert_eq!(
            out.get("type").and_then(|v| v.as_str()),
            Some("object"),
            "{}",
            t.name
        );
        let a = t
            .annotations
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no annotations", t.name));
        assert!(
            a.read_only_hint.is_some()
                && a.destructive_hint.is_some()
                && a.idempotent_hint.is_some(),
            "{}",
            t.name
        );
        assert!(
            t.description.as_ref().is_some_and(|d| d.len() > 40),
            "{} needs a real description",
            t.name
        );
    }
}
