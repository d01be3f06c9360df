//! Tool arguments and schemas as a demanding client meets them: unknown names are
//! refused with the valid ones (nothing is done), a wrong type names the field, an
//! empty document name is refused, and every schema is portable JSON Schema
//! 2020-12 (checked by Python's `jsonschema`) with enums and ranges where the
//! values are fixed.

use crate::common;
use common::*;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

#[tokio::test]
async fn unknown_and_mistyped_arguments_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let lead = stdio_client(dir.path(), Proto::Legacy).await;

    let e = call(
        &lead,
        "agent_new",
        json!({"name": "bob", "backend": "mock", "system_prompt": "You review."}),
    )
    .await
    .err();
    assert!(e.contains("\"system_prompt\""), "{e}");
    assert!(e.contains("did you mean \"system\""), "{e}");
    assert!(
        e.contains("backend") && e.contains("name"),
        "lists the valid names: {e}"
    );
    let agents = call(&lead, "agent_list", json!({})).await.ok();
    assert_eq!(agents["agents"], json!([]), "nothing was created");

    call(
        &lead,
        "agent_new",
        json!({"name": "bob", "backend": "external"}),
    )
    .await
    .ok();
    let e = call(&lead, "agent_join", json!({"target": "bob", "ttl": 3600}))
        .await
        .err();
    assert!(e.contains("ttl: invalid type: integer"), "{e}");
    let e = call(&lead, "channel_read", json!({"limit": "ten"}))
        .await
        .err();
    assert!(e.contains("limit: invalid type"), "{e}");

    // Results with a shape: an unknown argument of result_submit, a result_schema
    // that is no object.
    let e = call(&lead, "result_submit", json!({"result": {}, "task": "t1"}))
        .await
        .err();
    assert!(e.contains("\"task\"") && e.contains("ask"), "{e}");
    let e = call(
        &lead,
        "agent_ask",
        json!({"target": "bob", "message": "hi", "result_schema": "verdict"}),
    )
    .await
    .err();
    assert!(
        e.contains("result_schema: a schema must be an object such as"),
        "{e}"
    );

    // An empty document name is a mistake, not a request for notes.md.
    let e = call(
        &lead,
        "team_doc_write",
        json!({"file": "", "content": "oops"}),
    )
    .await
    .err();
    assert!(e.contains("file is empty"), "{e}");
    let notes = call(&lead, "team_doc_read", json!({})).await.ok();
    assert_eq!(notes["content"], "", "notes.md was not written: {notes}");
    lead.cancel().await.unwrap();
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the Python SDK's virtualenv (AGENT_WORKER_HEAVY=1, scripts/py-env)"
)]
async fn every_schema_is_portable_draft_2020_12_with_enums_and_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let lead = stdio_client(dir.path(), Proto::Legacy).await;
    let tools = lead.list_all_tools().await.unwrap();
    let listed: Vec<Value> = tools
        .iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .collect();
    let file = dir.path().join("tools.json");
    std::fs::write(&file, serde_json::to_vec(&listed).unwrap()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/schema_check.py");
    let out = Command::new(python())
        .arg(script)
        .arg(&file)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let prop = |tool: &str, field: &str| -> Value {
        let t = listed.iter().find(|t| t["name"] == tool).unwrap();
        t["inputSchema"]["properties"][field].clone()
    };
    let enumerated = |tool: &str, field: &str, must: &[&str]| {
        let p = prop(tool, field);
        let vals = p["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{tool}.{field}: no enum: {p}"));
        for m in must {
            assert!(vals.iter().any(|v| v == m), "{tool}.{field} lacks {m}: {p}");
        }
    };
    enumerated(
        "agent_new",
        "backend",
        &["claude", "sdk", "mock", "external"],
    );
    enumerated("team_proposal_create", "type", &["approval", "decision"]);
    enumerated(
        "team_proposal_create",
        "resolution",
        &["plurality", "majority", "unanimous"],
    );
    enumerated(
        "team_proposal_create",
        "tie_breaker",
        &["first", "creator-decides"],
    );
    enumerated("my_status_set", "state", &["idle", "busy", "blocked"]);
    enumerated(
        "resource_create",
        "type",
        &["text", "markdown", "json", "diff"],
    );
    enumerated("workflow_context_set", "documents", &["file", "sqlite"]);
    for (tool, field, min, max) in [
        ("agent_ask", "wait_seconds", 0, 50),
        ("workflow_run", "wait_seconds", 0, 50),
        ("workflow_status", "wait_seconds", 0, 50),
        ("channel_read", "limit", 1, 200),
        ("my_inbox", "limit", 1, 200),
    ] {
        let p = prop(tool, field);
        assert_eq!(
            (p["minimum"].clone(), p["maximum"].clone()),
            (json!(min), json!(max)),
            "{tool}.{field}: {p}"
        );
    }
    lead.cancel().await.unwrap();
}

/// An agent's own tools (delegation) refuse what they do not take, naming it, as
/// the lead's do; a `delegate` of the wrong shape is refused naming its field.
#[tokio::test]
async fn an_agents_own_tools_refuse_unknown_and_mistyped_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "boss", "backend": "external", "delegate": {"agents": 1, "backends": ["mock"]}}),
    )
    .await
    .ok();
    let boss = join(&s, &lead, "boss", Proto::Modern).await;
    let e = call(
        &boss,
        "team_agent_new",
        json!({"name": "h", "backend": "mock", "workflow": "@x:y"}),
    )
    .await
    .err();
    assert!(e.contains("\"workflow\"") && e.contains("backend"), "{e}");
    let e = call(
        &boss,
        "team_agent_ask",
        json!({"name": "h", "message": "hi", "wait_seconds": "soon"}),
    )
    .await
    .err();
    assert!(e.contains("wait_seconds: invalid type"), "{e}");
    let e = call(
        &boss,
        "team_agent_ask",
        json!({"name": "h", "message": "hi", "wait_seconds": 90}),
    )
    .await
    .err();
    assert!(e.contains("wait_seconds is at most 50"), "{e}");
    let e = call(
        &boss,
        "team_agent_new",
        json!({"name": "h", "backend": "mock", "delegate": {"agents": 1, "deepth": 1}}),
    )
    .await
    .err();
    assert!(e.contains("delegate: unknown field `deepth`"), "{e}");
    let e = call(
        &lead,
        "agent_new",
        json!({"name": "x", "backend": "mock", "delegate": {"agents": 1, "backends": ["nope"]}}),
    )
    .await
    .err();
    assert!(
        e.contains("delegate.backends[0]: unknown backend \"nope\""),
        "{e}"
    );
    s.stop().await;
}
