//! The board as others see it, on a manual clock: what a poll counts as waiting,
//! a change crossing the node bus, and who has no role on it.

use super::tests::{board, claims, done, id_of, task};
use crate::events::Event;
use crate::testing::Rooms;
use domain::states::TaskState;
use std::sync::Arc;

/// What a poll of an interval schedule asks the board: whether a task the agent
/// may take waits (open, unblocked, for it) while it holds no claim.
#[tokio::test]
async fn a_poll_sees_a_task_the_agent_may_take() {
    use crate::runtime::scheduler::Waiting;
    let r = Rooms::new().await;
    r.agents(&["ann", "bob"]).await;
    let t = Arc::new(board(&r));
    let wid = r.scope("user").await.workflow_id;
    let waits = async |who: &'static str| {
        let t = t.clone();
        r.store
            .read(move |c| t.waiting_tx(c, wid, who))
            .await
            .unwrap()
    };
    assert_eq!((waits("ann").await, waits("bob").await), (false, false));
    let mut mine = task("a", "ann's", &[]);
    mine.assign = Some("ann".into());
    let lead = r.scope("user").await;
    t.task_add(&lead, vec![mine, task("b", "after", &["a"])])
        .await
        .unwrap();
    // ann's task waits for ann; "after" is blocked, so nothing waits for bob.
    assert_eq!((waits("ann").await, waits("bob").await), (true, false));
    claims(&t, &r, &[("ann", None, "ann's")]).await;
    assert_eq!((waits("ann").await, waits("bob").await), (false, false));
    done(&t, &r.scope("ann").await, id_of(&t, &r, "ann's").await)
        .await
        .unwrap();
    assert_eq!((waits("ann").await, waits("bob").await), (true, true));
}

/// A task's change crosses to the other kernels of a store as JSON, and back; a
/// change without `moved` (an older kernel's) counts as a move.
#[test]
fn a_task_change_crosses_the_node_bus() {
    let e = Event::TaskChanged {
        workflow_id: 1,
        id: 2,
        state: TaskState::Claimed,
        moved: false,
    };
    let text = serde_json::to_string(&e).unwrap();
    assert_eq!(
        text,
        r#"{"kind":"task_changed","workflow_id":1,"id":2,"state":"claimed","moved":false}"#
    );
    let back: Event = serde_json::from_str(&text).unwrap();
    assert!(matches!(back, Event::TaskChanged { moved: false, .. }));
    let old = r#"{"kind":"task_changed","workflow_id":1,"id":2,"state":"done"}"#;
    let back: Event = serde_json::from_str(old).unwrap();
    assert!(matches!(
        back,
        Event::TaskChanged {
            workflow_id: 1,
            id: 2,
            state: TaskState::Done,
            moved: true
        }
    ));
}

/// A member's role is its own: an agent of its name that another agent made has
/// none (it takes no task assigned to the role).
#[tokio::test]
async fn a_sub_agent_of_a_member_s_name_has_no_role() {
    let r = Rooms::new().await;
    let bob = crate::registry::orgs::OrgMember {
        name: "bob".into(),
        role: Some("reviewer".into()),
        human: false,
    };
    r.registry
        .org_put("team", None, Some(vec![bob]))
        .await
        .unwrap();
    r.agent_in("@review:pr-1", "bob", "mock").await;
    r.agent_in("@review:pr-1", "ann", "mock").await;
    r.execute(
        "UPDATE workflows SET org = ?1 WHERE name = 'review'",
        "team",
    )
    .await;
    let wid = r.scope_in("@review:pr-1", "bob").await.workflow_id;
    let role = || async {
        r.store
            .read(move |c| super::wake::role_of(c, wid, "bob"))
            .await
            .unwrap()
    };
    assert_eq!(role().await.as_deref(), Some("reviewer"));
    r.execute(
        "UPDATE agents SET parent_id = (SELECT id FROM agents WHERE name = 'ann') WHERE name = ?1",
        "bob",
    )
    .await;
    assert_eq!(role().await, None, "made by ann, it is not the member bob");
}
