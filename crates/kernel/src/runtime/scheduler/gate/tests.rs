//! The gate's decision as a table: each row changes one fact of an agent that
//! would run, and says what the gate decides for each kind of wake.

use super::{Gate, GateFacts};
use crate::runtime::scheduler::Wake;
use domain::guards::{Budget, DEFAULT_MAX_HOPS, DEFAULT_RUNS_PER_HOUR};
use domain::names::WorkflowRef;
use domain::states::{AgentState, WorkflowState};

/// An idle agent with one open delivery, no budget, nothing spent: it runs.
fn runnable() -> GateFacts {
    GateFacts {
        external: false,
        name: "alice".into(),
        workflow: WorkflowRef::global(),
        workflow_id: 1,
        agent_state: AgentState::Idle,
        workflow_state: WorkflowState::Running,
        open: 1,
        unseen: false,
        hops: 0,
        runs_last_hour: 0,
        agent_budget: Budget::default(),
        workflow_budget: Budget::default(),
        agent_tokens: 0,
        agent_cost: 0.0,
        workflow_tokens: 0,
        workflow_cost: 0.0,
        delegation: None,
    }
}

/// What the gate decided, short: "go", "skip", or "trip: <the reason's start>".
fn decided(f: &GateFacts, wake: Wake) -> String {
    match f.decide(wake) {
        Gate::Go => "go".into(),
        Gate::Skip => "skip".into(),
        Gate::Trip(why) => format!("trip: {why}"),
    }
}

const WAKES: [Wake; 5] = [
    Wake::Message,
    Wake::Retry,
    Wake::Resume,
    Wake::Schedule,
    Wake::Poll,
];

/// One row of the gate's table: what differs from a runnable agent, and the
/// decision for a message, retry, resume, schedule and poll wake.
type Row = (&'static str, fn(&mut GateFacts), [&'static str; 5]);

/// The rows: each fact the gate reads, changed alone (and two together).
fn table() -> Vec<Row> {
    vec![
        ("nothing", |_| {}, ["go", "go", "go", "go", "go"]),
        ("external", |f| f.external = true, ["skip"; 5]),
        (
            "paused",
            |f| f.agent_state = AgentState::Paused,
            ["skip"; 5],
        ),
        (
            "failed agent",
            |f| f.agent_state = AgentState::Failed,
            ["go"; 5],
        ),
        (
            "workflow stopped",
            |f| f.workflow_state = WorkflowState::Stopped,
            ["skip"; 5],
        ),
        (
            "workflow failed",
            |f| f.workflow_state = WorkflowState::Failed,
            ["skip"; 5],
        ),
        (
            "workflow completed",
            |f| f.workflow_state = WorkflowState::Completed,
            ["go"; 5],
        ),
        (
            "empty inbox",
            |f| f.open = 0,
            ["skip", "skip", "skip", "go", "skip"],
        ),
        (
            "runs per hour reached",
            |f| f.runs_last_hour = DEFAULT_RUNS_PER_HOUR as i64,
            ["trip: alice started 60 runs in the last hour"; 5],
        ),
        (
            "hops reached",
            |f| f.hops = DEFAULT_MAX_HOPS as i64,
            ["trip: agents sent each other 30", "go", "go", "go", "go"],
        ),
        (
            "the agent's own hop limit",
            |f| (f.hops, f.agent_budget.max_hops) = (5, Some(5)),
            ["trip: agents sent each other 5", "go", "go", "go", "go"],
        ),
        (
            "the workflow's runs limit",
            |f| (f.runs_last_hour, f.workflow_budget.max_runs_per_hour) = (2, Some(2)),
            ["trip: alice started 2 runs in the last hour (max_runs_per_hour 2)"; 5],
        ),
        (
            "the agent's limit before the workflow's",
            |f| {
                f.runs_last_hour = 2;
                (
                    f.agent_budget.max_runs_per_hour,
                    f.workflow_budget.max_runs_per_hour,
                ) = (Some(10), Some(2));
            },
            ["go"; 5],
        ),
        (
            "the agent's tokens",
            |f| (f.agent_budget.max_tokens, f.agent_tokens) = (Some(100), 100),
            ["trip: alice used 100 tokens, its budget is 100 (max_tokens)"; 5],
        ),
        (
            "the workflow's cost",
            |f| (f.workflow_budget.max_cost_usd, f.workflow_cost) = (Some(1.0), 1.5),
            ["trip: @global:main used $1.5000, its budget is $1 (max_cost_usd)"; 5],
        ),
        (
            "under every budget",
            |f| {
                (f.agent_budget.max_tokens, f.agent_tokens) = (Some(100), 99);
                (f.workflow_budget.max_cost_usd, f.workflow_cost) = (Some(1.0), 0.5);
            },
            ["go"; 5],
        ),
        (
            "the agent above it spent its sub-agents' share",
            |f| f.delegation = Some("the sub-agents of boss used 10 tokens".into()),
            ["trip: the sub-agents of boss used 10 tokens"; 5],
        ),
        (
            "paused and over budget: a skip, no second pause",
            |f| {
                f.agent_state = AgentState::Paused;
                (f.agent_budget.max_tokens, f.agent_tokens) = (Some(1), 5);
            },
            ["skip"; 5],
        ),
    ]
}

/// The rows of a poll: it runs only when something waits, and with nothing
/// waiting no guard trips.
fn poll_rows() -> Vec<Row> {
    vec![
        (
            "empty inbox, others posted since its last run",
            |f| (f.open, f.unseen) = (0, true),
            ["skip", "skip", "skip", "go", "go"],
        ),
        (
            "empty inbox, nothing unseen, runs per hour reached: a poll trips nothing",
            |f| (f.open, f.runs_last_hour) = (0, DEFAULT_RUNS_PER_HOUR as i64),
            [
                "skip",
                "skip",
                "skip",
                "trip: alice started 60 runs in the last hour",
                "skip",
            ],
        ),
        (
            "a paused poller with something unseen",
            |f| (f.open, f.unseen, f.agent_state) = (0, true, AgentState::Paused),
            ["skip"; 5],
        ),
    ]
}

#[test]
fn the_gate_decides_by_the_facts_and_the_wake() {
    for (what, change, want) in table().into_iter().chain(poll_rows()) {
        let mut f = runnable();
        change(&mut f);
        for (wake, want) in WAKES.iter().zip(want) {
            let got = decided(&f, *wake);
            assert!(
                got.starts_with(want),
                "{what}, {wake:?} wake: got {got:?}, want {want:?}"
            );
        }
    }
}
