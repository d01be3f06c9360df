//! Seed 000's feedback loop over MCP: an agent reports what it lacked about a tool
//! or skill (my_feedback), bad reports are refused naming the field, and the lead
//! reads it in workflow_status, in the instance's `feedback` resource and in the
//! `organise` prompt; another instance's agent cannot read it.

use crate::common;
use common::*;
use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::{Value, json};

const URI: &str = "agent-worker://workflows/review/pr-1/feedback";

async fn resource(c: &Client, uri: &str) -> Result<Value, String> {
    let r = c
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .map_err(|e| e.to_string())?;
    let text = match &r.contents[0] {
        rmcp::model::ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("not text: {other:?}"),
    };
    Ok(serde_json::from_str(&text).unwrap())
}

#[tokio::test]
async fn an_agents_feedback_reaches_the_lead_and_the_organise_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    new_agents(&lead, "@review:pr-1", &["coder"]).await;
    new_agents(&lead, "@other:main", &["stranger"]).await;
    let coder = join(&s, &lead, "coder@review:pr-1", Proto::Legacy).await;
    let stranger = join(&s, &lead, "stranger@other:main", Proto::Modern).await;

    let r = call(
        &coder,
        "my_feedback",
        json!({"kind": "missing", "about": "run_tests",
               "text": "I could not run the test suite, so I pushed untested fixes"}),
    )
    .await
    .ok();
    assert_eq!(r["feedback"]["member"], "coder", "{r}");
    assert_eq!(r["feedback"]["kind"], "missing", "{r}");
    for (args, says) in [
        (
            json!({"kind": "bug", "about": "x", "text": "y"}),
            "kind: \"bug\" is not a kind",
        ),
        (
            json!({"kind": "friction", "about": " ", "text": "y"}),
            "about:",
        ),
        (
            json!({"kind": "friction", "about": "x", "text": "y".repeat(2001)}),
            "text: at most 2000",
        ),
    ] {
        let e = call(&coder, "my_feedback", args).await.err();
        assert!(e.contains(says), "{says}: {e}");
    }
    call(
        &coder,
        "my_feedback",
        json!({"kind": "friction", "about": "channel_send", "text": "mentions are easy to forget"}),
    )
    .await
    .ok();

    let st = call(
        &lead,
        "workflow_status",
        json!({"workflow": "@review:pr-1"}),
    )
    .await
    .ok();
    let f = &st["feedback"];
    assert_eq!(
        (&f["missing"], &f["friction"]),
        (&json!(1), &json!(1)),
        "{st}"
    );
    assert_eq!(
        f["newest"][0]["about"], "channel_send",
        "newest first: {st}"
    );
    let other = call(&lead, "workflow_status", json!({"workflow": "@other:main"}))
        .await
        .ok();
    assert!(other.get("feedback").is_none(), "{other}");

    let listed = lead.list_all_resources().await.unwrap();
    assert!(listed.iter().any(|r| r.uri == URI), "{listed:?}");
    let none = "agent-worker://workflows/other/main/feedback";
    assert!(
        !listed.iter().any(|r| r.uri == none),
        "listed once there is some"
    );
    let all = resource(&lead, URI).await.unwrap();
    assert_eq!(all["newest"].as_array().map(Vec::len), Some(2), "{all}");
    assert!(resource(&coder, URI).await.is_ok());
    let e = resource(&stranger, URI).await.unwrap_err();
    assert!(e.contains("not found") || e.contains("unknown"), "{e}");

    let mut args = serde_json::Map::new();
    args.insert("workflow".into(), json!("@review:pr-1"));
    let p = lead
        .get_prompt(GetPromptRequestParams::new("organise").with_arguments(args))
        .await
        .unwrap();
    let text = serde_json::to_string(&p.messages).unwrap();
    assert!(
        text.contains("1 missing, 1 friction")
            && text.contains("missing about run_tests, from coder: I could not run the test suite")
            && text.contains(URI),
        "{text}"
    );
    s.stop().await;
}
