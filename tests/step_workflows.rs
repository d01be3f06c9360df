//! Step workflows (`trigger:` and `steps:`) end to end over MCP with mock agents
//! that never mention anyone: the seed's code review runs its steps in order,
//! each prompt carrying the previous step's final text; a failed step skips what
//! waits for it and fails the instance, unless a step handles it; fan-out, a join
//! and a message event; a loop is refused at load; a kernel killed in the middle
//! of step 2 runs step 2 again after the restart and step 3 once.

use crate::common;
use common::*;
use serde_json::{Value, json};
use std::time::Duration;

/// The seed's code review. `sleep` slows the coder (for the kill test).
fn review(coder_rules: &str) -> String {
    format!(
        r#"
name: code-review
params: [ {{ name: pr, required: true }} ]
agents:
  reviewer:
    backend: mock
    mock:
      - {{ when: "step reviewer-1", reply: "finding: unused import in lib.rs" }}
      - {{ when: "step reviewer-2", reply: "approved" }}
  coder:
    backend: mock
    mock: {coder_rules}
trigger: "PR ${{{{ params.pr }}}} opened"
steps:
  - agent: reviewer
    on: trigger
    action: "Review ${{{{ trigger }}}}"
  - agent: coder
    on: reviewer.complete
    action: "Address: ${{{{ previous.output }}}}"
  - agent: reviewer
    on: coder.complete
    action: "Verify the fixes (${{{{ previous.output }}}}) for ${{{{ steps.reviewer-1 }}}}"
"#
    )
}

async fn run(lead: &Client, yaml: &str, wait: u64) -> Value {
    call(
        lead,
        "workflow_run",
        json!({"yaml": yaml, "params": {"pr": 7}, "wait_seconds": wait}),
    )
    .await
    .ok()
}

fn steps(status: &Value) -> Vec<(String, String)> {
    status["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("no steps: {status}"))
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().into(),
                s["state"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(a, b)| ((*a).into(), (*b).into())).collect()
}

async fn channel(lead: &Client, workflow: &str) -> Vec<(String, String)> {
    call(
        lead,
        "channel_read",
        json!({"workflow": workflow, "limit": 200}),
    )
    .await
    .ok()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["from"].as_str().unwrap().into(),
                m["content"].as_str().unwrap().into(),
            )
        })
        .collect()
}

/// The bundled example (the README's), run as a user would.
#[tokio::test]
async fn the_seeds_code_review_runs_its_steps_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/workflows/code-review-steps.yaml");
    let args = json!({"file": file, "params": {"pr": 7}, "wait_seconds": 40});
    let r = call(&lead, "workflow_run", args).await.ok();
    assert_eq!(r["status"], "completed", "{r}");
    let st = call(
        &lead,
        "workflow_status",
        json!({"workflow": "@code-review-steps"}),
    )
    .await
    .ok();
    assert_eq!(
        steps(&st),
        pairs(&[
            ("reviewer-1", "done"),
            ("coder", "done"),
            ("reviewer-2", "done")
        ])
    );
    let ended = |i: usize| st["steps"][i]["ended_at"].as_str().unwrap().to_owned();
    let started = |i: usize| st["steps"][i]["started_at"].as_str().unwrap().to_owned();
    assert!(ended(0) <= started(1) && ended(1) <= started(2), "{st}");
    // Only the kernel spoke: the prompts, each with what the step before ended with.
    let msgs = channel(&lead, "@code-review-steps").await;
    assert_eq!(
        msgs,
        pairs(&[
            (
                "system",
                "@reviewer (step reviewer-1) Review pull request 7 opened; post findings"
            ),
            (
                "system",
                "@coder (step coder) Address the findings: finding: unused import in lib.rs"
            ),
            (
                "system",
                "@reviewer (step reviewer-2) Verify the fixes (fixed the import); approve or request changes"
            ),
        ])
    );
    // The steps are the instance's contracts, in the same sentences.
    let list = call(
        &lead,
        "contract_list",
        json!({"workflow": "@code-review-steps"}),
    )
    .await
    .ok();
    let says: Vec<&str> = list["contracts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["source"] == "steps")
        .map(|c| c["says"].as_str().unwrap())
        .collect();
    assert_eq!(says.len(), 3, "{list}");
    assert!(
        says[1].starts_with(
            "When step reviewer-1 completes, run step coder: @coder with \"Address the findings: ${{ previous.output }}\""
        ),
        "{}",
        says[1]
    );
    // contract_set does not make steps.
    let e = call(
        &lead,
        "contract_set",
        json!({"name": "x", "when": {"event": "step", "on": ["trigger"]},
               "then": {"action": "run", "step": "x", "agent": "coder", "prompt": "go"}}),
    )
    .await
    .err();
    assert!(e.contains("steps:"), "{e}");
    s.stop().await;
}

