//! Resource subscriptions: the kernel's committed events, as MCP notifications.
//!
//! One task per server listens to the kernel's events and turns each into the
//! resource URIs it changed (a post: the instance's channel and status; a
//! delivery: the recipients' inboxes; a finished run: the agent, the status and
//! the run; a document write: the document) and whether the list of resources
//! changed (an agent, a document or an instance appearing or going). Then:
//!
//! - legacy sessions (2025-11-25 and stdio) that called `resources/subscribe`
//!   get `notifications/resources/updated` for the URIs they asked for, and
//!   those that subscribed or listed resources get
//!   `notifications/resources/list_changed`;
//! - 2026-07-28 clients get the same through `subscriptions/listen`, for the
//!   URIs their accepted filter names, for as long as their client listens
//!   ([`listen`]).
//!
//! A subscription is checked against the caller's identity when it is made (what
//! it may not read, it cannot watch). A session whose peer is gone is dropped on
//! the first notification that fails.
//!
//! Logging rides on the same events: lead sessions that called
//! `logging/setLevel` get `notifications/message` for what the lead should notice.
//! (rmcp marks logging deprecated: SEP-2577 drops it from 2026-07-28, and the
//! 2025-11-25 clients we serve still use it.)
#![allow(deprecated)]

pub mod budget;
pub mod listen;

use super::resources;
use domain::names::WorkflowRef;
use domain::states::WorkflowState;
use kernel::events::Event;
use kernel::{Caller, Kernel};
use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ResourceUpdatedNotificationParam,
};
use rmcp::{Peer, RoleServer};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::broadcast;

/// What an event changed, for the listeners.
#[derive(Debug, Clone)]
pub struct Change {
    pub uris: Arc<[String]>,
    pub list_changed: bool,
}

struct Watcher {
    peer: Peer<RoleServer>,
    uris: HashSet<String>,
    list_changed: bool,
    /// Whose budget its URIs count against, and how many bytes they are.
    owner: String,
    bytes: usize,
}

impl Watcher {
    fn new(peer: Peer<RoleServer>, owner: String) -> Self {
        Self {
            peer,
            uris: HashSet::new(),
            list_changed: true,
            owner,
            bytes: 0,
        }
    }
}

/// The server's subscriptions (shared by every session of one kernel).
pub struct Hub {
    /// Legacy sessions by key (the owner and `Mcp-Session-Id`, or `stdio`).
    legacy: Mutex<HashMap<String, Watcher>>,
    /// What each identity holds of its subscriptions.
    budgets: Arc<budget::Budgets>,
    changes: broadcast::Sender<Change>,
    /// The last changes, for a listener that starts after the client was told
    /// it listens (rmcp acknowledges before the handler runs): replayed, a
    /// notification too many only makes the client read again.
    recent: Mutex<std::collections::VecDeque<(std::time::Instant, Change)>>,
    /// Lead sessions that set a log level: what the lead should notice reaches them
    /// as notifications/message at or above it.
    loggers: Mutex<HashMap<String, (Peer<RoleServer>, LoggingLevel)>>,
}

/// How far back a new listener is told of changes.
const REPLAY: std::time::Duration = std::time::Duration::from_secs(2);

