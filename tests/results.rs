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

/// The seed's review loop as rounds: the reviewer's first `verdict` is
/// changes_requested, so the coder fixes and the reviewer looks again; its second
/// is approved, so the second round's merge runs and the first round's is skipped.
const REVIEW_LOOP: &str = r#"
name: review-loop
agents:
  reviewer:
    backend: mock
    mock:
      - { when: "step review-1", result: { verdict: changes_requested, notes: "rename x" }, reply: "asked for changes" }
      - { when: "step review-2", result: { verdict: approved, notes: "good" }, reply: "approved" }
  coder: { backend: mock, mock: [ { reply: "fixed" } ] }
  merger: { backend: mock, mock: [ { reply: "merged" } ] }
trigger: "the patch"
steps:
  - id: review-1
    agent: reviewer
    on: trigger
    prompt: "Review ${{ trigger }}"
    result:
      type: object
      properties:
        verdict: { type: string, enum: [approved, changes_requested] }
        notes: { type: string }
      required: [verdict]
  - id: fix-1
    agent: coder
    on: { step: review-1, result: { verdict: changes_requested } }
    prompt: "Fix it"
  - id: merge-1
    agent: merger
    on: { step: review-1, result: { verdict: approved } }
    prompt: "Merge it"
  - id: review-2
    agent: reviewer
    on: fix-1.complete
    prompt: "Review the fix"
    result:
      type: object
      properties:
        verdict: { type: string, enum: [approved, changes_requested] }
        notes: { type: string }
      required: [verdict]
  - id: merge-2
    agent: merger
    on: { step: review-2, result: { verdict: approved } }
    prompt: "Merge it"
"#;

#[tokio::test]
async fn a_step_loop_branches_on_a_field_of_a_result() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let r = call(
        &lead,
        "workflow_run",
        json!({"yaml": REVIEW_LOOP, "wait_seconds": 40}),
    )
    .await
    .ok();
    assert_eq!(r["status"], "completed", "{r}");
    let st = call(
        &lead,
        "workflow_status",
        json!({"workflow": "@review-loop"}),
    )
    .await
    .ok();
    let got: Vec<(&str, &str)> = st["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), s["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("review-1", "done"),
            ("fix-1", "done"),
            ("merge-1", "skipped"),
            ("review-2", "done"),
            ("merge-2", "done"),
        ],
        "{st}"
    );
    assert_eq!(
        st["steps"][0]["result"],
        json!({"verdict": "changes_requested", "notes": "rename x"})
    );
    assert_eq!(
        st["steps"][3]["result"],
        json!({"verdict": "approved", "notes": "good"})
    );
    assert!(st["steps"][1].get("result").is_none(), "{st}");
    assert!(
        st["steps"][2]["reason"]
            .as_str()
            .unwrap()
            .contains("does not have verdict = \"approved\""),
        "{st}"
    );
    s.stop().await;
}

/// A step that asks for a result and whose run ends without one fails, saying so;
/// an `on:` that tests a field its step's schema lacks is refused at load.
#[tokio::test]
async fn a_step_without_its_result_fails_and_a_test_of_no_field_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let forgetful = REVIEW_LOOP.replacen(
        "result: { verdict: changes_requested, notes: \"rename x\" }, ",
        "",
        1,
    );
    let r = call(
        &lead,
        "workflow_run",
        json!({"yaml": forgetful, "wait_seconds": 40}),
    )
    .await
    .ok();
    assert_eq!(r["status"], "failed", "{r}");
    let st = call(
        &lead,
        "workflow_status",
        json!({"workflow": "@review-loop"}),
    )
    .await
    .ok();
    assert_eq!(st["steps"][0]["state"], "failed", "{st}");
    assert!(
        st["steps"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("without submitting the result it was asked for"),
        "{st}"
    );
    let typo = REVIEW_LOOP.replacen(
        "{ step: review-1, result: { verdict: changes_requested } }",
        "{ step: review-1, result: { verdikt: changes_requested } }",
        1,
    );
    let e = call(&lead, "workflow_run", json!({"yaml": typo}))
        .await
        .err();
    assert!(
        e.contains("step review-1's result schema has no field \"verdikt\""),
        "{e}"
    );
    s.stop().await;
}

/// An agent joined from outside (in a step workflow: agent_ask runs only agents
/// with a worker) sees the schema with the step's prompt in its inbox and answers
/// through result_submit: a misfit refused naming the field, the fit kept and
/// final, several open asks told apart by `ask`.
#[tokio::test]
async fn a_joined_agent_reads_the_schema_in_its_inbox_and_submits() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let schema = review_schema().to_string();
    let yaml = format!(
        "name: outside\nagents: {{ext: {{backend: external}}}}\nsteps:\n  \
         - {{id: a, agent: ext, on: trigger, prompt: first, result: {schema}}}\n  \
         - {{id: b, agent: ext, on: trigger, prompt: second, result: {schema}}}\n"
    );
    call(
        &lead,
        "workflow_run",
        json!({"yaml": yaml, "wait_seconds": 0}),
    )
    .await
    .ok();
    let ext = join(&s, &lead, "ext@outside", Proto::Legacy).await;
    // Both prompts, once the steps have started (an empty inbox waits for a message).
    let mut inbox = json!({});
    for _ in 0..10 {
        inbox = call(&ext, "my_inbox", json!({"wait_seconds": 5}))
            .await
            .ok();
        if inbox["messages"].as_array().map_or(0, Vec::len) == 2 {
            break;
        }
    }
    assert_eq!(
        inbox["messages"][0]["result_schema"],
        review_schema(),
        "{inbox}"
    );
    let asks: Vec<String> = (0..2)
        .map(|i| inbox["messages"][i]["id"].as_str().unwrap().to_owned())
        .collect();
    let e = call(
        &ext,
        "result_submit",
        json!({"result": {"verdict": "approved"}}),
    )
    .await
    .err();
    assert!(e.contains("several asks await a result"), "{e}");
    let e = call(
        &ext,
        "result_submit",
        json!({"step": "a", "result": {"verdict": "approved"}}),
    )
    .await
    .err();
    assert!(
        e.contains("step a (message")
            && e.contains("result.notes: missing; it is required (string)"),
        "{e}"
    );
    let fit = json!({"verdict": "approved", "notes": "fine"});
    let r = call(
        &ext,
        "result_submit",
        json!({"ask": asks[0], "result": fit}),
    )
    .await
    .ok();
    assert_eq!(
        (&r["ask"], &r["step"], &r["result"]),
        (&json!(asks[0]), &json!("a"), &fit),
        "{r}"
    );
    let e = call(
        &ext,
        "result_submit",
        json!({"ask": asks[0], "result": fit}),
    )
    .await
    .err();
    assert!(
        e.contains("already has its result; a result is final"),
        "{e}"
    );
    // The one left open is the default now; a stranger's id is no ask of ext's.
    let e = call(&ext, "result_submit", json!({"ask": "nope", "result": fit}))
        .await
        .err();
    assert!(
        e.contains("no ask \"nope\" of yours asked for a result"),
        "{e}"
    );
    let r = call(&ext, "result_submit", json!({"result": fit}))
        .await
        .ok();
    assert_eq!(r["ask"], json!(asks[1]), "{r}");
    let e = call(&ext, "result_submit", json!({"result": fit}))
        .await
        .err();
    assert!(e.contains("nothing asked of ext awaits a result"), "{e}");
    s.stop().await;
}