#[tokio::test]
async fn a_failed_step_skips_what_waits_for_it_and_fails_the_instance() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start_with_env(dir.path(), &[SHORT_RETRIES]).await;
    let lead = s.lead(Proto::Legacy).await;
    let r = run(&lead, &review(r#"[ { fail: "compile error" } ]"#), 40).await;
    assert_eq!(r["status"], "failed", "{r}");
    let why = r["reason"].as_str().unwrap();
    assert!(
        why.contains("step coder (coder) failed") && why.contains("compile error"),
        "{r}"
    );
    assert_eq!(
        steps(&r),
        pairs(&[
            ("reviewer-1", "done"),
            ("coder", "failed"),
            ("reviewer-2", "skipped")
        ])
    );
    assert_eq!(r["steps"][2]["reason"], "step coder failed", "{r}");

    // A step that waits for the failure handles it: the instance completes.
    let yaml = review(r#"[ { fail: "compile error" } ]"#)
        .replace("name: code-review", "name: handled")
        + "  - { id: triage, agent: reviewer, on: coder.failed, prompt: \"Triage: the fix failed\" }\n";
    let r = run(&lead, &yaml, 40).await;
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(
        steps(&r),
        pairs(&[
            ("reviewer-1", "done"),
            ("coder", "failed"),
            ("reviewer-2", "skipped"),
            ("triage", "done")
        ])
    );
    s.stop().await;
}

#[tokio::test]
async fn fan_out_join_and_a_message_event() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let yaml = r#"
name: release
agents:
  a: { backend: mock, mock: [ { reply: "a's part" } ] }
  b: { backend: mock, mock: [ { reply: "b's part" } ] }
  c: { backend: mock, mock: [ { reply: "shipped" } ] }
trigger: "release 1.2"
steps:
  - { agent: a, on: trigger, prompt: "build ${{ trigger }}" }
  - { agent: b, on: trigger, prompt: "notes for ${{ trigger }}" }
  - { id: bundle, agent: c, on: [a.complete, b.complete], prompt: "bundle ${{ previous.output }}" }
  - { id: ship, agent: c, on: [bundle.complete, { message: "(?i)ship it", from: user }], prompt: "ship" }
"#;
    let r = call(
        &lead,
        "workflow_run",
        json!({"yaml": yaml, "wait_seconds": 3}),
    )
    .await
    .ok();
    // Everything but the step that waits for the lead's word.
    assert_eq!(r["status"], "running", "{r}");
    // Long polls pace the loop: the status stays running while the step waits.
    let end = std::time::Instant::now() + Duration::from_secs(30);
    let st = loop {
        let st = call(
            &lead,
            "workflow_status",
            json!({"workflow": "@release", "wait_seconds": 1}),
        )
        .await
        .ok();
        if st["reason"]
            .as_str()
            .is_some_and(|r| r.contains("steps wait for"))
        {
            break st;
        }
        assert!(
            std::time::Instant::now() < end,
            "never waited for the message: {st}"
        );
    };
    assert_eq!(
        steps(&st),
        pairs(&[
            ("a", "done"),
            ("b", "done"),
            ("bundle", "done"),
            ("ship", "waiting")
        ])
    );
    assert!(
        st["reason"]
            .as_str()
            .unwrap()
            .contains("a message from user matches"),
        "{st}"
    );
    let bundle = channel(&lead, "@release").await;
    assert!(
        bundle
            .iter()
            .any(|(_, t)| t == "@c (step bundle) bundle step a:\na's part\n\nstep b:\nb's part"),
        "{bundle:?}"
    );
    call(
        &lead,
        "channel_send",
        json!({"workflow": "@release", "message": "Ship it!"}),
    )
    .await
    .ok();
    let st = finished(&lead, "@release").await;
    assert_eq!(st["status"], "completed", "{st}");
    assert_eq!(st["steps"][3]["state"], "done", "{st}");
    s.stop().await;
}

#[tokio::test]
async fn a_loop_is_refused_at_load_and_nothing_starts() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let yaml = "name: loop\nagents:\n  a: { backend: mock }\n  b: { backend: mock }\nsteps:\n  \
                - { id: fix, agent: a, on: verify.complete, prompt: x }\n  \
                - { id: verify, agent: b, on: fix.complete, prompt: y }\n";
    let e = call(&lead, "workflow_run", json!({"yaml": yaml}))
        .await
        .err();
    assert!(
        e.contains("<inline>:7:33") && e.contains("fix -> verify -> fix"),
        "{e}"
    );
    let list = call(&lead, "workflow_list", json!({})).await.ok();
    assert!(!list.to_string().contains("@loop"), "{list}");
    s.stop().await;
}

