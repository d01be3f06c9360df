//! Results with a shape in the messaging room: an ask that gives a schema shows it
//! in its agent's inbox, and result_submit's answers, submission by submission, on
//! a manual clock.

use super::Outgoing;
use crate::testing::{Rooms, expect, said};
use domain::result_schema::ResultSchema;
use serde_json::{Value, json};

/// The lead asks `agent` `text`, with `schema` if given; the message id.
async fn ask(r: &Rooms, agent: &str, text: &str, schema: Option<Value>) -> String {
    let scope = r.scope("user").await;
    let send = Outgoing {
        message: text.into(),
        to: Some(agent.into()),
        force: true,
        urgent: false,
    };
    let expect = schema.map(|s| (agent.to_owned(), ResultSchema::parse(&s).unwrap()));
    r.messaging.ask_send(&scope, send, expect).await.unwrap().id
}

#[tokio::test]
async fn a_result_is_checked_against_what_was_asked_and_kept_once() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob"]).await;
    let schema = json!({"type": "object", "required": ["verdict"],
                        "properties": {"verdict": {"enum": ["approved", "changes_requested"]}}});
    let a = ask(&r, "alice", "review it", Some(schema.clone())).await;
    let plain = ask(&r, "alice", "how are you?", None).await;
    let c = ask(&r, "bob", "review that", Some(schema.clone())).await;
    let inbox = r
        .messaging
        .inbox_peek(&r.scope("alice").await, 10)
        .await
        .unwrap();
    let shown: Vec<Option<&Value>> = inbox
        .messages
        .iter()
        .map(|m| m.result_schema.as_ref())
        .collect();
    assert_eq!(shown, [Some(&schema), None]);
    let fit = json!({"verdict": "approved"});
    let big = json!({"verdict": "x".repeat(70_000)});
    // (who, which ask, result, what they are told: its start, and words in it)
    type Case<'a> = (&'a str, Option<&'a str>, &'a Value, &'a str, &'a [&'a str]);
    let cases: &[Case] = &[
        (
            "alice",
            None,
            &json!({"verdict": "maybe"}),
            "invalid: the result does not fit the schema of the ask",
            &["result.verdict: expected one of approved, changes_requested; got \"maybe\". Fix it"],
        ),
        ("alice", None, &big, "invalid: result: ", &["at most 65536"]),
        (
            "bob",
            Some(&a),
            &fit,
            "not found: no ask",
            &["of yours asked for a result"],
        ),
        ("alice", Some(&plain), &fit, "not found: no ask", &[]),
        ("alice", Some("  "), &fit, "not found: no ask \"\"", &[]),
        ("alice", None, &fit, "ok", &[]),
        (
            "alice",
            None,
            &fit,
            "invalid: nothing asked of alice awaits a result",
            &[],
        ),
        (
            "alice",
            Some(&a),
            &fit,
            "conflict: the ask",
            &["already has its result"],
        ),
        ("user", None, &fit, "invalid: nothing asked of user", &[]),
        ("bob", Some(&c), &fit, "ok", &[]),
    ];
    for (who, which, result, want, also) in cases {
        let scope = r.scope(who).await;
        let got = r
            .messaging
            .result_submit(&scope, (*result).clone(), which.map(str::to_owned), None)
            .await;
        expect(&said(&got), want, also);
    }
    let wid = r.scope("alice").await.workflow_id;
    assert_eq!(
        r.messaging.result_of(wid, &a).await.unwrap(),
        Some(fit.clone())
    );
    assert_eq!(r.messaging.result_of(wid, &plain).await.unwrap(), None);
    // Answered, the ask no longer shows its schema.
    let inbox = r
        .messaging
        .inbox_peek(&r.scope("alice").await, 10)
        .await
        .unwrap();
    assert!(inbox.messages.iter().all(|m| m.result_schema.is_none()));
}
