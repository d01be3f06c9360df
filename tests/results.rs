//! Results with a shape: agent_ask with a `result_schema`, answered by the asked
//! agent's result_submit (a misfit refused naming the field, the fix accepted), and
//! the result back to the lead as structured content; step workflows that branch on
//! a field of a step's result.

use crate::common;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::{Value, json};

fn review_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["approved", "changes_requested"]},
            "notes": {"type": "string"}
        },
        "required": ["verdict", "notes"]
    })
}

/// The sdk agent's first result misses `verdict`: result_submit refuses it naming
/// the field, the model (the fake one) submits again with it, and agent_ask returns
/// the result as structured content.
#[tokio::test]
async fn an_sdk_agent_fixes_a_refused_result_and_the_lead_gets_it_structured() {
    let llm = FakeLlm::start(Script::steps(
        &[
            ("result_submit", json!({"result": {"notes": "two typos"}})),
            (
                "result_submit",
                json!({"result": {"verdict": "changes_requested", "notes": "two typos"}}),
            ),
        ],
        "submitted my review",
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "rev", "backend": "sdk", "model": "claude-sonnet-4-5",
               "env": {"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test"}}),
    )
    .await
    .ok();
    let r = call(
        &lead,
        "agent_ask",
        json!({"target": "rev", "message": "Review the patch", "wait_seconds": 30,
               "result_schema": review_schema()}),
    )
    .await
    .ok();
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(
        r["result"],
        json!({"verdict": "changes_requested", "notes": "two typos"}),
        "{r}"
    );
    let calls = llm.model_calls();
    assert_eq!(calls.len(), 3, "two submissions, then the answer");
    // The prompt told the model to end with result_submit and gave the schema.
    let task = calls[0]["body"]["messages"][0]["content"].as_str().unwrap();
    assert!(task.contains("result_submit"), "{task}");
    assert!(task.contains("changes_requested"), "{task}");
    // The first submission was refused naming the missing field.
    let refused = calls[1]["body"]["messages"][2]["content"][0].clone();
    assert_eq!(refused["type"], "tool_result", "{refused}");
    assert_eq!(refused["is_error"], true, "{refused}");
    let text = refused["content"].to_string();
    assert!(
        text.contains("result.verdict: missing; it is required"),
        "{text}"
    );
    // A result is final; and with nothing asked, result_submit says why.
    let i = call(
        &lead,
        "agent_ask",
        json!({"target": "rev", "message": "hi", "wait_seconds": 30}),
    )
    .await
    .ok();
    assert!(i.get("result").is_none(), "no schema, no result: {i}");
    let e = call(
        &lead,
        "result_submit",
        json!({"result": {"verdict": "approved"}}),
    )
    .await
    .err();
    assert!(e.contains("nothing asked of user awaits a result"), "{e}");
    // A schema outside the subset is refused before anything is sent.
    let e = call(
        &lead,
        "agent_ask",
        json!({"target": "rev", "message": "again", "result_schema":
               {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}}),
    )
    .await
    .err();
    assert!(
        e.contains("result_schema: at properties.n: `minimum` is not supported"),
        "{e}"
    );
    assert_eq!(llm.model_calls().len(), 4, "the refused ask ran nothing");
    s.stop().await;
}
