//! Contracts on the task board's moves (`event: task`).

use super::*;
use serde_json::json;

fn c(v: serde_json::Value) -> Contract {
    parse(&v).unwrap()
}

#[test]
fn moves_of_tasks_are_governed_by_state_title_and_agent() {
    let review = c(
        json!({"name": "reviewed", "when": {"event": "task", "state": "done",
                           "title": "ship*", "agent": "coder*"},
                          "then": {"action": "require_approval", "approvers": ["reviewer"]}}),
    );
    assert_eq!(review.when.event(), "task");
    let s = sentence(&review);
    assert!(
        s.contains("When agent coder* moves a task matching \"ship*\" to done"),
        "{s}"
    );
    assert!(s.contains("hold the move until @reviewer approves"), "{s}");
    let ev = |agent, state, title| Event::Task {
        agent,
        state,
        title,
    };
    // (agent, state it moves to, title, matches).
    for (agent, state, title, want) in [
        ("coder1", "done", "ship the api", true),
        ("coder1", "failed", "ship the api", false),
        ("coder1", "done", "write docs", false),
        ("tester", "done", "ship the api", false),
    ] {
        assert_eq!(
            matches(&review, &ev(agent, state, title)),
            want,
            "{agent} {state} {title}"
        );
    }
    let any = c(
        json!({"name": "no-cancel", "when": {"event": "task", "state": "cancelled"},
                       "then": {"action": "deny"}}),
    );
    assert!(sentence(&any).contains("When any agent moves a task to cancelled"));
    for (when, says) in [
        (
            json!({"event": "task", "state": "claimed"}),
            "when.state: \"claimed\"; use one of open, done",
        ),
        (
            json!({"event": "task", "owner": "x"}),
            "when.owner: unknown field",
        ),
    ] {
        let e = parse(&json!({"name": "x", "when": when, "then": {"action": "deny"}})).unwrap_err();
        assert!(e.contains(says), "{says}: {e}");
    }
    let e = parse(&json!({"name": "x", "when": {"event": "task"}, "then": {"action": "pause"}}))
        .unwrap_err();
    assert!(
        e.contains("a task contract can allow, deny, require_approval"),
        "{e}"
    );
}
