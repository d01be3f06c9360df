//! Kernel events: what changed, published after the change committed.
//!
//! The scheduler (and anything else that must react at once, such as long polls)
//! subscribes here instead of polling the store. Publishing never blocks; a slow
//! subscriber loses old events (`RecvError::Lagged`) and must re-read the store,
//! which is always the truth.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::broadcast;

/// Serialised (for the other kernels of a store: see `runtime::nodes::bus`) as
/// `{"kind": ..., fields}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A message was delivered to `recipients` in workflow `workflow_id`: one event
    /// per message, however many recipients (an `@all` to hundreds of agents is one
    /// event and one lookup, not hundreds).
    Delivered {
        workflow_id: i64,
        recipients: std::sync::Arc<[String]>,
        message_id: String,
    },
    /// A message was posted to a channel (any kind, any visibility).
    Posted {
        workflow_id: i64,
        message_id: String,
    },
    /// An agent was created, changed or deleted.
    AgentChanged { workflow_id: i64, name: String },
    /// A worker run's process was started (the wake latency ends here).
    RunStarted {
        workflow_id: i64,
        agent: String,
        run_id: String,
    },
    /// A worker run ended and its row is final.
    RunEnded {
        workflow_id: i64,
        agent: String,
        run_id: String,
        ok: bool,
    },
    /// An agent's branch moved: a run's commit, a merge into it, or a sync.
    BranchMoved { workflow_id: i64, agent: String },
    /// A workflow run's status changed (completed, blocked, failed, stopped, running).
    WorkflowSettled {
        workflow_id: i64,
        status: domain::states::WorkflowState,
    },
    /// A watched workflow run has been quiet for the debounce: time to decide
    /// whether it is done (the runtime notices, the workflows room decides).
    WorkflowQuiet { workflow_id: i64 },
    /// A document of an instance was written through the kernel (`created`: it
    /// did not exist before). Edits made to files outside the kernel are not seen.
    DocumentChanged {
        workflow_id: i64,
        file: String,
        created: bool,
    },
    /// The kernel told the lead something in an instance's channel (an agent
    /// paused or failed, a guard tripped): what the lead's clients are told too.
    Notice { workflow_id: i64, text: String },
    /// A contract asked for an approval (approval_list shows it).
    ApprovalAsked { workflow_id: i64, id: i64 },
    /// An approval was decided, timed out or lost.
    ApprovalClosed { workflow_id: i64, id: i64 },
    /// An agent failed for good (its fourth failure in a row): its workflow run
    /// fails with this reason.
    AgentFailed {
        workflow_id: i64,
        agent: String,
        reason: String,
    },
    /// A member acknowledged messages itself (my_inbox_ack): a step it was given
    /// may be done (a joined client or a person has no run whose end says so).
    Acked { workflow_id: i64, agent: String },
    /// The contracts changed (any of them): the set in force is read again.
    ContractsChanged,
    /// The lead (or a member a contract allows) sent `agent` an urgent message: the node that runs it stops its
    /// turn, and its next run reads the message first.
    Urgent { workflow_id: i64, agent: String },
    /// A member reported feedback about its tools or skills (my_feedback);
    /// `first`: the instance's first kept report (its feedback resource is new).
    FeedbackGiven { workflow_id: i64, first: bool },
    /// A task of an instance's board was added, claimed, moved, released, noted,
    /// or held for an approval; `state` is its state now, `moved` whether the
    /// change set it (a note, an edit or a hold does not).
    TaskChanged {
        workflow_id: i64,
        id: i64,
        state: domain::states::TaskState,
        #[serde(default = "moved_by_default")]
        moved: bool,
    },
}

/// A task change from a kernel that does not say whether it moved the task.
fn moved_by_default() -> bool {
    true
}

/// What publishing also hands an event to (the bus to other kernels).
type Forward = Box<dyn Fn(&Event) + Send + Sync>;

