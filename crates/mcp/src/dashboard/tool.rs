//! `dashboard_watch`, the tool only the app calls: the instance as the dashboard
//! shows it, waiting (a long poll) until something changed since what the app
//! last showed.

use super::view::{self, Snapshot, WatchArgs};
use crate::AgentWorker;
use crate::tools::params::Parameters;
use crate::tools::{ToolError, given, wait_seconds};
use kernel::Kernel;
use kernel::events::Event;
use rmcp::{Json, tool, tool_router};
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

pub const WATCH: &str = "dashboard_watch";
/// How long a poll waits by default: well inside a host's request timeout.
const DEFAULT_WAIT: u64 = 25;
/// Events that come together are read as one change: the view is read again at
/// most this often while they keep coming.
const COALESCE: Duration = Duration::from_millis(100);

#[tool_router(router = dashboard_tools, vis = "pub(crate)")]
impl AgentWorker {
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
    ) -> Result<Json<Snapshot>, ToolError> {
        let wait = wait_seconds(a.wait_seconds, DEFAULT_WAIT, WATCH)?;
        Ok(Json(watch(&self.kernel, &a, wait).await?))
    }
}

/// The view, at once when it differs from `seen` or has new messages; else when
/// an event changes it, or at `wait`'s end.
async fn watch(kernel: &Kernel, a: &WatchArgs, wait: Duration) -> Result<Snapshot, ToolError> {
    let asked = given(&a.workflow);
    let since = given(&a.since).map(str::to_owned);
    let deadline = Instant::now() + wait;
    // Subscribed before the first read: nothing committed after it is missed.
    let mut events = kernel.events.subscribe();
    loop {
        let snap = view::snapshot(kernel, asked, since.clone()).await?;
        let news = !snap.messages.is_empty() || given(&a.seen) != Some(snap.version.as_str());
        if news || Instant::now() >= deadline {
            return Ok(snap);
        }
        if !next_change(&mut events, deadline).await {
            return Ok(view::snapshot(kernel, asked, since).await?);
        }
    }
}

/// Waits for an event (then lets the ones that follow it arrive): false at the
/// deadline or when the kernel stops publishing.
async fn next_change(
    events: &mut tokio::sync::broadcast::Receiver<Event>,
    deadline: Instant,
) -> bool {
    match tokio::time::timeout_at(deadline, events.recv()).await {
        Err(_) | Ok(Err(RecvError::Closed)) => return false,
        Ok(Ok(_)) | Ok(Err(RecvError::Lagged(_))) => {}
    }
    tokio::time::sleep(COALESCE.min(deadline.saturating_duration_since(Instant::now()))).await;
    // What came meanwhile is read with the view that follows.
    while let Ok(_) | Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) =
        events.try_recv()
    {}
    true
}
