//! Approvals' timeouts and wakes, on a kernel built from a store in a temporary
//! folder with a manual clock: no worker runs. Each case is a small test.

use super::{Approvals, due_in};
use crate::Kernel;
use crate::governance::approvals::{self, Ended, NewApproval};
use crate::registry::NewAgent;
use crate::timing::{Clock, Timing};
use domain::contracts::{Approval, OnTimeout};
use domain::states::ApprovalState;
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::Location;

/// A kernel with one external agent (`asker`), and its id.
struct Fixture {
    _dir: tempfile::TempDir,
    k: Arc<Kernel>,
    agent_id: i64,
    workflow_id: i64,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Location::in_data_dir(dir.path());
    let setup = crate::Setup {
        // Where the system's clock is: the approvals' rows are stamped by it.
        clock: Clock::manual(Clock::system().now_ms()),
        timing: Timing::default(),
        worker_exe: crate::worker_exe(),
        labels: Vec::new(),
    };
    let k = Kernel::open_timed(
        dir.path(),
        "awadmin_test_token_0123456789".into(),
        &store,
        "local",
        setup,
    )
    .await
    .unwrap();
    let asker = NewAgent {
        name: "asker".into(),
        backend: "external".into(),
        ..Default::default()
    };
    k.agent_new(asker).await.unwrap();
    let rec = k.agent_get("asker").await.unwrap();
    Fixture {
        _dir: dir,
        agent_id: rec.id,
        workflow_id: rec.workflow_id,
        k,
    }
}

impl Fixture {
    fn approvals(&self) -> &Arc<Approvals> {
        self.k.runtime.approvals()
    }

    /// Asks for an approval (of run `run`, if any) with this timeout rule, its
    /// deadline `due_ms` from the kernel's now (negative: past).
    async fn ask(&self, run: Option<&str>, on_timeout: OnTimeout, due_ms: i64) -> i64 {
        let a = NewApproval {
            workflow_id: self.workflow_id,
            agent_id: self.agent_id,
            agent: "asker".into(),
            run_id: run.map(str::to_owned),
            event: "tool_request".into(),
            detail: "bash: make deploy".into(),
            approval: Approval {
                contracts: vec!["deploys".into()],
                approvers: vec!["user".into()],
                count: 1,
                votes: Vec::new(),
                timeout: Duration::from_secs(3600),
                on_timeout,
            },
        };
        let now = self.k.runtime.clock().now_ms();
        let deadline = now + due_ms;
        self.k
            .store
            .write(move |c| {
                let id = approvals::insert_tx(c, &a, now)?;
                c.execute(
                    "UPDATE approvals SET deadline = ?2 WHERE id = ?1",
                    (id, deadline),
                )?;
                Ok(id)
            })
            .await
            .unwrap()
    }

