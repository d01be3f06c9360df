//! What an instance with nothing left to do is, as a table: its agents' facts
//! (paused, with messages, with a schedule that runs every time or one that
//! polls) and, for a step workflow, its graph.

use super::{Idle, idle_state};
use crate::workflows::AgentSummary;
use crate::workflows::facts::AgentFacts;
use crate::workflows::steps::Outcome;
use domain::protocol::Usage;
use domain::states::AgentState;

/// An agent: `name`, then what sets it apart: `paused`, `pending` (messages in
/// its inbox), `scheduled` (a schedule that runs every time), `polls` (an
/// `every` schedule without a prompt of its own).
fn agent(name: &str, traits: &[&str]) -> AgentFacts {
    let has = |t: &str| traits.contains(&t);
    AgentFacts {
        id: 1,
        summary: AgentSummary {
            name: name.into(),
            backend: "mock".into(),
            state: if has("paused") {
                AgentState::Paused
            } else {
                AgentState::Idle
            },
            reason: None,
            resume_at: None,
            runs: 1,
            failed_runs: 0,
            pending: i64::from(has("pending")),
            usage: Usage::default(),
            next_wake: (has("scheduled") || has("polls"))
                .then(|| "2026-01-01T00:00:30.000Z".to_owned()),
            node: None,
        },
        schedule_owed: false,
        polls: has("polls"),
        running: false,
    }
}

/// The state in short: "completed", "scheduled: <reason's start>", and so on.
fn decided(agents: &[AgentFacts], graph: Option<&Outcome>) -> String {
    match idle_state(agents, graph) {
        Idle::Is(state, None) => state.as_str().to_owned(),
        Idle::Is(state, Some(why)) => format!("{}: {why}", state.as_str()),
        Idle::Fails(why) => format!("fails: {why}"),
    }
}

#[test]
fn an_instance_whose_agents_only_poll_is_completed() {
    fn check(agents: &[AgentFacts], graph: Option<&Outcome>, expect: &str) {
        let got = decided(agents, graph);
        assert!(got.starts_with(expect), "got {got:?}, want {expect:?}");
    }
    let waiting = Outcome {
        waiting: vec!["review waits for coder.complete".into()],
        failed: Vec::new(),
    };
    let failed = Outcome {
        waiting: Vec::new(),
        failed: vec!["review failed".into()],
    };
    check(&[agent("coder", &[])], None, "completed");
    check(
        &[agent("reviewer", &["polls"]), agent("coder", &[])],
        None,
        "completed: nothing left to do; polls run again only when something waits (a message, \
         or a post by someone else): reviewer (workflow_stop disarms them)",
    );
    check(
        &[agent("a", &["polls"]), agent("b", &["polls"])],
        None,
        "completed: nothing left to do; polls run again only when something waits (a message, \
         or a post by someone else): a, b",
    );
    check(
        &[
            agent("editor", &["scheduled"]),
            agent("reviewer", &["polls"]),
        ],
        None,
        "scheduled: nothing to do now; schedules will run again: editor at 2026-01-01T00:00:30.000Z \
         (workflow_stop",
    );
    // A paused poller polls no more: nothing said of it.
    check(
        &[agent("reviewer", &["polls", "paused"])],
        None,
        "completed",
    );
    check(
        &[agent("reviewer", &["polls", "paused", "pending"])],
        None,
        "blocked: reviewer is paused (by the lead)",
    );
    check(
        &[agent("reviewer", &["polls"])],
        Some(&waiting),
        "running: steps wait for: review waits for coder.complete",
    );
    check(
        &[agent("reviewer", &["polls"])],
        Some(&failed),
        "fails: review failed",
    );
}

/// `agent` with its state's reason set.
fn paused_by(name: &str, reason: &str) -> AgentFacts {
    let mut a = agent(name, &["paused", "pending"]);
    a.summary.reason = Some(reason.into());
    a
}

#[track_caller]
fn check(agents: &[AgentFacts], graph: Option<&Outcome>, want: &str) {
    let got = decided(agents, graph);
    assert_eq!(got, want);
}

/// Every paused agent with messages is named, with why; that blocks the instance
/// whatever its steps or schedules say.
#[test]
fn paused_agents_with_messages_block_before_steps_and_schedules() {
    let waiting = Outcome {
        waiting: vec!["b (its run, by coder)".into()],
        failed: Vec::new(),
    };
    check(
        &[
            paused_by("coder", "auth expired"),
            agent("tester", &["paused", "pending"]),
            agent("editor", &["scheduled"]),
        ],
        Some(&waiting),
        "blocked: coder is paused (auth expired); tester is paused (by the lead)",
    );
    check(&[agent("coder", &["paused"])], None, "completed");
}

/// An armed schedule keeps the instance scheduled even with a failed step; the
/// step's failure counts once nothing is armed.
#[test]
fn a_failed_step_fails_the_instance_only_when_nothing_is_armed() {
    let failed = Outcome {
        waiting: Vec::new(),
        failed: vec![
            "step b (coder) failed: x".into(),
            "step c (tester) failed: y".into(),
        ],
    };
    let got = decided(&[agent("editor", &["scheduled"])], Some(&failed));
    assert!(
        got.starts_with("scheduled: nothing to do now; schedules will run again: editor at"),
        "{got}"
    );
    check(
        &[agent("editor", &[])],
        Some(&failed),
        "fails: step b (coder) failed: x; step c (tester) failed: y",
    );
    let over = Outcome {
        waiting: Vec::new(),
        failed: Vec::new(),
    };
    check(&[agent("editor", &[])], Some(&over), "completed");
}

/// In a step workflow an agent that failed for good is out of the count: its
/// schedule arms nothing; outside one, it still does.
#[test]
fn a_failed_agent_s_schedule_counts_only_outside_a_step_workflow() {
    let mut failed = agent("coder", &["scheduled"]);
    failed.summary.state = AgentState::Failed;
    let over = Outcome {
        waiting: Vec::new(),
        failed: Vec::new(),
    };
    check(std::slice::from_ref(&failed), Some(&over), "completed");
    let got = decided(std::slice::from_ref(&failed), None);
    assert!(
        got.starts_with("scheduled: nothing to do now; schedules will run again: coder at 2026"),
        "{got}"
    );
}

/// Several armed agents are all named, in their order.
#[test]
fn every_armed_schedule_is_named() {
    let got = decided(
        &[
            agent("a", &["scheduled"]),
            agent("b", &[]),
            agent("c", &["scheduled"]),
        ],
        None,
    );
    assert!(got.contains("a at 2026-01-01T00:00:30.000Z, c at 2026-01-01T00:00:30.000Z (workflow_stop disarms them)"), "{got}");
}
