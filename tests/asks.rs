//! agent_ask and agent identity under pressure: a question is answered by the run
//! that read it, however close together questions come, and a new agent never
//! inherits anything of a deleted one.

use crate::common;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

/// A deleted agent's id is never handed to the next agent: before, `fresh` got
/// `old`'s id and with it old's runs (final texts of another workflow) and its
/// runs-per-hour count.
#[tokio::test]
async fn a_new_agent_inherits_nothing_from_a_deleted_one() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "old", "backend": "mock", "workflow": "@w1",
               "mock": [{"reply": "secret of w1"}]}),
    )
    .await
    .ok();
    for _ in 0..3 {
        let r = ask(&lead, "old@w1", "hello", 30).await;
        assert_eq!(r["status"], "succeeded", "{r}");
    }
    call(&lead, "agent_delete", json!({"target": "old@w1"}))
        .await
        .ok();
    call(
        &lead,
        "agent_new",
        json!({"name": "fresh", "backend": "mock", "workflow": "@w2",
               "budget": {"max_runs_per_hour": 3}}),
    )
    .await
    .ok();
    let i = info(&lead, "fresh@w2").await;
    assert_eq!(i["runs"], json!([]), "{i}");
    assert_eq!(i["usage"]["runs"], 0, "{i}");
    assert!(!i.to_string().contains("secret of w1"), "{i}");

    // Woken by a message (the scheduler's gate applies the guard): three runs fit.
    for n in 1..=3 {
        call(
            &lead,
            "channel_send",
            json!({"workflow": "@w2", "message": format!("@fresh round {n}")}),
        )
        .await
        .ok();
        let i = wait_info(&lead, "fresh@w2", 30, |i| {
            i["usage"]["runs"] == n && i.get("running").is_none()
        })
        .await;
        assert_eq!(i["agent"]["state"], "idle", "round {n}: {i}");
    }
}

/// Two questions a few milliseconds apart: the first run usually reads both. Each
/// call must come back with the run that read its question, not wait its whole
/// wait_seconds and say `waiting`.
#[tokio::test]
async fn questions_close_together_are_each_answered_by_the_run_that_read_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let lead2 = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "bob", "backend": "mock",
               "mock": [{"send": "@user got: {message}", "reply": "bob read it"}]}),
    )
    .await
    .ok();
    let mut shared = 0;
    for round in 0..3 {
        let first = format!("first {round}");
        let t = Instant::now();
        let (a, b) = tokio::join!(ask(&lead, "bob", &first, 20), async {
            tokio::time::sleep(Duration::from_millis(3)).await;
            ask(&lead2, "bob", &format!("second {round}"), 20).await
        });
        for r in [&a, &b] {
            assert_eq!(r["status"], "succeeded", "round {round}: {a} / {b}");
            assert!(r["run_id"].is_string(), "round {round}: {r}");
        }
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "round {round} took {:?}: a call waited out its wait_seconds",
            t.elapsed()
        );
        let said = b["reply"]["messages"].to_string();
        assert!(said.contains(&format!("second {round}")), "{b}");
        if a["run_id"] == b["run_id"] {
            shared += 1;
        }
        settled(&lead, "bob").await;
    }
    eprintln!("rounds where one run answered both questions: {shared} of 3");
}
