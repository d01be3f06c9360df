//! MCP Tasks: agent_ask and workflow_run as tasks. The call returns a task at
//! once; the work goes on in the kernel whether or not the client stays, and
//! `tasks/get` gives its state and, once done, the tool's result (the same
//! result a plain call gives).
//!
//! When a call becomes a task depends on the request's era ([`wanted`]):
//! - 2026-07-28 (the tasks extension, SEP-2663 `io.modelcontextprotocol/tasks`):
//!   a request that declares the extension in its capabilities may be answered
//!   with a task, and these two tools always are.
//! - 2025-11-25 and older: only a request that asked for one with the era's task
//!   augmentation (`params.task`), from a client that declared the extension (it
//!   must, to poll `tasks/get`). Declaring it at `initialize` alone asks for
//!   nothing: such a client gets the plain result with its structured content.
//!
//! rmcp's parameters have no `task` field, so the transports mark a request that
//! carries one before rmcp parses it ([`mark`]): its `params.task` is copied into
//! `_meta` under [`ASKED`], which is otherwise removed from what a client sends.
//!
//! Run as a task, a call waits as long as a call may (50 s) unless it says
//! otherwise; work that takes longer ends the task with the same `running`
//! answer and run id a plain call gives, to follow with agent_info or
//! workflow_status. Tasks are the lead's (these are lead tools); an agent's
//! session cannot see or cancel them. They are kept for an hour.

use super::AgentWorker;
use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CreateTaskResult};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use serde_json::Value;
use telemetry::FutureExt as _;

/// The tools a client may run as tasks.
pub const TASK_TOOLS: &[&str] = &["agent_ask", "workflow_run"];

/// How long a finished task stays readable.
const TTL_MS: u64 = 3_600_000;

/// The `_meta` key that says a request asked for a task (`params.task`, moved
/// here by [`mark`]).
pub const ASKED: &str = "agent-worker/task";

/// Marks a `tools/call` that asked for a task (2025-11-25 task augmentation) so
/// the handler can tell once rmcp has dropped `params.task`; an [`ASKED`] key
/// a client put in `_meta` itself is removed. True when the message changed.
pub fn mark(message: &mut Value) -> bool {
    if message.get("method").and_then(Value::as_str) != Some("tools/call") {
        return false;
    }
    let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
        return false;
    };
    let asked = params.get("task").filter(|t| t.is_object()).cloned();
    let stale = match params.get_mut("_meta") {
        Some(Value::Object(m)) => m.remove(ASKED).is_some(),
        _ => false,
    };
    let Some(task) = asked else {
        return stale;
    };
    match params.get_mut("_meta") {
        None => {
            params.insert("_meta".into(), serde_json::json!({ ASKED: task }));
        }
        Some(Value::Object(m)) => {
            m.insert(ASKED.into(), task);
        }
        // Not an object: rmcp refuses the request as it stands.
        Some(_) => return stale,
    }
    true
}

/// Whether this call should become a task: a task tool, from a client that
/// declared the tasks extension, and in a 2025-11-25 (or older) session only if
/// the request itself asked for a task.
pub fn wanted(request: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> bool {
    TASK_TOOLS.contains(&request.name.as_ref())
        && context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks())
        && (crate::era::modern(context) || context.meta.contains_key(ASKED))
}

/// Starts the call as a task and answers with it.
pub fn start(
    worker: &AgentWorker,
    manager: &TaskManager,
    mut request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    let args = request.arguments.get_or_insert_with(Default::default);
    args.entry("wait_seconds")
        .or_insert(serde_json::json!(super::tools::MAX_WAIT_SECONDS));
    // The call's own request ends now (the task answers it); the waiting the tool
    // does follows the task instead, and ends if the task is cancelled.
    let mut context = context;
    let stop = tokio_util::sync::CancellationToken::new();
    context.ct = stop.clone();
    // A task's result is its call's: it cannot be `input_required` (approvals are
    // decided with approval_decide meanwhile).
    context.extensions.insert(super::input_required::InTask);
    let me = worker.clone();
    // The task's work stays in the call's trace (a run it starts nests under it).
    let trace = telemetry::Context::current();
    let task = manager.spawn(
        TaskOptions::new()
            .with_ttl_ms(TTL_MS)
            .with_poll_interval_ms(1000),
        move |ctx| {
            Box::pin(
                async move {
                    let call = async {
                        let tcc = ToolCallContext::new(&me, request, context);
                        me.tools.router.call(tcc).await
                    };
                    tokio::select! {
                        _ = ctx.cancelled() => {
                            stop.cancel();
                            Err(TaskExit::Cancelled)
                        }
                        r = call => match r {
                            Ok(CallToolResponse::Complete(result)) => Ok(result),
                            Ok(_) => Err(TaskExit::Error(McpError::internal_error(
                                "the call did not complete", None))),
                            Err(e) => Err(TaskExit::Error(e)),
                        },
                    }
                }
                .with_context(trace),
            )
        },
    );
    Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_that_asks_for_a_task_is_marked() {
        let mut m =
            json!({"method": "tools/call", "params": {"name": "agent_ask", "task": {"ttl": 5}}});
        assert!(mark(&mut m));
        assert_eq!(m["params"]["_meta"][ASKED], json!({"ttl": 5}));
        let mut m = json!({"method": "tools/call", "params": {"name": "agent_ask",
            "task": {}, "_meta": {"progressToken": 1}}});
        assert!(mark(&mut m));
        assert_eq!(m["params"]["_meta"], json!({"progressToken": 1, ASKED: {}}));
    }

    #[test]
    fn nothing_else_is_marked_and_a_forged_mark_is_removed() {
        for mut m in [
            json!({"method": "tools/call", "params": {"name": "agent_ask"}}),
            json!({"method": "tools/call", "params": {"name": "agent_ask", "task": true}}),
            json!({"method": "prompts/get", "params": {"name": "x", "task": {}}}),
            json!({"method": "tools/call", "params": {"name": "x", "task": {}, "_meta": 3}}),
        ] {
            let before = m.clone();
            assert!(!mark(&mut m), "{before}");
            assert_eq!(m, before);
        }
        let mut m = json!({"method": "tools/call", "params": {"name": "agent_ask",
            "_meta": {ASKED: {}, "progressToken": 1}}});
        assert!(mark(&mut m));
        assert_eq!(m["params"]["_meta"], json!({"progressToken": 1}));
    }
}
