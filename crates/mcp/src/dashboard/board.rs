//! The board panel: an instance's tasks as the dashboard shows them, read through
//! the tasks room as the lead, cut to what a card needs (no bodies, no results:
//! only whether there is one) and bounded.

use domain::error::Result;
use kernel::tasks::{BLOCKED, TaskView};
use kernel::{Kernel, Scope};
use schemars::JsonSchema;
use serde::Serialize;

/// Tasks shown at most: every live one first (open, blocked, claimed, oldest
/// first), then the latest final ones while there is room.
pub const BOARD_SHOWN: usize = 100;

/// A task's card.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct TaskShown {
    pub id: i64,
    pub title: String,
    /// Its column: open, blocked (open with a dependency not done), claimed,
    /// done, failed or cancelled.
    pub column: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The tasks it waits for that are not done.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocked_by: Vec<i64>,
    /// Whoever may take it (a name, role:<role>; absent for anyone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assign: Option<String>,
    /// A result is attached (task_list with its id shows it).
    pub result: bool,
    /// The approval a move of it waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<i64>,
}

impl From<&TaskView> for TaskShown {
    fn from(t: &TaskView) -> Self {
        let column = if t.is_blocked() {
            BLOCKED
        } else {
            t.state.as_str()
        };
        Self {
            id: t.id,
            title: domain::redact::shown(&t.title),
            column: column.to_owned(),
            owner: t.owner.clone(),
            blocked_by: t.blocked_by.clone(),
            assign: t.assign.clone(),
            result: t.result.is_some(),
            approval: t.approval,
        }
    }
}

/// The instance's board: the cards shown (by id) and how many more there are.
pub async fn board(kernel: &Kernel, scope: &Scope) -> Result<(Vec<TaskShown>, usize)> {
    let all = kernel.tasks().board(scope.workflow_id).await?;
    Ok(bounded(&all, BOARD_SHOWN))
}

/// At most `max` cards: the live tasks first, then the newest final ones; in id
/// order. The number left out is returned with them.
fn bounded(all: &[TaskView], max: usize) -> (Vec<TaskShown>, usize) {
    let (live, done): (Vec<&TaskView>, Vec<&TaskView>) =
        all.iter().partition(|t| !t.state.is_final());
    let mut shown: Vec<&TaskView> = live.into_iter().take(max).collect();
    let room = max - shown.len();
    shown.extend(done.iter().rev().take(room));
    shown.sort_by_key(|t| t.id);
    let cards: Vec<TaskShown> = shown.into_iter().map(TaskShown::from).collect();
    let more = all.len() - cards.len();
    (cards, more)
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::states::TaskState;

    fn task(id: i64, state: TaskState, blocked_by: &[i64]) -> TaskView {
        TaskView {
            id,
            title: format!("t{id}"),
            body: None,
            state,
            blocked_by: blocked_by.to_vec(),
            deps: blocked_by.to_vec(),
            owner: (state == TaskState::Claimed).then(|| "ann".to_owned()),
            assign: None,
            labels: Vec::new(),
            priority: 0,
            result_schema: None,
            result: (state == TaskState::Done).then(|| serde_json::json!({"ok": true})),
            links: Vec::new(),
            approval: None,
            created_by: "user".into(),
            created_at: String::new(),
            updated_at: String::new(),
            history: None,
        }
    }

    /// (tasks as (id, state, blocked by), max) -> (ids shown, their columns, more).
    fn check(tasks: &[(i64, TaskState, &[i64])], max: usize, expect: (&[i64], &[&str], usize)) {
        let all: Vec<TaskView> = tasks.iter().map(|(i, s, b)| task(*i, *s, b)).collect();
        let (cards, more) = bounded(&all, max);
        let ids: Vec<i64> = cards.iter().map(|c| c.id).collect();
        let columns: Vec<&str> = cards.iter().map(|c| c.column.as_str()).collect();
        assert_eq!((ids.as_slice(), columns.as_slice(), more), expect);
    }

    #[test]
    fn columns_and_bounds() {
        use TaskState::*;
        check(
            &[
                (1, Done, &[]),
                (2, Claimed, &[]),
                (3, Open, &[2]),
                (4, Open, &[]),
            ],
            10,
            (&[1, 2, 3, 4], &["done", "claimed", "blocked", "open"], 0),
        );
        // Live tasks first, then the newest final ones.
        check(
            &[
                (1, Done, &[]),
                (2, Cancelled, &[]),
                (3, Failed, &[]),
                (4, Open, &[]),
            ],
            3,
            (&[2, 3, 4], &["cancelled", "failed", "open"], 1),
        );
        check(
            &[(1, Open, &[]), (2, Open, &[]), (3, Done, &[])],
            1,
            (&[1], &["open"], 2),
        );
        check(&[], 5, (&[], &[], 0));
    }

    #[test]
    fn a_card_shows_its_owner_and_whether_it_has_a_result() {
        let done = TaskShown::from(&task(1, TaskState::Done, &[]));
        assert!(done.result && done.owner.is_none());
        let held = TaskShown::from(&task(2, TaskState::Claimed, &[]));
        assert_eq!((held.result, held.owner.as_deref()), (false, Some("ann")));
    }
}
