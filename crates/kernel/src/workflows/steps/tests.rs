//! A step graph in motion, on the steps room alone: what starts a step (the
//! trigger, a step done, a message), what a step's end does to those that wait
//! for it (start, skip, or handle its failure), what the graph tells its settling,
//! and that a stopped instance's graph does not move.

use super::start::Flow;
use crate::testing::{Rooms, names};
use domain::workflow_yaml::{Vars, parse};

/// A step workflow of two members without a worker (they ack their prompts
/// themselves): the reviewer on the trigger, the coder once it is done, a fixer
/// if it failed, and a shipper on a message of the lead's.
const FLOW: &str = r#"
name: flow
agents:
  reviewer: { backend: external }
  coder: { backend: external }
  fixer: { backend: external }
trigger: "PR 7 opened"
steps:
  - agent: reviewer
    on: trigger
    action: "Review ${{ trigger }}"
  - agent: coder
    on: reviewer.complete
    action: "Address the review"
  - agent: fixer
    on: reviewer.failed
    action: "Find out why"
  - agent: coder
    on: { message: "ship it", from: user }
    action: "Ship"
"#;

/// The rooms with `@flow:main` running the graph of `yaml`; its id.
async fn started(yaml: &str) -> (Rooms, i64) {
    let r = Rooms::new().await;
    for a in ["reviewer", "coder", "fixer"] {
        r.agent_in("@flow:main", a, "external").await;
    }
    let wf = parse(yaml, None, r.dir.path()).expect("the workflow reads");
    let vars = Vars::new("flow", "main", r.dir.path(), Default::default());
    let flow = Flow::of(&wf, &vars).expect("the steps fill in");
    let wid = r.identity("reviewer@flow:main").await.workflow_id;
    r.store
        .write(move |c| {
            c.execute(
                "UPDATE workflows SET state = 'running' WHERE id = ?1",
                [wid],
            )?;
            flow.register_tx(c, wid, crate::testing::T0)
        })
        .await
        .unwrap();
    r.contracts.reload().await.unwrap();
    r.steps.advance(wid).await.unwrap();
    (r, wid)
}

/// Each step's id and state: "reviewer running, coder-1 waiting, ...".
async fn states(r: &Rooms, wid: i64) -> String {
    let view = r.steps.view(wid).await.unwrap();
    let all: Vec<String> = view
        .iter()
        .map(|s| format!("{} {}", s.id, s.state.as_str()))
        .collect();
    all.join(", ")
}

/// `who` acks every prompt in its inbox, as a member without a run.
async fn ack_all(r: &Rooms, wid: i64, who: &str) -> Vec<String> {
    let scope = r.scope_in("@flow:main", who).await;
    let inbox = r.messaging.my_inbox(&scope, None).await.unwrap();
    for m in &inbox.messages {
        r.messaging
            .my_inbox_ack(&scope, &m.id, false)
            .await
            .unwrap();
    }
    r.steps.run_ended(wid, who).await.unwrap();
    inbox.messages.into_iter().map(|m| m.content).collect()
}

#[tokio::test]
async fn the_trigger_starts_the_first_step_with_its_prompt_filled_in() {
    let (r, wid) = started(FLOW).await;
    assert_eq!(
        states(&r, wid).await,
        "reviewer running, coder-1 waiting, fixer waiting, coder-2 waiting"
    );
    let got = ack_all(&r, wid, "reviewer").await;
    assert_eq!(
        got,
        names(&["@reviewer (step reviewer) Review PR 7 opened"])
    );
}

/// A step done starts the steps that wait for it; the failure handler never runs.
#[tokio::test]
async fn a_step_done_starts_what_waits_for_it_and_skips_its_failure_handler() {
    let (r, wid) = started(FLOW).await;
    ack_all(&r, wid, "reviewer").await;
    let s = states(&r, wid).await;
    assert!(
        s.starts_with("reviewer done, coder-1 running, fixer skipped"),
        "{s}"
    );
    let got = ack_all(&r, wid, "coder").await;
    assert_eq!(got, names(&["@coder (step coder-1) Address the review"]));
    let outcome = r.steps.outcome(wid).await.unwrap().expect("a graph");
    assert_eq!(outcome.waiting.len(), 1, "{:?}", outcome.waiting);
    assert!(
        outcome.waiting[0].starts_with("coder-2 ("),
        "{:?}",
        outcome.waiting
    );
    assert!(outcome.failed.is_empty());
}

/// An agent failing for good fails its running step: what waits for its end is
/// skipped, and its failure handler starts; the failure is handled.
#[tokio::test]
async fn a_failed_step_skips_its_successors_and_starts_its_handler() {
    let (r, wid) = started(FLOW).await;
    let had_steps = r
        .steps
        .agent_failed(wid, "reviewer", "retries spent")
        .await
        .unwrap();
    assert!(had_steps);
    let s = states(&r, wid).await;
    assert!(
        s.starts_with("reviewer failed, coder-1 skipped, fixer running"),
        "{s}"
    );
    let reviewer = r.scope_in("@flow:main", "reviewer").await;
    assert!(
        r.messaging
            .inbox_peek(&reviewer, 10)
            .await
            .unwrap()
            .messages
            .is_empty(),
        "its prompt is withdrawn"
    );
    let outcome = r.steps.outcome(wid).await.unwrap().unwrap();
    assert!(
        outcome.failed.is_empty(),
        "fixer handles it: {:?}",
        outcome.failed
    );
}

