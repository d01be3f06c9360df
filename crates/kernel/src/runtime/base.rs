//! What every service of the runtime is built on: the store, the events, the rooms
//! below, the clock and this node's name. It holds no state of its own but the
//! loopback URL, set once; and it pauses an agent, which every service may do.

use crate::events::{Event, Events};
use crate::governance::contracts::Contracts;
use crate::messaging::{self, Messaging};
use crate::registry::Registry;
use crate::timing::{Clock, Timing};
use domain::error::Result;
use domain::names::WorkflowRef;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use store::Store;

/// What the runtime is built on: the store, the event bus and the rooms below it.
pub struct Below {
    pub store: Store,
    pub events: Events,
    pub contracts: Arc<Contracts>,
    pub registry: Arc<Registry>,
    pub messaging: Arc<Messaging>,
}

/// The ground the runtime's services stand on.
pub struct Base {
    pub(super) store: Store,
    pub(super) events: Events,
    pub(super) contracts: Arc<Contracts>,
    pub(super) registry: Arc<Registry>,
    pub(super) messaging: Arc<Messaging>,
    /// Logs, workers' scratch space and agents' own folders live under it.
    pub(super) data_dir: PathBuf,
    /// This kernel's node name (see [`super::nodes`]): the agents it runs are leased to it.
    pub(super) node: String,
    /// The labels this node offers (`--labels`), as stored (see [`domain::placement`]).
    pub(super) labels: String,
    /// The loopback MCP endpoint, once the HTTP listener is bound.
    url: OnceLock<String>,
    /// The clock every decision reads, and the delays the scheduler keeps.
    pub(super) clock: Clock,
    pub(super) timing: Timing,
}

/// How long an automatic pause lasts after `pauses` automatic pauses in a row:
/// `first`, doubling each time, at most `max`.
pub(crate) fn resume_after(first: Duration, max: Duration, pauses: i64) -> Duration {
    first
        .saturating_mul(1u32 << pauses.clamp(0, 16) as u32)
        .min(max)
}

/// A pause as [`Base::pause`] records it.
pub(crate) struct Pause<'a> {
    pub agent_id: i64,
    pub workflow: &'a WorkflowRef,
    pub workflow_id: i64,
    pub name: &'a str,
    pub reason: &'a str,
    /// An automatic pause (auth, billing) from this time: it resumes by itself
    /// after a backoff.
    pub auto_from: Option<i64>,
}

impl<'a> Pause<'a> {
    /// A pause the lead lifts (no automatic resume).
    pub(crate) fn until_resumed(
        agent_id: i64,
        (workflow, workflow_id): (&'a WorkflowRef, i64),
        name: &'a str,
        reason: &'a str,
    ) -> Self {
        Self {
            agent_id,
            workflow,
            workflow_id,
            name,
            reason,
            auto_from: None,
        }
    }
}

impl Base {
    pub(super) fn new(below: Below, data_dir: PathBuf, node: String, setup: &crate::Setup) -> Self {
        let Below {
            store,
            events,
            contracts,
            registry,
            messaging,
        } = below;
        Self {
            store,
            events,
            contracts,
            registry,
            messaging,
            data_dir,
            node,
            labels: domain::placement::to_text(&setup.labels),
            url: OnceLock::new(),
            clock: setup.clock.clone(),
            timing: setup.timing.clone(),
        }
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    pub(super) fn set_url(&self, url: String) {
        let _ = self.url.set(url);
    }

    /// The kernel's loopback MCP URL (`http://127.0.0.1:PORT/mcp`), once bound.
    pub fn url(&self) -> Option<&str> {
        self.url.get().map(String::as_str)
    }

    /// Where an agent without a configured `cwd` works.
    pub fn workspace_dir(&self, wf: &WorkflowRef, agent: &str) -> PathBuf {
        self.data_dir
            .as_path()
            .join("workspaces")
            .join(&wf.name)
            .join(&wf.tag)
            .join(agent)
    }

    /// Pauses an agent and tells the lead why. An automatic pause returns when
    /// it resumes by itself (the scheduler arms that).
    pub(crate) async fn pause(&self, p: Pause<'_>) -> Result<Option<i64>> {
        let (agent_id, workflow_id, auto_from) = (p.agent_id, p.workflow_id, p.auto_from);
        let (wf2, reason2, name2) = (p.workflow.clone(), p.reason.to_owned(), p.name.to_owned());
        let (first, max) = (self.timing.pause_first, self.timing.pause_max);
        // An automatic pause is told at the time it paused from.
        let now = auto_from.unwrap_or_else(|| self.clock.now_ms());
        let (posted, resume_at) = self
            .store
            .write(move |c| {
                let pauses: i64 = c.query_row("SELECT pauses FROM agents WHERE id = ?1", [agent_id], |r| r.get(0))?;
                let resume_at =
                    auto_from.map(|now| now + resume_after(first, max, pauses).as_millis() as i64);
                c.execute(
                    "UPDATE agents SET state = 'paused', state_reason = ?2, resume_at = ?3,
                       pauses = pauses + ?4 WHERE id = ?1",
                    (agent_id, &reason2, resume_at, auto_from.is_some() as i64),
                )?;
                let then = match resume_at {
                    Some(at) => format!(
                        "It tries again by itself at {} (the wait doubles each time, up to 1 h); fix the cause and \
                         resume {name2} (agent_pause, resume: true) to try now.",
                        domain::clock::fmt_ms(at)
                    ),
                    None => format!(
                        "It stays paused: raise the limit or resume {name2} (agent_pause, resume: true) when you have looked (its unread \
                         messages wait)."
                    ),
                };
                let posted = messaging::post_system(
                    c,
                    workflow_id,
                    &wf2,
                    format!("@user {name2} is paused. {reason2}. {then}"),
                    now,
                )?;
                Ok((posted, resume_at))
            })
            .await?;
        self.messaging.announce(workflow_id, &posted);
        tracing::warn!(agent = %p.name, reason = %p.reason, "agent paused");
        self.events.publish(Event::AgentChanged {
            workflow_id,
            name: p.name.to_owned(),
        });
        Ok(resume_at)
    }
}