#[tokio::test]
async fn a_kernel_killed_in_step_2_runs_it_again_and_step_3_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let slow = r#"[ { when: "step coder", sleep: 3s }, { when: "step coder", reply: "fixed the import" } ]"#;
    run(&lead, &review(slow), 0).await;
    wait_info(&lead, "coder@code-review", 30, |i| {
        i.get("running").is_some()
    })
    .await;
    s.kill().await;

    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let st = finished(&lead, "@code-review").await;
    assert_eq!(st["status"], "completed", "{st}");
    assert_eq!(
        steps(&st),
        pairs(&[
            ("reviewer-1", "done"),
            ("coder", "done"),
            ("reviewer-2", "done")
        ])
    );
    let coder = info(&lead, "coder@code-review").await;
    let runs: Vec<&str> = coder["runs"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(runs, ["lost", "succeeded"], "{coder}");
    let verify: Vec<_> = channel(&lead, "@code-review")
        .await
        .into_iter()
        .filter(|(_, t)| t.contains("(step reviewer-2)"))
        .collect();
    assert_eq!(verify.len(), 1, "step 3 posted once: {verify:?}");
    assert!(
        verify[0]
            .1
            .ends_with("Verify the fixes (fixed the import) for finding: unused import in lib.rs"),
        "{verify:?}"
    );
    let reviewer = info(&lead, "reviewer@code-review").await;
    assert_eq!(reviewer["runs"].as_array().unwrap().len(), 2, "{reviewer}");
    s.stop().await;
}

/// A step of a member without a worker (a joined client, or a person): done when
/// it acknowledges the step's prompt.
#[tokio::test]
async fn a_joined_member_finishes_its_step_by_acknowledging_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let yaml = r#"
name: signoff
agents:
  coder: { backend: mock, mock: [ { reply: "done" } ] }
  reviewer: { backend: external }
trigger: "ship 1.0"
steps:
  - { agent: coder, on: trigger, prompt: "build ${{ trigger }}" }
  - { agent: reviewer, on: coder.complete, prompt: "sign off on ${{ previous.output }}" }
  - { id: release, agent: coder, on: reviewer.complete, prompt: "release" }
"#;
    call(&lead, "workflow_run", json!({"yaml": yaml}))
        .await
        .ok();
    let reviewer = join(&s, &lead, "reviewer@signoff", Proto::Modern).await;
    let end = std::time::Instant::now() + Duration::from_secs(30);
    let id = loop {
        let inbox = call(&reviewer, "my_inbox", json!({})).await.ok();
        if let Some(m) = inbox["messages"].as_array().and_then(|m| m.first()) {
            assert!(
                m["content"]
                    .as_str()
                    .unwrap()
                    .contains("(step reviewer) sign off on done"),
                "{m}"
            );
            break m["id"].as_str().unwrap().to_owned();
        }
        assert!(
            std::time::Instant::now() < end,
            "the step never reached the reviewer"
        );
        call(
            &lead,
            "workflow_status",
            json!({"workflow": "@signoff", "wait_seconds": 1}),
        )
        .await
        .ok();
    };
    call(&reviewer, "my_inbox_ack", json!({"message_id": id}))
        .await
        .ok();
    let st = finished(&lead, "@signoff").await;
    assert_eq!(st["status"], "completed", "{st}");
    assert_eq!(
        steps(&st),
        pairs(&[
            ("coder-1", "done"),
            ("reviewer", "done"),
            ("release", "done")
        ])
    );
    s.stop().await;
}

/// A param's value is text, never read again for `${{ }}`; a prompt left empty by
/// its params refuses the start.
#[tokio::test]
async fn params_are_filled_in_once_and_an_empty_prompt_refuses_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let yaml = r#"
name: once
params: [ { name: title } ]
agents:
  a: { backend: mock, mock: [ { reply: "SECRET" } ] }
  b: { backend: mock }
trigger: "go"
steps:
  - { agent: a, on: trigger, prompt: "first" }
  - { agent: b, on: a.complete, prompt: "title: ${{ params.title }}; trigger: ${{ trigger }}" }
"#;
    let args =
        json!({"yaml": yaml, "params": {"title": "${{ steps.a }} 50% ${{"}, "wait_seconds": 30});
    let r = call(&lead, "workflow_run", args).await.ok();
    assert_eq!(r["status"], "completed", "{r}");
    let msgs = channel(&lead, "@once").await;
    assert_eq!(
        msgs[1].1, "@b (step b) title: ${{ steps.a }} 50% ${{; trigger: go",
        "{msgs:?}"
    );
    let e = call(
        &lead,
        "workflow_run",
        json!({"yaml": yaml.replace("title: ${{ params.title }}; trigger: ${{ trigger }}", "${{ params.title }}")
            .replace("name: once", "name: empty"), "params": {"title": " "}}),
    )
    .await
    .err();
    assert!(e.contains("steps.b.prompt is empty"), "{e}");
    s.stop().await;
}