/// Without a handler, a failed step is the graph's failure, in words.
#[tokio::test]
async fn an_unhandled_failure_is_the_graph_s() {
    let yaml = FLOW.split("  - agent: fixer").next().unwrap();
    let (r, wid) = started(yaml).await;
    r.steps
        .agent_failed(wid, "reviewer", "retries spent")
        .await
        .unwrap();
    let outcome = r.steps.outcome(wid).await.unwrap().unwrap();
    assert_eq!(
        outcome.failed,
        names(&["step reviewer (reviewer) failed: retries spent"])
    );
    let not_a_step = r
        .steps
        .agent_failed(wid + 1, "reviewer", "x")
        .await
        .unwrap();
    assert!(!not_a_step, "an instance without steps fails as a whole");
}

/// A message meets a step only from the sender it names, and never from the kernel.
#[tokio::test]
async fn a_message_step_starts_on_the_message_it_waits_for() {
    let (r, wid) = started(FLOW).await;
    let lead = r.scope_in("@flow:main", "user").await;
    let coder = r.scope_in("@flow:main", "coder").await;
    let send = |scope: &crate::Scope, text: &str| {
        let out = crate::messaging::Outgoing {
            message: text.into(),
            force: true,
            ..Default::default()
        };
        let (m, s) = (r.messaging.clone(), scope.clone());
        async move { m.channel_send(&s, out).await.unwrap().id }
    };
    let from_coder = send(&coder, "ship it now").await;
    r.steps.posted(wid, &from_coder).await.unwrap();
    assert!(states(&r, wid).await.ends_with("coder-2 waiting"));
    let other = send(&lead, "wait").await;
    r.steps.posted(wid, &other).await.unwrap();
    assert!(states(&r, wid).await.ends_with("coder-2 waiting"));
    let go = send(&lead, "ok, ship it").await;
    r.steps.posted(wid, &go).await.unwrap();
    assert!(states(&r, wid).await.ends_with("coder-2 running"));
}

/// A stopped instance's graph stays as it is, and a graph of another instance
/// is nobody's business here.
#[tokio::test]
async fn a_stopped_instance_s_graph_does_not_move() {
    let (r, wid) = started(FLOW).await;
    r.execute(
        "UPDATE workflows SET state = 'stopped' WHERE name = ?1",
        "flow",
    )
    .await;
    ack_all(&r, wid, "reviewer").await;
    assert!(
        states(&r, wid)
            .await
            .starts_with("reviewer running, coder-1 waiting")
    );
    assert!(r.steps.graph(wid + 1).is_empty());
    assert!(r.steps.outcome(wid + 1).await.unwrap().is_none());
}

/// A review that asks for a result, and the two steps that branch on its verdict.
const VERDICT: &str = r#"
name: flow
agents:
  reviewer: { backend: external }
  coder: { backend: external }
  fixer: { backend: external }
trigger: "PR 7 opened"
steps:
  - id: review
    agent: reviewer
    on: trigger
    action: "Review ${{ trigger }}"
    result: { type: object, properties: { verdict: { enum: [approved, changes_requested] } }, required: [verdict] }
  - { id: fix, agent: coder, on: { step: review, result: { verdict: changes_requested } }, action: "Fix" }
  - { id: ship, agent: fixer, on: { step: review, result: { verdict: approved } }, action: "Ship" }
"#;

#[tokio::test]
async fn a_step_that_asks_for_a_result_is_done_with_it_and_its_field_branches() {
    let cases: &[(Option<serde_json::Value>, &str)] = &[
        (
            Some(serde_json::json!({"verdict": "approved"})),
            "review done, fix skipped, ship running",
        ),
        (
            Some(serde_json::json!({"verdict": "changes_requested"})),
            "review done, fix running, ship skipped",
        ),
        (None, "review failed, fix skipped, ship skipped"),
    ];
    for (result, want) in cases {
        let (r, wid) = started(VERDICT).await;
        let reviewer = r.scope_in("@flow:main", "reviewer").await;
        if let Some(v) = result {
            let kept = r
                .messaging
                .result_submit(&reviewer, v.clone(), None, Some("review".into()))
                .await
                .unwrap();
            assert_eq!(kept.step.as_deref(), Some("review"));
        }
        ack_all(&r, wid, "reviewer").await;
        assert_eq!(states(&r, wid).await, *want, "{result:?}");
        let view = r.steps.view(wid).await.unwrap();
        assert_eq!(view[0].result, *result);
        if result.is_none() {
            let why = view[0].reason.as_deref().unwrap_or_default();
            assert!(why.contains("without submitting the result"), "{why}");
        }
    }
}
