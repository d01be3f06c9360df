//! `dashboard_open`, the tool that opens the dashboard under its own title (a host
//! titles an app's panel with the tool that opened it), and `dashboard_watch`,
//! the tool only the app calls: the instance as the dashboard shows it, waiting
//! (a long poll) until something it shows changed since what the app last
//! showed. A wait ends early when the app cancels it (it switched instances, or
//! the host took the page down); at most [`MAX_WATCHING`] wait at once.

use super::view::{self, OpenArgs, Opened, Snapshot, WatchArgs};
use crate::AgentWorker;
use crate::tools::params::Parameters;
use crate::tools::{ToolError, given, wait_seconds};
use kernel::Kernel;
use kernel::events::Event;
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub const WATCH: &str = "dashboard_watch";
pub const OPEN: &str = "dashboard_open";
/// How long a poll waits by default: well inside a host's request timeout.
const DEFAULT_WAIT: u64 = 25;
/// Events that come together are read as one change: the view is read again at
/// most this often while they keep coming.
const COALESCE: Duration = Duration::from_millis(100);
/// Polls that may wait at once (each open dashboard holds one).
pub const MAX_WATCHING: usize = 64;

static WATCHING: Semaphore = Semaphore::const_new(MAX_WATCHING);

#[tool_router(router = dashboard_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Shows the person the team dashboard, live, in this host: an instance's
    /// channel, agents and runs, the task board, approvals (to approve or deny) and documents.
    #[tool(
        title = "Team dashboard",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn dashboard_open(
        &self,
        Parameters(a): Parameters<OpenArgs>,
    ) -> Result<Json<Opened>, ToolError> {
        Ok(Json(view::opened(&self.kernel, given(&a.workflow)).await?))
    }

    /// The team dashboard's view of an instance (for the dashboard app only).
    #[tool(
        title = "Watch an instance",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn dashboard_watch(
        &self,
        Parameters(a): Parameters<WatchArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Snapshot>, ToolError> {
        let wait = wait_seconds(a.wait_seconds, DEFAULT_WAIT, WATCH)?;
        Ok(Json(watch(&self.kernel, &a, wait, &ctx.ct).await?))
    }
}

/// The view, at once when it differs from `seen` or has new messages; else when
/// an event changes it, or at `wait`'s end, or when the call is cancelled.
async fn watch(
    kernel: &Kernel,
    a: &WatchArgs,
    wait: Duration,
    cancelled: &CancellationToken,
) -> Result<Snapshot, ToolError> {
    let asked = given(&a.workflow);
    let since = given(&a.since).map(str::to_owned);
    // Subscribed before the first read: nothing committed after it is missed.
    let mut events = kernel.events.subscribe();
    let snap = view::snapshot(kernel, asked, since.clone()).await?;
    let news = !snap.messages.is_empty() || given(&a.seen) != Some(snap.version.as_str());
    if news || wait.is_zero() {
        return Ok(snap);
    }
    let Ok(_permit) = WATCHING.try_acquire() else {
        return Err(ToolError(format!(
            "{MAX_WATCHING} dashboards are waiting already: call with wait_seconds 0, or close one"
        )));
    };
    let deadline = Instant::now() + wait;
    let mut shown = snap;
    loop {
        let more = tokio::select! {
            more = next_change(&mut events, shown.workflow_id, deadline) => more,
            () = cancelled.cancelled() => false,
        };
        let snap = view::snapshot(kernel, asked, since.clone()).await?;
        let news = !snap.messages.is_empty() || snap.version != shown.version;
        if news || !more {
            return Ok(snap);
        }
        shown = snap;
    }
}

/// Whether `event` may change what the dashboard shows of instance `shown`:
/// anything of that instance, and the instances' list (a run settled, an agent
/// came or went). A lagged receiver missed some: it may.
fn concerns(event: &Event, shown: Option<i64>) -> bool {
    let id = match event {
        Event::Delivered { workflow_id, .. }
        | Event::Posted { workflow_id, .. }
        | Event::RunStarted { workflow_id, .. }
        | Event::RunEnded { workflow_id, .. }
        | Event::BranchMoved { workflow_id, .. }
        | Event::DocumentChanged { workflow_id, .. }
        | Event::Notice { workflow_id, .. }
        | Event::ApprovalAsked { workflow_id, .. }
        | Event::ApprovalClosed { workflow_id, .. }
        | Event::AgentFailed { workflow_id, .. }
        | Event::Acked { workflow_id, .. }
        | Event::FeedbackGiven { workflow_id, .. }
        | Event::TaskChanged { workflow_id, .. }
        | Event::WorkflowQuiet { workflow_id } => *workflow_id,
        Event::AgentChanged { .. } | Event::WorkflowSettled { .. } => return true,
        // The message's own events (posted, delivered) show it.
        Event::ContractsChanged | Event::Urgent { .. } => return false,
    };
    shown.is_none_or(|s| s == id)
}

/// Waits for an event that concerns the shown instance (then lets the ones that
/// follow it arrive): false at the deadline or when the kernel stops publishing.
async fn next_change(
    events: &mut tokio::sync::broadcast::Receiver<Event>,
    shown: Option<i64>,
    deadline: Instant,
) -> bool {
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Err(_) | Ok(Err(RecvError::Closed)) => return false,
            Ok(Err(RecvError::Lagged(_))) => break,
            Ok(Ok(e)) if concerns(&e, shown) => break,
            Ok(Ok(_)) => {}
        }
    }
    tokio::time::sleep(COALESCE.min(deadline.saturating_duration_since(Instant::now()))).await;
    // What came meanwhile is read with the view that follows.
    while let Ok(_) | Err(TryRecvError::Lagged(_)) = events.try_recv() {}
    true
}
