//! Proposals' deadlines on the kernel's own clock: a manual one, moved by the
//! test, so a deadline passes without waiting for the wall clock.

use crate::registry::NewAgent;
use crate::timing::Clock;
use crate::{Kernel, Scope};
use domain::names::WorkflowRef;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::NewProposal;

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

async fn open(dir: &std::path::Path, clock: &Clock) -> Arc<Kernel> {
    crate::testing::kernel_on(dir, clock).await
}

/// `alice` in `@keep:t`, with `bob` (agents without a worker: nothing runs).
async fn alice(k: &Kernel) -> Scope {
    for name in ["alice", "bob"] {
        k.agent_new(NewAgent {
            name: name.into(),
            backend: "external".into(),
            workflow: Some("@keep:t".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let workflow = WorkflowRef::parse("@keep:t").unwrap();
    Scope {
        workflow_id: k.registry.workflow_id(&workflow).await.unwrap(),
        workflow,
        me: "alice".into(),
        lead: false,
        run_id: None,
    }
}

async fn propose(k: &Kernel, s: &Scope, title: &str, timeout: &str) {
    let new = NewProposal {
        kind: "approval".into(),
        title: title.into(),
        timeout: Some(timeout.into()),
        ..Default::default()
    };
    k.context.proposal_create(s, new).await.unwrap();
}

/// Each proposal's (status, closed_by), by id, as the store has them.
async fn statuses(k: &Kernel, s: &Scope) -> Vec<(String, String, Option<String>)> {
    let mut list: Vec<_> = k
        .context
        .read_proposals(s, None)
        .await
        .unwrap()
        .0
        .proposals
        .into_iter()
        .map(|p| (p.id, p.status, p.closed_by))
        .collect();
    list.sort();
    list
}

fn row(id: &str, status: &str, by: Option<&str>) -> (String, String, Option<String>) {
    (id.into(), status.into(), by.map(str::to_owned))
}

/// Waits (a few seconds at most) until the statuses are `expect`; the timer
/// closes proposals in a task of its own.
async fn wait_for(k: &Kernel, s: &Scope, expect: Vec<(String, String, Option<String>)>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = statuses(k, s).await;
        if now == expect {
            return;
        }
        assert!(Instant::now() < deadline, "{now:?}, not {expect:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_deadline_that_passed_while_the_kernel_was_down_expires_at_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let k = open(dir.path(), &Clock::manual(T0)).await;
    let s = alice(&k).await;
    propose(&k, &s, "open", "1h").await;
    propose(&k, &s, "runs out while down", "2s").await;
    drop(k);

    // The next kernel's clock is ten seconds on.
    let k = open(dir.path(), &Clock::manual(T0 + 10_000)).await;
    let expect = vec![
        row("prop-1", "open", None),
        row("prop-2", "expired", Some("expiry")),
    ];
    wait_for(&k, &s, expect).await;
    propose(&k, &s, "next", "1h").await;
    assert_eq!(statuses(&k, &s).await[2].0, "prop-3", "numbering continues");
}

#[tokio::test]
async fn the_timer_expires_a_proposal_when_the_clock_comes_to_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::manual(T0);
    let k = open(dir.path(), &clock).await;
    let s = alice(&k).await;
    propose(&k, &s, "soon", "1m").await;
    // One millisecond short of the deadline: still open.
    clock.advance(Duration::from_millis(59_999));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(statuses(&k, &s).await, vec![row("prop-1", "open", None)]);
    // At the deadline the timer, woken by the clock, closes it: nobody looks.
    clock.advance(Duration::from_millis(1));
    wait_for(&k, &s, vec![row("prop-1", "expired", Some("expiry"))]).await;
}
