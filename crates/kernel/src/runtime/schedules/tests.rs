//! Schedules on the kernel's own clock: a manual one, moved by the test, so a cron
//! schedule fires without waiting for the wall clock's next minute.

use crate::Kernel;
use crate::registry::NewAgent;
use crate::timing::Clock;
use domain::trigger::Trigger;
use std::time::{Duration, Instant};

/// Two seconds before a minute (in any time zone of whole minutes): 2026-01-01T00:00:58Z.
const BEFORE_A_MINUTE: i64 = 1_767_225_658_000;

#[tokio::test]
async fn a_cron_schedule_fires_when_the_kernels_clock_comes_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::manual(BEFORE_A_MINUTE);
    let k = crate::testing::kernel_on(dir.path(), &clock).await;
    // An external agent: the gate starts no run for it, so only the schedule moves.
    k.agent_new(NewAgent {
        name: "chime".into(),
        backend: "external".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let id = k.agent_get("chime").await.unwrap().id;
    k.start_scheduler().await.unwrap();
    let set = k
        .schedule_set("chime", Trigger::cron("* * * * *").unwrap(), None)
        .await
        .unwrap();
    let minute = BEFORE_A_MINUTE + 2_000;
    assert_eq!(set.next_at.as_deref(), Some("2026-01-01T00:01:00.000Z"));
    let next_at = |k: std::sync::Arc<Kernel>, id: i64| async move {
        let row = k.store.read(move |c| super::get(c, id)).await.unwrap();
        row.and_then(|(_, _, _, next)| next)
    };
    clock.advance(Duration::from_millis(1_500));
    tokio::task::yield_now().await;
    assert_eq!(next_at(k.clone(), id).await, Some(minute), "not due yet");
    clock.advance(Duration::from_millis(500));
    let deadline = Instant::now() + Duration::from_secs(10);
    while next_at(k.clone(), id).await != Some(minute + 60_000) {
        assert!(Instant::now() < deadline, "the schedule did not fire");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Which schedules poll (run only when something waits) and which run every time.
#[test]
fn an_every_schedule_without_a_prompt_of_its_own_polls() {
    fn check(kind: &str, prompt: Option<&str>, expect: bool) {
        assert_eq!(super::polls(kind, prompt), expect, "{kind} {prompt:?}");
    }
    check("every", None, true);
    check("every", Some(""), true);
    check("every", Some("  \n"), true);
    check("every", Some("check the build"), false);
    check("cron", None, false);
    check("cron", Some("write the digest"), false);
}