impl Hub {
    /// Starts the task that turns the kernel's events into changes.
    pub fn start(kernel: &Arc<Kernel>) -> Arc<Hub> {
        let hub = Arc::new(Hub {
            legacy: Mutex::default(),
            budgets: Arc::default(),
            changes: broadcast::channel(1024).0,
            recent: Mutex::default(),
            loggers: Mutex::default(),
        });
        let weak_kernel: Weak<Kernel> = Arc::downgrade(kernel);
        let weak_hub = Arc::downgrade(&hub);
        let mut rx = kernel.events.subscribe();
        tokio::spawn(async move {
            let mut names: HashMap<i64, WorkflowRef> = HashMap::new();
            loop {
                let ev = match rx.recv().await {
                    Ok(ev) => ev,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                let (Some(kernel), Some(hub)) = (weak_kernel.upgrade(), weak_hub.upgrade()) else {
                    return;
                };
                if let Some((level, text)) = notice(&kernel, &mut names, &ev).await {
                    hub.log(level, text).await;
                }
                if let Some(change) = changed(&kernel, &mut names, &ev).await {
                    hub.fan_out(&change).await;
                    {
                        let mut recent = hub.recent.lock().unwrap();
                        let now = std::time::Instant::now();
                        while recent
                            .front()
                            .is_some_and(|(at, _)| now.duration_since(*at) > REPLAY)
                            || recent.len() >= 256
                        {
                            recent.pop_front();
                        }
                        recent.push_back((now, change.clone()));
                    }
                    let _ = hub.changes.send(change);
                }
            }
        });
        hub
    }

    /// Changes as they happen (for `subscriptions/listen`), and those of the last
    /// two seconds, which a listener may have missed while it was being set up.
    pub fn changes(&self) -> (broadcast::Receiver<Change>, Vec<Change>) {
        let rx = self.changes.subscribe();
        let now = std::time::Instant::now();
        let recent = self
            .recent
            .lock()
            .unwrap()
            .iter()
            .filter(|(at, _)| now.duration_since(*at) <= REPLAY)
            .map(|(_, c)| c.clone())
            .collect();
        (rx, recent)
    }

    /// A lead session wants what it should notice, at `level` or above.
    pub fn set_level(&self, key: String, peer: Peer<RoleServer>, level: LoggingLevel) {
        self.loggers.lock().unwrap().insert(key, (peer, level));
    }

    async fn log(&self, level: LoggingLevel, text: String) {
        let targets: Vec<(String, Peer<RoleServer>)> = self
            .loggers
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, (_, min))| rank(level) >= rank(*min))
            .map(|(k, (p, _))| (k.clone(), p.clone()))
            .collect();
        for (key, peer) in targets {
            let sent = peer
                .notify_logging_message(
                    LoggingMessageNotificationParam::new(level, serde_json::json!(text))
                        .with_logger("agent-worker"),
                )
                .await;
            if sent.is_err() {
                self.loggers.lock().unwrap().remove(&key);
            }
        }
    }

    /// A legacy session watches `uri` (already authorized), within its owner's
    /// budget: at most [`budget::MAX_FILTER`] URIs a session.
    pub fn subscribe(
        &self,
        key: String,
        owner: String,
        peer: Peer<RoleServer>,
        uri: String,
    ) -> Result<(), budget::Refused> {
        let mut w = self.legacy.lock().unwrap();
        self.drop_closed(&mut w);
        let entry = w
            .entry(key)
            .or_insert_with(|| Watcher::new(peer.clone(), owner.clone()));
        entry.peer = peer;
        if entry.uris.contains(&uri) {
            return Ok(());
        }
        if entry.uris.len() >= budget::MAX_FILTER {
            return Err(budget::Refused::TooManyUris(entry.uris.len() + 1));
        }
        budget::check_filter(std::slice::from_ref(&uri))?;
        self.budgets.take(&entry.owner, uri.len())?;
        entry.bytes += uri.len();
        entry.uris.insert(uri);
        Ok(())
    }

    pub fn unsubscribe(&self, key: &str, uri: &str) {
        if let Some(w) = self.legacy.lock().unwrap().get_mut(key)
            && w.uris.remove(uri)
        {
            w.bytes -= uri.len();
            self.budgets.give_back(&w.owner, uri.len());
        }
    }

    /// A legacy session that listed resources hears when the list changes.
    pub fn watch_list(&self, key: String, owner: String, peer: Peer<RoleServer>) {
        let mut w = self.legacy.lock().unwrap();
        self.drop_closed(&mut w);
        w.entry(key).or_insert_with(|| Watcher::new(peer, owner));
    }

    /// The budget of open listens (see [`budget::Lease`]).
    pub fn budgets(&self) -> &Arc<budget::Budgets> {
        &self.budgets
    }

    /// Forgets a legacy session and gives back what it held.
    fn forget(&self, w: &mut HashMap<String, Watcher>, key: &str) {
        if let Some(gone) = w.remove(key) {
            self.budgets.give_back(&gone.owner, gone.bytes);
        }
    }

    /// Forgets the sessions whose client is gone (so what a closed session held
    /// never counts against its owner).
    fn drop_closed(&self, w: &mut HashMap<String, Watcher>) {
        let closed: Vec<String> = w
            .iter()
            .filter(|(_, x)| x.peer.is_transport_closed())
            .map(|(k, _)| k.clone())
            .collect();
        for k in closed {
            self.forget(w, &k);
        }
    }

    async fn fan_out(&self, change: &Change) {
        let targets: Vec<(String, Peer<RoleServer>, Vec<String>, bool)> = self
            .legacy
            .lock()
            .unwrap()
            .iter()
            .map(|(k, w)| {
                let uris = change
                    .uris
                    .iter()
                    .filter(|u| w.uris.contains(*u))
                    .cloned()
                    .collect::<Vec<_>>();
                (
                    k.clone(),
                    w.peer.clone(),
                    uris,
                    change.list_changed && w.list_changed,
                )
            })
            .filter(|(_, _, uris, list)| !uris.is_empty() || *list)
            .collect();
        for (key, peer, uris, list) in targets {
            let mut ok = true;
            for uri in uris {
                ok &= peer
                    .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                    .await
                    .is_ok();
            }
            if list {
                ok &= peer.notify_resource_list_changed().await.is_ok();
            }
            if !ok {
                self.forget(&mut self.legacy.lock().unwrap(), &key);
            }
        }
    }
}