/// Run again after workflow_stop, a step workflow's agents never see the stopped
/// run's prompts.
#[tokio::test]
async fn a_run_again_withdraws_the_prompts_of_the_stopped_one() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let slow = r#"[ { when: "step coder", sleep: 3s }, { when: "step coder", reply: "fixed the import" } ]"#;
    run(&lead, &review(slow), 0).await;
    wait_info(&lead, "coder@code-review", 30, |i| {
        i.get("running").is_some()
    })
    .await;
    call(&lead, "workflow_stop", json!({"workflow": "@code-review"}))
        .await
        .ok();
    let coder = info(&lead, "coder@code-review").await;
    assert_eq!(
        coder["inbox"]["pending"], 1,
        "the stopped run's prompt: {coder}"
    );
    let r = run(&lead, &review(slow), 40).await;
    assert_eq!(r["status"], "completed", "{r}");
    let coder = info(&lead, "coder@code-review").await;
    let ok: Vec<&Value> = coder["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "succeeded")
        .collect();
    assert_eq!(ok.len(), 1, "{coder}");
    let read = ok[0]["prompt_summary"].as_str().unwrap_or_default();
    assert!(read.contains("1 message"), "the new prompt alone: {read}");
    s.stop().await;
}

/// A step that waits for a document: written through the kernel (by the lead
/// here), it runs.
#[tokio::test]
async fn a_document_written_starts_the_step_that_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let yaml = r#"
name: reports
agents:
  editor: { backend: mock, mock: [ { reply: "published" } ] }
steps:
  - { agent: editor, on: { document: "reports/*.md" }, prompt: "publish the report" }
"#;
    let r = call(
        &lead,
        "workflow_run",
        json!({"yaml": yaml, "wait_seconds": 2}),
    )
    .await
    .ok();
    assert_eq!(r["steps"][0]["state"], "waiting", "{r}");
    call(
        &lead,
        "team_doc_write",
        json!({"workflow": "@reports", "file": "notes/draft.md", "content": "not yet"}),
    )
    .await
    .ok();
    call(
        &lead,
        "team_doc_write",
        json!({"workflow": "@reports", "file": "reports/q3.md", "content": "# Q3"}),
    )
    .await
    .ok();
    let st = finished(&lead, "@reports").await;
    assert_eq!(st["status"], "completed", "{st}");
    assert_eq!(steps(&st), pairs(&[("editor", "done")]));
    s.stop().await;
}

/// A step that waits for a task of the board: it runs when a task whose title
/// matches is done, not when one is added or claimed, nor for another title.
#[tokio::test]
async fn a_task_done_starts_the_step_that_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let yaml = r#"
name: release
agents:
  shipper: { backend: mock, mock: [ { reply: "shipped" } ] }
steps:
  - { agent: shipper, on: { task: "Build *" }, prompt: "ship the build" }
"#;
    let r = call(
        &lead,
        "workflow_run",
        json!({"yaml": yaml, "wait_seconds": 2}),
    )
    .await
    .ok();
    assert_eq!(r["steps"][0]["state"], "waiting", "{r}");
    let plan = json!({"workflow": "@release", "plan": [
        {"name": "d", "title": "Write the docs"}, {"name": "b", "title": "Build the CLI"}]});
    let added = call(&lead, "task_add", plan).await.ok();
    let (docs, build) = (&added["tasks"][0]["id"], &added["tasks"][1]["id"]);
    for (id, state) in [(docs, "claimed"), (docs, "done"), (build, "claimed")] {
        let args = if state == "claimed" {
            ("task_claim", json!({"workflow": "@release", "id": id}))
        } else {
            (
                "task_update",
                json!({"workflow": "@release", "id": id, "state": state}),
            )
        };
        call(&lead, args.0, args.1).await.ok();
    }
    let st = call(&lead, "workflow_status", json!({"workflow": "@release"}))
        .await
        .ok();
    assert_eq!(steps(&st), pairs(&[("shipper", "waiting")]), "{st}");
    call(
        &lead,
        "task_update",
        json!({"workflow": "@release", "id": build, "state": "done"}),
    )
    .await
    .ok();
    let st = finished(&lead, "@release").await;
    assert_eq!(st["status"], "completed", "{st}");
    assert_eq!(steps(&st), pairs(&[("shipper", "done")]));
    s.stop().await;
}
