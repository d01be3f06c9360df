//! The feedback room's decisions: a report refused stores and tells nothing, one
//! accepted is stored as trimmed, stamped by the room's clock and credited to the
//! member who gave it; a summary counts each kind and shows the newest first.

use crate::events::Event;
use crate::testing::{Rooms, T0, expect, said};
use domain::clock::fmt_ms;
use std::time::Duration;

#[tokio::test]
async fn a_refused_report_stores_and_tells_nothing() {
    let r = Rooms::new().await;
    r.agents(&["coder"]).await;
    let coder = r.scope("coder").await;
    let mut heard = r.events.subscribe();
    for (given, want) in [
        (
            ("praise", "x", "y"),
            "invalid: kind: \"praise\" is not a kind",
        ),
        (
            ("missing", "  ", "y"),
            "invalid: about: name the tool or skill",
        ),
        (("missing", "a\nb", "y"), "invalid: about: one name"),
        (
            ("missing", "x", " \n "),
            "invalid: text: say what was missing",
        ),
    ] {
        expect(&said(&r.feedback.report(&coder, given).await), want, &[]);
    }
    assert!(
        r.feedback
            .summary(coder.workflow_id, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(heard.try_recv().is_err(), "nothing announced");
}

#[tokio::test]
async fn a_report_is_trimmed_stamped_by_the_room_s_clock_and_credited_to_its_member() {
    let r = Rooms::new().await;
    r.agents(&["coder"]).await;
    let (coder, lead) = (r.scope("coder").await, r.scope("user").await);
    let first = r
        .feedback
        .report(&coder, (" friction ", " channel_send ", "  slow  "))
        .await
        .unwrap();
    assert_eq!(
        (
            first.member.as_str(),
            first.about.as_str(),
            first.text.as_str()
        ),
        ("coder", "channel_send", "slow")
    );
    assert_eq!(first.at, fmt_ms(T0));
    r.clock.advance(Duration::from_secs(90));
    let second = r
        .feedback
        .report(&lead, ("suggestion", "doc_read", "page it"))
        .await
        .unwrap();
    assert_eq!(
        (second.member.as_str(), second.at.clone()),
        ("user", fmt_ms(T0 + 90_000))
    );
}

/// Counts by kind over everything kept; the newest reports first, as many as asked.
#[tokio::test]
async fn a_summary_counts_each_kind_and_shows_the_newest_first() {
    let r = Rooms::new().await;
    r.agents(&["coder"]).await;
    let coder = r.scope("coder").await;
    for (kind, about) in [
        ("missing", "a"),
        ("friction", "b"),
        ("missing", "c"),
        ("suggestion", "d"),
    ] {
        r.feedback
            .report(&coder, (kind, about, "text"))
            .await
            .unwrap();
    }
    let s = r.feedback.summary(coder.workflow_id, 2).await.unwrap();
    assert_eq!((s.missing, s.friction, s.suggestion), (2, 1, 1));
    let newest: Vec<&str> = s.newest.iter().map(|f| f.about.as_str()).collect();
    assert_eq!(newest, ["d", "c"]);
    let counts_only = r.feedback.summary(coder.workflow_id, 0).await.unwrap();
    assert!(counts_only.newest.is_empty() && !counts_only.is_empty());
}

/// Only an instance's first report is news (the list of resources changes).
#[tokio::test]
async fn only_an_instance_s_first_report_is_news() {
    let r = Rooms::new().await;
    r.agents(&["coder"]).await;
    r.agent_in("@review:pr-1", "coder", "mock").await;
    let here = r.scope("coder").await;
    let there = r.scope_in("@review:pr-1", "coder").await;
    let mut heard = r.events.subscribe();
    for scope in [&here, &here, &there] {
        r.feedback
            .report(scope, ("missing", "x", "y"))
            .await
            .unwrap();
    }
    let mut got = Vec::new();
    while let Ok(Event::FeedbackGiven { workflow_id, first }) = heard.try_recv() {
        got.push((workflow_id, first));
    }
    assert_eq!(
        got,
        [
            (here.workflow_id, true),
            (here.workflow_id, false),
            (there.workflow_id, true)
        ]
    );
}