/// An instance's name by its id, remembered (instances are never renamed).
async fn name_of(
    kernel: &Kernel,
    names: &mut HashMap<i64, WorkflowRef>,
    wid: i64,
) -> Option<WorkflowRef> {
    if let Some(w) = names.get(&wid) {
        return Some(w.clone());
    }
    let w = kernel.registry().workflow_ref(wid).await.ok().flatten()?;
    names.insert(wid, w.clone());
    Some(w)
}

fn rank(l: LoggingLevel) -> u8 {
    match l {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// What the lead should notice in an event, and how much: the kernel's own
/// messages to it (a pause, a failure, a guard) and a workflow run's outcome.
async fn notice(
    kernel: &Kernel,
    names: &mut HashMap<i64, WorkflowRef>,
    ev: &Event,
) -> Option<(LoggingLevel, String)> {
    let (wid, level, text) = match ev {
        Event::Notice { workflow_id, text } => (*workflow_id, LoggingLevel::Notice, text.clone()),
        Event::WorkflowSettled {
            workflow_id,
            status,
        } => {
            let level = match status {
                WorkflowState::Failed => LoggingLevel::Error,
                WorkflowState::Blocked => LoggingLevel::Warning,
                WorkflowState::Completed | WorkflowState::Scheduled | WorkflowState::Stopped => {
                    LoggingLevel::Info
                }
                WorkflowState::Running | WorkflowState::Active => return None,
            };
            (*workflow_id, level, format!("the workflow run is {status}"))
        }
        _ => return None,
    };
    let w = name_of(kernel, names, wid).await?;
    Some((level, format!("{w}: {text}")))
}

/// The resources an event changed.
async fn changed(
    kernel: &Kernel,
    names: &mut HashMap<i64, WorkflowRef>,
    ev: &Event,
) -> Option<Change> {
    let wid = match ev {
        Event::Delivered { workflow_id, .. }
        | Event::Posted { workflow_id, .. }
        | Event::AgentChanged { workflow_id, .. }
        | Event::RunStarted { workflow_id, .. }
        | Event::RunEnded { workflow_id, .. }
        | Event::BranchMoved { workflow_id, .. }
        | Event::WorkflowSettled { workflow_id, .. }
        | Event::DocumentChanged { workflow_id, .. }
        | Event::ApprovalAsked { workflow_id, .. }
        | Event::ApprovalClosed { workflow_id, .. }
        | Event::FeedbackGiven { workflow_id, .. }
        | Event::TaskChanged { workflow_id, .. }
        | Event::Acked { workflow_id, .. } => *workflow_id,
        Event::WorkflowQuiet { .. }
        | Event::AgentFailed { .. }
        | Event::Notice { .. }
        | Event::Urgent { .. }
        | Event::ContractsChanged => {
            return None;
        }
    };
    let w = name_of(kernel, names, wid).await?;
    let (uris, list_changed) = match ev {
        Event::Posted { .. } => (vec![resources::channel_uri(&w)], false),
        Event::Delivered { recipients, .. } => (
            recipients
                .iter()
                .map(|r| resources::inbox_uri(&w, r))
                .chain([resources::status_uri(&w)])
                .collect(),
            false,
        ),
        Event::AgentChanged { name, .. } => (
            vec![resources::agent_uri(&w, name), resources::status_uri(&w)],
            true,
        ),
        Event::RunStarted { agent, run_id, .. } | Event::RunEnded { agent, run_id, .. } => (
            vec![
                resources::agent_uri(&w, agent),
                resources::status_uri(&w),
                resources::run_uri(run_id),
            ],
            false,
        ),
        Event::BranchMoved { agent, .. } => (vec![resources::diff_uri(&w, agent)], false),
        Event::Acked { agent, .. } => (
            vec![resources::inbox_uri(&w, agent), resources::status_uri(&w)],
            false,
        ),
        Event::WorkflowSettled { .. } => (vec![resources::status_uri(&w)], true),
        // The first report lists the instance's feedback resource.
        Event::FeedbackGiven { first, .. } => (
            vec![resources::feedback_uri(&w), resources::status_uri(&w)],
            *first,
        ),
        Event::ApprovalAsked { .. } | Event::ApprovalClosed { .. } => (
            vec![resources::status_uri(&w), resources::contracts_uri()],
            false,
        ),
        Event::DocumentChanged { file, created, .. } => {
            (vec![resources::document_uri(&w, file)], *created)
        }
        // A board is listed once it has a task: a new open task may be its first.
        Event::TaskChanged { state, .. } => (
            vec![resources::board_uri(&w)],
            *state == domain::states::TaskState::Open,
        ),
        Event::WorkflowQuiet { .. }
        | Event::AgentFailed { .. }
        | Event::Notice { .. }
        | Event::Urgent { .. }
        | Event::ContractsChanged => {
            return None;
        }
    };
    Some(Change {
        uris: uris.into(),
        list_changed,
    })
}

/// The key a legacy subscription is kept under: the HTTP session, or stdio.
pub fn session_key(ctx: &rmcp::service::RequestContext<RoleServer>) -> String {
    match ctx.extensions.get::<::http::request::Parts>() {
        Some(parts) => parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map_or_else(|| "http".to_owned(), |s| format!("http:{s}")),
        None => "stdio".to_owned(),
    }
}

/// The key of a legacy session's subscriptions: its owner and its session (a
/// session without an id is never shared between identities).
pub fn watcher_key(caller: &Caller, ctx: &rmcp::service::RequestContext<RoleServer>) -> String {
    format!("{} {}", budget::owner(caller), session_key(ctx))
}

/// Which of `uris` the caller may watch (the ones it may not are left out, as if
/// they did not exist). Each instance named is looked up once, however many of
/// its URIs the filter names.
pub async fn authorized(kernel: &Kernel, caller: &Caller, uris: &[String]) -> HashSet<String> {
    let mut ok = HashSet::new();
    let mut instances = HashMap::new();
    for u in uris {
        if resources::authorize_with(kernel, caller, u, &mut instances)
            .await
            .is_ok()
        {
            ok.insert(u.clone());
        }
    }
    ok
}
