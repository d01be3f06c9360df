//! Delegation in the store: the count a parent's `delegate.agents` allows, taken
//! in the write that registers a sub-agent; spending summed over an agent and
//! what it made; and why an agent made by another may not run once the one above
//! has used its budget or the share it gave (`delegate.budget`).

use crate::registry::{NewAgent, hand_spending_up_tx, insert_agent_tx, sub_agents};
use crate::runtime::runs::{Spender, delegation_over, spent};
use crate::testing::{Rooms, said};
use domain::names::WorkflowRef;

/// Registers `name` made by `parent` (which may keep `most` alive).
async fn sub(r: &Rooms, name: &str, parent: i64, most: u32) -> domain::error::Result<i64> {
    let a = NewAgent {
        name: name.into(),
        backend: "mock".into(),
        parent: Some((parent, most)),
        ..Default::default()
    };
    let now = r.clock.now_ms();
    r.store
        .write(move |c| Ok(insert_agent_tx(c, &a, &WorkflowRef::global(), Some("n1"), now)?.1))
        .await
}

/// A finished run of agent `id` that used `tokens`.
async fn ran(r: &Rooms, id: i64, tokens: i64) {
    r.store
        .write(move |c| {
            c.execute(
                "INSERT INTO runs (id, agent_id, workflow_id, agent, backend, trigger, status, started_at, input_tokens)
                 VALUES (?1, ?2, 1, 'x', 'mock', 'message', 'succeeded', 0, ?3)",
                (format!("run-{id}-{tokens}"), id, tokens),
            )?;
            Ok(())
        })
        .await
        .unwrap();
}

async fn configure(r: &Rooms, id: i64, config: serde_json::Value) {
    r.store
        .write(move |c| {
            c.execute(
                "UPDATE agents SET config = ?2 WHERE id = ?1",
                (id, config.to_string()),
            )?;
            Ok(())
        })
        .await
        .unwrap();
}

async fn over(r: &Rooms, id: i64) -> Option<String> {
    r.store.read(move |c| delegation_over(c, id)).await.unwrap()
}

#[tokio::test]
async fn sub_agents_count_spend_and_stop_at_the_share() {
    let r = Rooms::new().await;
    let boss = r.agent_in("@global:main", "boss", "mock").await;
    let h1 = sub(&r, "h1", boss, 2).await.unwrap();
    let h2 = sub(&r, "h2", boss, 2).await.unwrap();
    let e = sub(&r, "h3", boss, 2).await;
    assert!(
        said(&e).contains(
            "delegate.agents: you have 2 sub-agents alive, the most your definition allows (2); delete one"
        ),
        "{}",
        said(&e)
    );
    let deep = sub(&r, "deep", h1, 1).await.unwrap();
    let all = r.store.read(move |c| sub_agents(c, boss)).await.unwrap();
    assert_eq!(all, vec![deep, h2, h1], "deepest first");

    ran(&r, boss, 100).await;
    ran(&r, h1, 30).await;
    ran(&r, deep, 20).await;
    let sums = r
        .store
        .read(move |c| {
            Ok((
                spent(c, Spender::Agent(boss))?.0,
                spent(c, Spender::SubAgents(boss))?.0,
            ))
        })
        .await
        .unwrap();
    assert_eq!(sums, (150, 50), "its sub-agents spend from its budget");

    assert_eq!(over(&r, deep).await, None, "no limit above");
    configure(
        &r,
        boss,
        serde_json::json!({"delegate": {"agents": 2, "depth": 2, "budget": {"max_tokens": 50}}}),
    )
    .await;
    let why = over(&r, deep).await.unwrap();
    assert!(
        why.contains(
            "the sub-agents of boss used 50 tokens, the limit is 50 (delegate.budget.max_tokens)"
        ),
        "{why}"
    );
    assert!(over(&r, h2).await.is_some(), "the share is theirs together");
    assert_eq!(
        over(&r, boss).await,
        None,
        "the share does not stop the parent"
    );

    configure(
        &r,
        boss,
        serde_json::json!({"budget": {"max_tokens": 200}, "delegate": {"agents": 2}}),
    )
    .await;
    assert_eq!(over(&r, deep).await, None);
    ran(&r, h2, 60).await;
    let why = over(&r, deep).await.unwrap();
    assert!(
        why.contains(
            "boss with its sub-agents used 210 tokens, the limit is 200 (budget.max_tokens)"
        ),
        "{why}"
    );

    // Deleted, deepest first, they leave what they spent with the agent above.
    for gone in [deep, h1] {
        r.store
            .write(move |c| {
                hand_spending_up_tx(c, gone)?;
                c.execute("DELETE FROM agents WHERE id = ?1", [gone])?;
                Ok(())
            })
            .await
            .unwrap();
    }
    let sums = r
        .store
        .read(move |c| {
            Ok((
                spent(c, Spender::Agent(boss))?.0,
                spent(c, Spender::SubAgents(boss))?.0,
            ))
        })
        .await
        .unwrap();
    assert_eq!(
        sums,
        (210, 110),
        "a deleted sub-agent's spending still counts"
    );
}
