//! The board room on a manual clock, built from the rooms below it: plans and
//! their dependencies, the best task a claim takes, who is told when a task can be
//! taken, and claims released when their holder is gone.

use super::rules::Dep;
use super::{Filter, NewTask, Tasks, Update};
use crate::Scope;
use crate::events::Event;
use crate::testing::{Rooms, expect, said};
use domain::states::TaskState;
use std::sync::{Arc, Weak};

pub(super) fn board(r: &Rooms) -> Tasks {
    Tasks::new(
        (r.store.clone(), r.events.clone(), r.clock.clone()),
        r.contracts.clone(),
        r.messaging.clone(),
        Weak::new(),
    )
}

pub(super) fn task(name: &str, title: &str, deps: &[&str]) -> NewTask {
    NewTask {
        name: Some(name.into()),
        title: title.into(),
        deps: deps.iter().map(|d| Dep::Name((*d).into())).collect(),
        ..Default::default()
    }
}

/// Claims `who` makes, with what each gives: a title, `none`, or an error.
pub(super) async fn claims(t: &Tasks, r: &Rooms, steps: &[(&str, Option<i64>, &str)]) {
    for (who, id, want) in steps {
        let s = r.scope(who).await;
        let got = t.task_claim(&s, *id).await;
        let text = match &got {
            Ok(Some(v)) => v.title.clone(),
            Ok(None) => "none".into(),
            Err(_) => said(&got),
        };
        expect(&text, want, &[]);
    }
}

pub(super) async fn done(t: &Tasks, s: &Scope, id: i64) -> domain::error::Result<super::Updated> {
    let u = Update {
        id,
        state: Some("done".into()),
        ..Default::default()
    };
    t.task_update(s, u).await
}

pub(super) async fn id_of(t: &Tasks, r: &Rooms, title: &str) -> i64 {
    let s = r.scope("user").await;
    let all = t.task_list(&s, Filter::default()).await.unwrap();
    all.iter().find(|x| x.title == title).unwrap().id
}

/// The best task: assigned to the caller by name, then by role, then to anyone;
/// then the highest priority; then the oldest. Blocked and held tasks are not
/// taken; a second claim waits until the first is finished.
#[tokio::test]
async fn a_claim_takes_the_best_open_unblocked_task() {
    let r = Rooms::new().await;
    r.agents(&["ann", "bob", "cat"]).await;
    let t = board(&r);
    let lead = r.scope("user").await;
    let mut plan = vec![
        task("old", "old, any", &[]),
        task("hi", "high, any", &[]),
        task("bobs", "for bob", &[]),
        task("after", "after old", &["old"]),
    ];
    plan[1].priority = 5;
    plan[2].assign = Some("bob".into());
    t.task_add(&lead, plan).await.unwrap();
    let old = id_of(&t, &r, "old, any").await;
    let after = id_of(&t, &r, "after old").await;
    claims(
        &t,
        &r,
        &[
            ("bob", None, "for bob"),
            ("bob", None, "conflict: you hold task"),
            ("ann", None, "high, any"),
            ("cat", Some(after), "conflict: task"),
            (
                "cat",
                Some(id_of(&t, &r, "for bob").await),
                "forbidden: task",
            ),
            ("cat", None, "old, any"),
        ],
    )
    .await;
    let cat = r.scope("cat").await;
    done(&t, &cat, old).await.unwrap();
    claims(
        &t,
        &r,
        &[
            ("cat", None, "after old"),
            ("ann", None, "conflict: you hold"),
        ],
    )
    .await;
    let ann = r.scope("ann").await;
    done(&t, &ann, id_of(&t, &r, "high, any").await)
        .await
        .unwrap();
    claims(&t, &r, &[("ann", None, "none")]).await;
    let again = done(&t, &cat, old).await;
    expect(
        &said(&again),
        "conflict: task",
        &["is done already", "final"],
    );
}

/// How many messages ann, bob and cat were given.
async fn inboxes(r: &Rooms) -> (usize, usize, usize) {
    let mut n = Vec::new();
    for who in ["ann", "bob", "cat"] {
        let s = r.scope(who).await;
        let inbox = r.messaging.inbox_peek(&s, 50).await.unwrap();
        let told = inbox
            .messages
            .iter()
            .filter(|m| m.content.contains("can be taken"));
        n.push(told.count());
    }
    (n[0], n[1], n[2])
}

