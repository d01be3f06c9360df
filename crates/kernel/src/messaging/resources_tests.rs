//! Resources: which contents are accepted (a known type, not empty, at most a
//! mebibyte, valid JSON for `json`), and their ids, the content's hash: the same
//! content is one resource, its first author's, read by id or by URI.

use super::resources::{MAX_RESOURCE_BYTES, URI_PREFIX};
use crate::testing::{Rooms, expect, said};

#[tokio::test]
async fn a_resource_is_a_known_type_not_empty_and_at_most_a_mebibyte() {
    let r = Rooms::new().await;
    r.agents(&["alice"]).await;
    let alice = r.scope("alice").await;
    for (content, kind, want) in [
        (
            "x".to_owned(),
            Some("pdf"),
            "invalid: type \"pdf\" is not one of text, markdown, json, diff",
        ),
        (String::new(), None, "invalid: content is empty"),
        (
            "x".repeat(MAX_RESOURCE_BYTES + 1),
            None,
            "invalid: content is 1048577 bytes",
        ),
        (
            "{not json".to_owned(),
            Some("json"),
            "invalid: type is json but the content is not valid JSON",
        ),
        ("{\"ok\": true}".to_owned(), Some("json"), "ok"),
        ("x".repeat(MAX_RESOURCE_BYTES), Some("diff"), "ok"),
    ] {
        expect(
            &said(&r.messaging.resource_create(&alice, content, kind).await),
            want,
            &[],
        );
    }
}

#[tokio::test]
async fn the_same_content_is_one_resource_of_its_first_author() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob"]).await;
    let (alice, bob) = (r.scope("alice").await, r.scope("bob").await);
    let first = r
        .messaging
        .resource_create(&alice, "the plan".into(), Some("markdown"))
        .await
        .unwrap();
    let again = r
        .messaging
        .resource_create(&bob, "the plan".into(), None)
        .await
        .unwrap();
    assert_eq!(
        (first.created, again.created, &again.id),
        (true, false, &first.id)
    );
    assert_eq!(first.uri, format!("{URI_PREFIX}{}", first.id));
    let other = r
        .messaging
        .resource_create(&bob, "another plan".into(), None)
        .await
        .unwrap();
    assert_ne!(other.id, first.id);
    for name in [
        first.id.clone(),
        first.uri.clone(),
        format!("resource:{}", first.id),
    ] {
        let read = r.messaging.resource_read(&name).await.unwrap();
        assert_eq!(
            (
                read.content.as_str(),
                read.kind.as_str(),
                read.created_by.as_str()
            ),
            ("the plan", "markdown", "alice")
        );
    }
    expect(
        &said(&r.messaging.resource_read("nope").await),
        "not found: no resource \"nope\"",
        &[],
    );
}
