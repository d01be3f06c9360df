//! The table of runs in progress, case by case: claiming an agent, a run that
//! already served a question, wakes remembered during a run (and the prompt they
//! keep), a hold for an approval, a stop. In memory: no worker, no store.

use super::{Active, Claim, Running};
use domain::states::Wake;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

/// A run `run_id` as the process manager claims it.
fn active(run_id: &str) -> Active {
    let (_, done) = watch::channel(false);
    Active {
        run_id: run_id.to_owned(),
        stop: CancellationToken::new(),
        done,
        progress: broadcast::channel(4).0,
        wake_again: None,
        held: Arc::default(),
        held_file: format!("/nonexistent/{run_id}/held").into(),
        denials: Arc::default(),
        _worktree: None,
    }
}

/// What claiming agent 1 for run `run_id` (after message `after`) found, short.
fn claim(t: &Running, run_id: &str, after: Option<&str>) -> String {
    match t.claim_unless_served(1, active(run_id), after) {
        Claim::Claimed(h) => format!("claimed {}", h.run_id),
        Claim::Busy => "busy".to_owned(),
        Claim::Served(r) => format!("served by {r}"),
    }
}

/// The wake remembered for agent 1's next run, short.
fn remembered(t: &Running) -> String {
    match t.finish(1) {
        None => "none".to_owned(),
        Some((w, None)) => w.to_string(),
        Some((w, Some(p))) => format!("{w}({p})"),
    }
}

#[test]
fn an_idle_agent_is_claimed() {
    let t = Running::default();
    assert_eq!(claim(&t, "r1", None), "claimed r1");
    assert_eq!(t.count(), 1);
    assert!(t.any(&[1, 2]) && !t.any(&[2]));
}

#[test]
fn a_running_agent_is_busy() {
    let t = Running::default();
    claim(&t, "r1", None);
    assert_eq!(claim(&t, "r2", None), "busy");
}

#[test]
fn a_run_started_after_the_question_has_served_it() {
    let t = Running::default();
    claim(&t, "0002", None);
    t.started(1, "0002");
    t.finish(1);
    assert_eq!(claim(&t, "0003", Some("0001")), "served by 0002");
}

#[test]
fn a_run_started_before_the_question_has_not_served_it() {
    let t = Running::default();
    claim(&t, "0001", None);
    t.started(1, "0001");
    t.finish(1);
    assert_eq!(claim(&t, "0003", Some("0002")), "claimed 0003");
}

#[test]
fn a_forgotten_agent_has_no_latest_run() {
    let t = Running::default();
    claim(&t, "0002", None);
    t.started(1, "0002");
    t.finish(1);
    t.forget(1);
    assert_eq!(claim(&t, "0003", Some("0001")), "claimed 0003");
}

#[test]
fn a_wake_during_a_run_is_remembered_once() {
    let t = Running::default();
    claim(&t, "r1", None);
    assert!(t.remember_wake(1, Wake::Message, None).is_some());
    assert!(t.remember_wake(1, Wake::Retry, None).is_some());
    assert_eq!(remembered(&t), "message");
    assert_eq!(remembered(&t), "none", "the run is gone");
}

#[test]
fn a_prompt_fills_a_remembered_wake_without_one() {
    let t = Running::default();
    claim(&t, "r1", None);
    t.remember_wake(1, Wake::Message, None);
    t.remember_wake(1, Wake::Schedule, Some("digest"));
    t.remember_wake(1, Wake::Schedule, Some("later"));
    assert_eq!(remembered(&t), "schedule(digest)");
}

#[test]
fn an_idle_agent_remembers_nothing() {
    let t = Running::default();
    assert!(t.remember_wake(1, Wake::Message, None).is_none());
    assert!(t.remember_wake_before(1, Wake::Ask, "m1").is_none());
}

#[test]
fn a_question_after_the_run_started_is_remembered() {
    let t = Running::default();
    claim(&t, "0001", None);
    assert!(t.remember_wake_before(1, Wake::Ask, "0002").is_some());
    assert_eq!(remembered(&t), "ask");
}

#[test]
fn a_question_before_the_run_started_is_read_by_it() {
    let t = Running::default();
    claim(&t, "0002", None);
    assert!(t.remember_wake_before(1, Wake::Ask, "0001").is_some());
    assert_eq!(remembered(&t), "none");
}

#[test]
fn a_stop_forgets_the_remembered_wake() {
    let t = Running::default();
    claim(&t, "r1", None);
    t.remember_wake(1, Wake::Message, None);
    let (run, _) = t.stop(1).unwrap();
    assert_eq!(run, "r1");
    assert_eq!(remembered(&t), "none");
    assert!(t.stop(2).is_none());
}

#[test]
fn a_hold_is_for_the_run_it_names() {
    let t = Running::default();
    let a = active("r1");
    let held = a.held.clone();
    assert!(matches!(
        t.claim_unless_served(1, a, None),
        Claim::Claimed(_)
    ));
    assert!(t.hold(1, "r0").is_none(), "another run");
    assert!(!held.load(Ordering::Relaxed));
    assert!(t.hold(1, "r1").is_some());
    assert!(held.load(Ordering::Relaxed));
    t.release(1);
    assert!(!held.load(Ordering::Relaxed));
}
