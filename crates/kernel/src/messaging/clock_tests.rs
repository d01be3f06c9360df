//! Messaging on the kernel's own clock: a manual one far from the wall clock, so
//! a stamp or a deferral read from the system's time would show.

use super::Outgoing;
use super::team::StatusUpdate;
use crate::registry::NewAgent;
use crate::timing::Clock;
use crate::{Kernel, Scope};
use domain::clock::fmt_ms;
use domain::names::WorkflowRef;
use std::sync::Arc;
use std::time::Duration;

const T0: i64 = 1_577_836_800_000; // 2020-01-01T00:00:00Z, years before the wall clock

async fn open(dir: &std::path::Path, clock: &Clock) -> Arc<Kernel> {
    crate::testing::kernel_on(dir, clock).await
}

/// The lead's scope and alice's (an agent without a worker) in `@team`.
async fn lead_and_alice(k: &Kernel) -> (Scope, Scope) {
    k.agent_new(NewAgent {
        name: "alice".into(),
        backend: "external".into(),
        workflow: Some("@team".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    let workflow = WorkflowRef::parse("@team").unwrap();
    let workflow_id = k.registry.workflow_id(&workflow).await.unwrap();
    let scope = |me: &str, lead| Scope {
        workflow: workflow.clone(),
        workflow_id,
        me: me.into(),
        lead,
        run_id: None,
    };
    (scope("user", true), scope("alice", false))
}

#[tokio::test]
async fn a_message_its_deferral_and_a_status_are_on_the_kernels_clock() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::manual(T0);
    let k = open(dir.path(), &clock).await;
    let (lead, alice) = lead_and_alice(&k).await;
    let hello = Outgoing {
        message: "@alice hello".into(),
        ..Default::default()
    };
    k.messaging.channel_send(&lead, hello).await.unwrap();
    let inbox = k.messaging.my_inbox(&alice, None).await.unwrap();
    assert_eq!(inbox.messages[0].created_at, fmt_ms(T0), "sent at");
    let id = inbox.messages[0].id.clone();

    // Deferred by the kernel's clock, which the scheduler's gate reads it by too.
    clock.advance(Duration::from_secs(1));
    let now = T0 + 1_000;
    for (until, expect) in [
        ("10m", Ok(now + 600_000)),
        ("1970-01-01T00:00:01Z", Err("in the past")),
        ("31d", Err("more than 30 days")),
        ("2019-12-31T23:59:59Z", Err("in the past")),
        ("2020-01-01T01:00:00Z", Ok(T0 + 3_600_000)),
        ("5m", Ok(now + 300_000)),
    ] {
        let got = k.messaging.my_inbox_defer(&alice, &id, Some(until)).await;
        match (got, expect) {
            (Ok(d), Ok(at)) => assert_eq!(d.deferred_until, fmt_ms(at), "{until}"),
            (Err(e), Err(why)) => assert!(e.to_string().contains(why), "{until}: {e}"),
            (got, _) => panic!("{until}: {got:?}, not {expect:?}"),
        }
    }
    // Deferred until now + 5 min: hidden until the clock comes to it.
    let inbox = k.messaging.my_inbox(&alice, None).await.unwrap();
    assert_eq!((inbox.messages.len(), inbox.deferred), (0, 1));
    clock.set_ms(now + 300_000);
    let inbox = k.messaging.my_inbox(&alice, None).await.unwrap();
    assert_eq!(
        inbox.messages.len(),
        1,
        "back when the kernel's clock says so"
    );

    let busy = StatusUpdate {
        state: Some("busy".into()),
        ..Default::default()
    };
    let st = k.messaging.my_status_set(&alice, busy).await.unwrap();
    assert_eq!(st.updated_at, fmt_ms(now + 300_000));
}
