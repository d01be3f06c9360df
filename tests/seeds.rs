//! The seeds as they are written, over MCP: seed 001's review workflow runs
//! verbatim (its agents named only in `steps:` take the default backend, and
//! workflow_run says so); its `route(@reviewer, @coder)` passes a message along
//! the chain; the design's names for contract fields and for my_inbox_ack's
//! cursor are answered with the names to write now.

use crate::common;
use common::*;
use serde_json::{Value, json};

/// Seed 001's code review, character for character.
const SEED_001: &str = "name: code-review
trigger: pr_opened
steps:
  - agent: reviewer
    on: trigger
    action: review PR, post findings to #review
  - agent: coder
    on: reviewer.complete
    action: address findings, push fixes
  - agent: reviewer
    on: coder.complete
    action: verify fixes, approve or request changes
";

#[tokio::test]
async fn seed_001s_review_runs_as_written_on_the_default_backend() {
    let dir = tempfile::tempdir().unwrap();
    let s =
        HttpServer::start_with_env(dir.path(), &[("AGENT_WORKER_DEFAULT_BACKEND", "mock")]).await;
    let lead = s.lead(Proto::Modern).await;
    let r = call(
        &lead,
        "workflow_run",
        json!({"yaml": SEED_001, "wait_seconds": 40}),
    )
    .await
    .ok();
    assert_eq!(r["status"], "completed", "{r}");
    let warning = r["warnings"][0].as_str().unwrap_or_default();
    assert!(
        warning.contains("agents reviewer, coder are named only in `steps:`")
            && warning.contains("the default backend, mock"),
        "{r}"
    );
    let states: Vec<(&str, &str)> = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), s["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [
            ("reviewer-1", "done"),
            ("coder", "done"),
            ("reviewer-2", "done")
        ]
    );
    for name in ["reviewer", "coder"] {
        let info = call(
            &lead,
            "agent_info",
            json!({"target": format!("{name}@code-review")}),
        )
        .await
        .ok();
        assert_eq!(info["agent"]["backend"], "mock", "{info}");
    }
    // workflow_status, which starts nothing, has nothing to warn of.
    let st = call(
        &lead,
        "workflow_status",
        json!({"workflow": "@code-review"}),
    )
    .await
    .ok();
    assert!(st.get("warnings").is_none(), "{st}");
    s.stop().await;
}

/// `route(@reviewer, @coder)`: a message for the deployer goes to the reviewer,
/// what the reviewer forwards goes to the coder, what the coder forwards is
/// delivered.
#[tokio::test]
async fn a_route_of_two_members_passes_a_message_along_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    for name in ["alice", "deployer", "reviewer", "coder"] {
        call(
            &lead,
            "agent_new",
            json!({"name": name, "backend": "external"}),
        )
        .await
        .ok();
    }
    let set = call(
        &lead,
        "contract_set",
        json!({"name": "pr-review", "when": {"event": "message", "to": "deployer"},
               "then": {"action": "route", "to": ["reviewer", "coder"]}}),
    )
    .await
    .ok();
    assert!(
        set["contract"]["says"]
            .as_str()
            .unwrap_or_default()
            .contains("@reviewer, then @coder in turn"),
        "{set}"
    );
    let [alice, deployer, reviewer, coder] = [
        join(&s, &lead, "alice", Proto::Legacy).await,
        join(&s, &lead, "deployer", Proto::Modern).await,
        join(&s, &lead, "reviewer", Proto::Legacy).await,
        join(&s, &lead, "coder", Proto::Modern).await,
    ];
    let inbox = async |c: &Client| call(c, "my_inbox", json!({})).await.ok().to_string();
    let send = async |c: &Client, text: &str| -> Value {
        call(c, "channel_send", json!({ "message": text }))
            .await
            .ok()
    };
    let sent = send(&alice, "@deployer ship v2").await;
    assert!(
        sent["note"]
            .to_string()
            .contains("routed this to @reviewer"),
        "{sent}"
    );
    assert!(inbox(&reviewer).await.contains("ship v2"));
    assert!(!inbox(&deployer).await.contains("ship v2"));
    let sent = send(&reviewer, "@deployer ship v2 (reviewed)").await;
    assert!(
        sent["note"].to_string().contains("routed this to @coder"),
        "{sent}"
    );
    assert!(inbox(&coder).await.contains("(reviewed)"));
    assert!(!inbox(&deployer).await.contains("(reviewed)"));
    let sent = send(&coder, "@deployer ship v2 (reviewed, fixed)").await;
    assert!(
        !sent["note"].to_string().contains("routed"),
        "the last member's send passes: {sent}"
    );
    assert!(inbox(&deployer).await.contains("(reviewed, fixed)"));
    s.stop().await;
}

/// The design's `condition`/`action`/`scope` and `my_inbox_ack {until}` are
/// refused, nothing done, naming what to write now.
#[tokio::test]
async fn the_designs_names_are_answered_with_the_new_ones() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let e = call(
        &lead,
        "contract_set",
        json!({"name": "gate", "condition": "bash_tool_call",
               "action": "require_approval(agent.creator)", "scope": "global"}),
    )
    .await
    .err();
    for says in ["written `when`", "written `then`", "written `org`"] {
        assert!(e.contains(says), "{says}: {e}");
    }
    let yaml = "name: gated\nagents: { a: { backend: mock } }\ncontracts:\n  - { name: gate, \
                condition: bash_tool_call, then: { action: deny } }\nkickoff: \"@a go\"\n";
    let e = call(&lead, "workflow_run", json!({ "yaml": yaml }))
        .await
        .err();
    assert!(e.contains("`condition` is written `when`"), "{e}");
    let e = call(
        &lead,
        "my_inbox_ack",
        json!({"until": "0190a0b0-0000-7000-8000-000000000000"}),
    )
    .await
    .err();
    assert!(
        e.contains("`message_id` with `through: true`") && e.contains("Nothing was done"),
        "{e}"
    );
    s.stop().await;
}