    /// Waits (a few seconds at most) until a run waits on approval `id`.
    async fn waited(&self, id: i64) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.approvals().is_waited(id) {
            assert!(Instant::now() < deadline, "nobody waits on approval {id}");
            tokio::task::yield_now().await;
        }
    }

    async fn state(&self, id: i64) -> ApprovalState {
        let row = self
            .k
            .store
            .read(move |c| approvals::get(c, id))
            .await
            .unwrap();
        row.unwrap().state
    }

    /// Waits (a few seconds at most) for approval `id` to be in `want`.
    async fn until(&self, id: i64, want: ApprovalState) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.state(id).await != want {
            assert!(Instant::now() < deadline, "approval {id} is not {want}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[test]
fn a_deadline_ahead_is_waited_for() {
    assert_eq!(due_in(10_500, 10_000), Duration::from_millis(500));
}

#[test]
fn a_deadline_now_fires_at_once() {
    assert_eq!(due_in(10_000, 10_000), Duration::ZERO);
}

#[test]
fn a_deadline_passed_fires_at_once() {
    assert_eq!(due_in(9_000, 10_000), Duration::ZERO);
    assert_eq!(due_in(i64::MIN, 10_000), Duration::ZERO);
}

#[tokio::test]
async fn an_overdue_approval_that_denies_times_out_refused() {
    let f = fixture().await;
    let id = f.ask(None, OnTimeout::Deny, -1_000).await;
    f.approvals().arm(id, due_in(0, 0));
    f.until(id, ApprovalState::TimedOut).await;
    let row =
        f.k.store
            .read(move |c| approvals::get(c, id))
            .await
            .unwrap()
            .unwrap();
    assert!(matches!(approvals::ended(&row), Ended::Refused(_)));
}

#[tokio::test]
async fn an_overdue_approval_that_allows_times_out_allowed() {
    let f = fixture().await;
    let id = f.ask(None, OnTimeout::Allow, -1_000).await;
    f.approvals().arm(id, Duration::ZERO);
    f.until(id, ApprovalState::TimedOut).await;
    let row =
        f.k.store
            .read(move |c| approvals::get(c, id))
            .await
            .unwrap()
            .unwrap();
    assert!(matches!(approvals::ended(&row), Ended::Allowed(_)));
}

#[tokio::test]
async fn a_timer_before_the_deadline_leaves_it_pending() {
    let f = fixture().await;
    let id = f.ask(None, OnTimeout::Deny, 3_600_000).await;
    f.approvals().expire(id).await.unwrap();
    assert_eq!(f.state(id).await, ApprovalState::Pending);
}

#[tokio::test]
async fn a_restart_arms_the_overdue_approvals() {
    let f = fixture().await;
    let id = f.ask(None, OnTimeout::Deny, -1_000).await;
    f.approvals().recover().await.unwrap();
    f.until(id, ApprovalState::TimedOut).await;
}

#[tokio::test]
async fn a_restart_loses_the_approvals_of_runs_that_are_gone() {
    let f = fixture().await;
    let id = f
        .ask(Some("run-of-the-last-kernel"), OnTimeout::Allow, 3_600_000)
        .await;
    f.approvals().recover().await.unwrap();
    assert_eq!(f.state(id).await, ApprovalState::Lost);
}

#[tokio::test]
async fn a_waiting_run_wakes_refused_at_the_deadline() {
    let f = fixture().await;
    let id = f.ask(None, OnTimeout::Deny, -1_000).await;
    let waiting = f.approvals().wait(id, f.agent_id, "no-run");
    f.approvals().arm(id, Duration::ZERO);
    let ended = tokio::time::timeout(Duration::from_secs(5), waiting).await;
    assert!(matches!(ended, Ok(Ok(Ended::Refused(_)))), "{ended:?}");
}

#[tokio::test]
async fn a_waiting_run_wakes_allowed_when_the_lead_approves() {
    let f = fixture().await;
    let id = f.ask(None, OnTimeout::Deny, 3_600_000).await;
    let (approvals, agent_id) = (f.approvals().clone(), f.agent_id);
    let wait = tokio::spawn(async move { approvals.wait(id, agent_id, "no-run").await });
    f.waited(id).await;
    let view = f
        .approvals()
        .decide(&crate::Caller::Lead, id, true, None)
        .await
        .unwrap();
    assert_eq!(view.state, ApprovalState::Approved);
    let ended = tokio::time::timeout(Duration::from_secs(5), wait).await;
    assert!(matches!(ended, Ok(Ok(Ok(Ended::Allowed(_))))), "{ended:?}");
}

#[tokio::test]
async fn a_run_that_ends_loses_its_approvals_and_its_wait() {
    let f = fixture().await;
    let id = f.ask(Some("r1"), OnTimeout::Allow, 3_600_000).await;
    let approvals = f.approvals().clone();
    let agent_id = f.agent_id;
    let wait = tokio::spawn(async move { approvals.wait(id, agent_id, "r1").await });
    f.waited(id).await;
    f.approvals().lose_of("r1").await;
    let ended = tokio::time::timeout(Duration::from_secs(5), wait).await;
    assert!(matches!(ended, Ok(Ok(Ok(Ended::Refused(_))))), "{ended:?}");
    assert_eq!(f.state(id).await, ApprovalState::Lost);
}

#[tokio::test]
async fn a_decided_approval_no_longer_times_out() {
    let f = fixture().await;
    let id = f.ask(None, OnTimeout::Deny, 3_600_000).await;
    f.approvals()
        .decide(&crate::Caller::Lead, id, false, Some("not today".into()))
        .await
        .unwrap();
    f.k.store
        .write(move |c| Ok(c.execute("UPDATE approvals SET deadline = 0 WHERE id = ?1", [id])?))
        .await
        .unwrap();
    f.approvals().expire(id).await.unwrap();
    assert_eq!(f.state(id).await, ApprovalState::Denied);
}

#[tokio::test]
async fn a_reason_over_the_limit_is_refused() {
    let f = fixture().await;
    let id = f.ask(None, OnTimeout::Deny, 3_600_000).await;
    let long = "x".repeat(domain::contracts::MAX_REASON_CHARS + 1);
    let r = f
        .approvals()
        .decide(&crate::Caller::Lead, id, true, Some(long))
        .await;
    assert!(r.is_err());
    assert_eq!(f.state(id).await, ApprovalState::Pending);
}