/// A task that can be taken is announced in the inboxes of the agents that may
/// take it and hold no claim; its dependency done announces the next.
#[tokio::test]
async fn who_may_take_a_freed_task_is_told() {
    let r = Rooms::new().await;
    r.agents(&["ann", "bob", "cat"]).await;
    let t = board(&r);
    let lead = r.scope("user").await;
    let mut rx = r.events.subscribe();
    t.task_add(
        &lead,
        vec![task("a", "first", &[]), task("b", "second", &["a"])],
    )
    .await
    .unwrap();
    assert_eq!(inboxes(&r).await, (1, 1, 1));
    let mut changed = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if let Event::TaskChanged { id, state, .. } = e {
            changed.push((id, state));
        }
    }
    assert_eq!(changed.len(), 2, "{changed:?}");
    assert!(changed.iter().all(|(_, s)| *s == TaskState::Open));
    let first = id_of(&t, &r, "first").await;
    claims(&t, &r, &[("ann", Some(first), "first")]).await;
    let mut second = task("c", "only cat's", &[]);
    second.assign = Some("cat".into());
    t.task_add(&lead, vec![second]).await.unwrap();
    assert_eq!(inboxes(&r).await, (1, 1, 2));
    claims(&t, &r, &[("cat", None, "only cat's")]).await;
    // ann finishes: "second" is free for ann and bob (cat holds a claim).
    done(&t, &r.scope("ann").await, first).await.unwrap();
    assert_eq!(inboxes(&r).await, (2, 2, 2));
    // bob takes it and gives it back: ann is told, bob is not.
    let second = id_of(&t, &r, "second").await;
    claims(&t, &r, &[("bob", Some(second), "second")]).await;
    let back = Update {
        id: second,
        state: Some("open".into()),
        ..Default::default()
    };
    t.task_update(&r.scope("bob").await, back).await.unwrap();
    assert_eq!(inboxes(&r).await, (3, 2, 2));
}

