//! MCP Tasks (SEP-2663): agent_ask and workflow_run as tasks, for clients that
//! declare the tasks extension. The call returns a task at once; the work goes
//! on in the kernel whether or not the client stays, and `tasks/get` gives its
//! state and, once done, the tool's result (the same result a plain call gives).
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

/// The tools a client may run as tasks.
pub const TASK_TOOLS: &[&str] = &["agent_ask", "workflow_run"];

/// How long a finished task stays readable.
const TTL_MS: u64 = 3_600_000;

/// Whether this call should become a task: a task tool, from a client that
/// declared the tasks extension.
pub fn wanted(request: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> bool {
    TASK_TOOLS.contains(&request.name.as_ref())
        && context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks())
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
    let task = manager.spawn(
        TaskOptions::new()
            .with_ttl_ms(TTL_MS)
            .with_poll_interval_ms(1000),
        move |ctx| {
            Box::pin(async move {
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
            })
        },
    );
    Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
}