#[derive(Clone)]
pub struct Events {
    tx: broadcast::Sender<Event>,
    forward: Arc<OnceLock<Forward>>,
    /// When traces are exported: the context a message to an agent was sent in,
    /// which the agent's next run continues (a run the scheduler starts is not in
    /// the sender's call). Keyed by (workflow id, agent); at most
    /// [`MAX_TRACED`] kept.
    traced: Arc<Mutex<HashMap<(i64, String), telemetry::Context>>>,
}

/// Senders' contexts kept at most (past it, the oldest are forgotten together).
const MAX_TRACED: usize = 4096;

impl Default for Events {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(4096).0,
            forward: Arc::default(),
            traced: Arc::default(),
        }
    }
}

impl Events {
    /// Publishes an event of this kernel: to its subscribers and, when the store
    /// is shared, to the other kernels.
    pub fn publish(&self, e: Event) {
        if let Event::Delivered {
            workflow_id,
            recipients,
            ..
        } = &e
            && let Some(cx) = telemetry::current_parent()
        {
            let mut traced = self.traced.lock().unwrap_or_else(|e| e.into_inner());
            if traced.len() + recipients.len() > MAX_TRACED {
                traced.clear();
            }
            for r in recipients.iter() {
                traced.insert((*workflow_id, r.clone()), cx.clone());
            }
        }
        if let Some(f) = self.forward.get() {
            f(&e);
        }
        let _ = self.tx.send(e); // no subscriber is fine
    }

    /// Publishes an event another kernel sent: to this kernel's subscribers only.
    pub fn publish_remote(&self, e: Event) {
        let _ = self.tx.send(e);
    }

    /// Hands every event published from now on to `f` as well (set once).
    pub fn forward_to(&self, f: Forward) {
        let _ = self.forward.set(f);
    }
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }

    /// How many listen now: a test sees a waiting read begin by it.
    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }

    /// The context the latest message to `agent` was sent in (traces only), once.
    pub fn take_trace(&self, workflow_id: i64, agent: &str) -> Option<telemetry::Context> {
        if !telemetry::enabled() {
            return None;
        }
        self.traced
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(workflow_id, agent.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::Event;
    use crate::messaging::Outgoing;
    use crate::registry::NewAgent;
    use crate::{Caller, Kernel};

    /// A send publishes one `Posted` and one `Delivered` naming its recipients, after
    /// commit; a refused send publishes nothing.
    #[tokio::test]
    async fn deliveries_are_published_after_commit() {
        let dir = tempfile::tempdir().unwrap();
        let k = Kernel::open(dir.path(), "awadmin_test_token_0123456789".into())
            .await
            .unwrap();
        for name in ["alice", "bob", "carol"] {
            k.agent_new(NewAgent {
                name: name.into(),
                backend: "mock".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        }
        let mut rx = k.events.subscribe();
        let scope = k.registry().scope(&Caller::Lead, None).await.unwrap();
        let too_long = Outgoing {
            message: "x".repeat(2 * 1024 * 1024),
            ..Default::default()
        };
        assert!(k.messaging().channel_send(&scope, too_long).await.is_err());
        let sent = k
            .messaging()
            .channel_send(
                &scope,
                Outgoing {
                    message: "@alice @bob go".into(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();

        let mut got = Vec::new();
        while let Ok(e) = rx.try_recv() {
            got.push(e);
        }
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(matches!(&got[0], Event::Posted { message_id, .. } if *message_id == sent.id));
        let mut recipients: Vec<String> = match &got[1] {
            Event::Delivered {
                recipients,
                message_id,
                ..
            } if *message_id == sent.id => recipients.to_vec(),
            other => panic!("unexpected {other:?}"),
        };
        recipients.sort();
        assert_eq!(recipients, ["alice", "bob"]);
        // The store agrees with the events: both deliveries are pending.
        let info = k.agent_info("bob").await.unwrap();
        assert_eq!(info.inbox.pending, 1);
    }
}