/// What releases a claim, and what keeps it: the claiming run lost or ended, the
/// agent failed for good or deleted release it (its history says why); a run in
/// progress keeps it; a claim made without a run (the lead's, a joined client's)
/// is its own.
#[tokio::test]
async fn claims_are_released_when_their_holder_is_gone() {
    let r = Rooms::new().await;
    r.agents(&["ann", "bob", "cat", "dan", "eve", "fay"]).await;
    // Another instance's eve is not this one's.
    r.agent_in("@other:main", "eve", "mock").await;
    let t = Arc::new(board(&r));
    let lead = r.scope("user").await;
    let plan: Vec<NewTask> = ["ann", "bob", "cat", "dan", "eve", "fay", "user"]
        .iter()
        .map(|n| NewTask {
            title: format!("{n}'s"),
            assign: Some((*n).into()),
            ..Default::default()
        })
        .collect();
    t.task_add(&lead, plan).await.unwrap();
    // (agent, its run's status, what is done to the agent, released with why).
    let table: &[(&str, &str, &str, Option<&str>)] = &[
        (
            "ann",
            "lost",
            "",
            Some("ann's run was lost (its kernel or node stopped)"),
        ),
        ("bob", "running", "", None),
        (
            "cat",
            "succeeded",
            "",
            Some("run run-2 of cat ended without finishing it"),
        ),
        (
            "dan",
            "running",
            "UPDATE agents SET state = 'failed' WHERE name = ?1",
            Some("dan failed for good"),
        ),
        (
            "eve",
            "running",
            "DELETE FROM agents WHERE name = ?1 AND workflow_id = (SELECT id FROM workflows WHERE name = 'global')",
            Some("eve was deleted"),
        ),
        ("fay", "", "", None),
    ];
    for (i, (who, status, _, _)) in table.iter().enumerate() {
        claim_in_run(&t, &r, who, status, format!("run-{i}")).await;
    }
    t.task_claim(&lead, Some(id_of(&t, &r, "user's").await))
        .await
        .unwrap();
    for (who, _, act, _) in table {
        if !act.is_empty() {
            r.execute(act, who).await;
        }
    }
    assert_eq!(t.settle(None).await.unwrap(), 4);
    for (who, _, _, why) in table {
        assert_released(&t, &r, who, *why).await;
    }
    let users = id_of(&t, &r, "user's").await;
    let s = r.scope("user").await;
    let v = t
        .task_list(
            &s,
            Filter {
                id: Some(users),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(v[0].owner.as_deref(), Some("user"));
    // Settling again changes nothing.
    assert_eq!(t.settle(None).await.unwrap(), 0);
}

/// `who` claims its task in a run `run` whose status is `status` (no status:
/// as a joined client, without a run).
async fn claim_in_run(t: &Tasks, r: &Rooms, who: &str, status: &str, run: String) {
    if status.is_empty() {
        t.task_claim(&r.scope(who).await, None)
            .await
            .unwrap()
            .unwrap();
        return;
    }
    let (w, st, rid, now) = (
        who.to_owned(),
        status.to_owned(),
        run.clone(),
        r.clock.now_ms(),
    );
    r.store
        .write(move |c| {
            c.execute(
                "INSERT INTO runs (id, agent_id, workflow_id, agent, backend, trigger, status, started_at)
                 SELECT ?1, a.id, a.workflow_id, a.name, 'mock', 'message', ?3, ?4 FROM agents a
                 JOIN workflows w ON w.id = a.workflow_id WHERE a.name = ?2 AND w.name = 'global'",
                store::sql::params![rid, w, st, now],
            )?;
            Ok(())
        })
        .await
        .unwrap();
    let s = Scope {
        run_id: Some(run),
        ..r.scope(who).await
    };
    t.task_claim(&s, None).await.unwrap().unwrap();
}

/// `who`'s task is open again with `why` last in its history, or still claimed.
async fn assert_released(t: &Tasks, r: &Rooms, who: &str, why: Option<&str>) {
    let id = id_of(t, r, &format!("{who}'s")).await;
    let s = r.scope("user").await;
    let f = Filter {
        id: Some(id),
        ..Default::default()
    };
    let one = t.task_list(&s, f).await.unwrap();
    let v = &one[0];
    let last = v.history.as_ref().unwrap().last().unwrap();
    match why {
        Some(why) => {
            assert_eq!(
                (v.state, v.owner.as_deref()),
                (TaskState::Open, None),
                "{v:?}"
            );
            assert_eq!(
                (last.what.as_str(), last.why.as_deref()),
                ("released", Some(why))
            );
        }
        None => assert_eq!(v.state, TaskState::Claimed, "{v:?}"),
    }
}

/// A run that ends without finishing its task gives it back: the agent itself
/// (idle now) and the others who may take it are told; the next claim takes it.
#[tokio::test]
async fn a_run_that_ends_gives_its_claim_back() {
    let r = Rooms::new().await;
    r.agents(&["ann", "bob", "cat"]).await;
    let t = Arc::new(board(&r));
    t.task_add(&r.scope("user").await, vec![task("a", "ann's", &[])])
        .await
        .unwrap();
    claim_in_run(&t, &r, "ann", "running", "run-9".into()).await;
    claims(&t, &r, &[("bob", None, "none")]).await;
    assert_eq!(inboxes(&r).await, (1, 1, 1));
    // Still running: nothing changes.
    assert_eq!(
        t.settle(Some(r.scope("user").await.workflow_id))
            .await
            .unwrap(),
        0
    );
    r.execute(
        "UPDATE runs SET status = 'succeeded' WHERE id = ?1",
        "run-9",
    )
    .await;
    assert_eq!(
        t.settle(Some(r.scope("user").await.workflow_id))
            .await
            .unwrap(),
        1
    );
    assert_released(
        &t,
        &r,
        "ann",
        Some("run run-9 of ann ended without finishing it"),
    )
    .await;
    assert_eq!(inboxes(&r).await, (2, 2, 2));
    claims(&t, &r, &[("ann", None, "ann's")]).await;
}

/// A verdict on a move is written only on the task as its check saw it (a
/// release and another claim may come between); a second move waits; a claim
/// released drops the move it held, so the task can be taken again.
#[tokio::test]
async fn a_held_move_is_pinned_to_the_task_as_checked() {
    let r = Rooms::new().await;
    r.agents(&["ann", "bob"]).await;
    let spec = serde_json::json!({"name": "review", "when": {"event": "task", "state": "done"},
        "then": {"action": "require_approval", "approvers": ["user"]}});
    let c = domain::contracts::parse(&spec).unwrap();
    r.contracts.set(c, spec).await.unwrap();
    let t = Arc::new(board(&r));
    t.task_add(&r.scope("user").await, vec![task("a", "one", &[])])
        .await
        .unwrap();
    let id = id_of(&t, &r, "one").await;
    claim_in_run(&t, &r, "ann", "running", "run-1".into()).await;
    let back = Update {
        id,
        state: Some("open".into()),
        ..Default::default()
    };
    t.task_update(&r.scope("ann").await, back).await.unwrap();
    claim_in_run(&t, &r, "bob", "running", "run-2".into()).await;
    // Checked while ann held it, written once bob does: refused.
    let seen = (TaskState::Claimed, Some("ann".to_owned()));
    let got = r
        .store
        .write(move |c| super::approval::unchanged_tx(c, id, &seen))
        .await;
    expect(&said(&got), "conflict: task", &["changed meanwhile"]);
    let bob = r.scope("bob").await;
    assert!(done(&t, &bob, id).await.unwrap().held.is_some());
    let again = done(&t, &bob, id).await;
    expect(&said(&again), "conflict: task", &["waits for approval"]);
    r.execute("UPDATE runs SET status = 'stopped' WHERE id = ?1", "run-2")
        .await;
    let wid = bob.workflow_id;
    assert_eq!(t.settle(Some(wid)).await.unwrap(), 1);
    let v = &t.board(wid).await.unwrap()[0];
    assert_eq!((v.state, v.approval), (TaskState::Open, None), "{v:?}");
    let inbox = r.messaging.inbox_peek(&bob, 50).await.unwrap();
    let told = inbox.messages.iter().map(|m| m.content.as_str());
    let want = "no longer holds your move of task";
    assert_eq!(told.filter(|m| m.contains(want)).count(), 1);
    claims(&t, &r, &[("ann", None, "one")]).await;
}

/// Only a change of state is published as a move: a note or an edit of a done
/// task is not (a step waiting for `state: done` sees it done once).
#[tokio::test]
async fn a_note_is_no_move() {
    let r = Rooms::new().await;
    r.agents(&["ann"]).await;
    let t = board(&r);
    let lead = r.scope("user").await;
    t.task_add(&lead, vec![task("a", "one", &[])])
        .await
        .unwrap();
    let id = id_of(&t, &r, "one").await;
    let mut rx = r.events.subscribe();
    claims(&t, &r, &[("ann", Some(id), "one")]).await;
    done(&t, &r.scope("ann").await, id).await.unwrap();
    let note = Update {
        id,
        note: Some("checked".into()),
        ..Default::default()
    };
    t.task_update(&lead, note).await.unwrap();
    let mut seen = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if let Event::TaskChanged { state, moved, .. } = e {
            seen.push((state, moved));
        }
    }
    use TaskState::*;
    assert_eq!(seen, [(Claimed, true), (Done, true), (Done, false)]);
}

/// The board's sizes are bounded: history lines per task (a note past them is
/// refused), tasks not final per instance (task_add past them is refused); a
/// list shows a body cut to a preview, the task by its id shows it whole.
#[tokio::test]
async fn a_board_keeps_its_sizes() {
    use super::rules::{MAX_HISTORY, MAX_LIVE_TASKS};
    let r = Rooms::new().await;
    let t = board(&r);
    let lead = r.scope("user").await;
    let mut long = task("a", "long", &[]);
    long.body = Some("x".repeat(500));
    t.task_add(&lead, vec![long]).await.unwrap();
    let id = id_of(&t, &r, "long").await;
    let listed = &t.task_list(&lead, Filter::default()).await.unwrap()[0];
    assert_eq!(listed.body.as_ref().map(|b| b.chars().count()), Some(161));
    let one = Filter {
        id: Some(id),
        ..Default::default()
    };
    let whole = &t.task_list(&lead, one).await.unwrap()[0];
    assert_eq!(whole.body.as_ref().map(String::len), Some(500));
    let (wid, n) = (lead.workflow_id, MAX_HISTORY - 2);
    r.store
        .write(move |c| {
            c.execute(
                "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?2)
                 INSERT INTO task_history (task_id, at, who, what) SELECT ?1, 0, 'user', 'noted' FROM k",
                store::sql::params![id, n],
            )?;
            c.execute(
                "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?2)
                 INSERT INTO tasks (workflow_id, title, created_by, created_at, updated_at)
                 SELECT ?1, 'filler', 'user', 0, 0 FROM k",
                store::sql::params![wid, MAX_LIVE_TASKS - 2],
            )?;
            Ok(())
        })
        .await
        .unwrap();
    let note = || Update {
        id,
        note: Some("more".into()),
        ..Default::default()
    };
    t.task_update(&lead, note()).await.unwrap();
    let past = t.task_update(&lead, note()).await;
    expect(
        &said(&past),
        "invalid: note: task",
        &["at most 200 history lines"],
    );
    let two = vec![task("b", "b", &[]), task("c", "c", &[])];
    let refused = t.task_add(&lead, two).await;
    expect(&said(&refused), "invalid: task_add:", &["at most 2000"]);
    t.task_add(&lead, vec![task("b", "b", &[])]).await.unwrap();
}
