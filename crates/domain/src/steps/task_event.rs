//! Task events (`{task: "Ship *", state: done}`): a step that waits for a task of
//! its instance's board to reach a state.

use super::On;
use crate::states::TaskState;
use serde_json::Value;

/// The longest title glob a task event may have.
const MAX_GLOB: usize = 500;

/// `{task: <title glob>, state?: done | failed | cancelled | claimed}`.
pub(super) fn task_event(o: &serde_json::Map<String, Value>) -> Result<On, String> {
    if let Some(k) = o.keys().find(|k| !["task", "state"].contains(&k.as_str())) {
        return Err(format!("unknown key {k:?} beside task and state"));
    }
    let title = match o.get("task") {
        Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= MAX_GLOB => s.trim().into(),
        _ => {
            return Err(format!(
                "task: a glob of the task's title, 1 to {MAX_GLOB} characters"
            ));
        }
    };
    let words = "done, failed, cancelled or claimed";
    let state = match o.get("state") {
        None | Some(Value::Null) => TaskState::Done,
        Some(Value::String(s)) => match s.parse::<TaskState>() {
            Ok(TaskState::Open) | Err(_) => return Err(format!("state: {s:?}; use {words}")),
            Ok(st) => st,
        },
        Some(_) => return Err(format!("state: use {words}")),
    };
    Ok(On::Task { title, state })
}
