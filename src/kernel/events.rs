//! Kernel events: what changed, published after the change committed.
//!
//! The scheduler (and anything else that must react at once, such as long polls)
//! subscribes here instead of polling the store. Publishing never blocks; a slow
//! subscriber loses old events (`RecvError::Lagged`) and must re-read the store,
//! which is always the truth.

use tokio::sync::broadcast;

#[derive(Debug, Clone)]
pub enum Event {
    /// A message was delivered to `recipient` in workflow `workflow_id`.
    Delivered {
        workflow_id: i64,
        recipient: String,
        message_id: String,
    },
    /// A message was posted to a channel (any kind, any visibility).
    Posted {
        workflow_id: i64,
        message_id: String,
    },
    /// An agent was created, changed or deleted.
    AgentChanged { workflow_id: i64, name: String },
}

#[derive(Clone)]
pub struct Events {
    tx: broadcast::Sender<Event>,
}

impl Default for Events {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(4096).0,
        }
    }
}

impl Events {
    pub fn publish(&self, e: Event) {
        let _ = self.tx.send(e); // no subscriber is fine
    }
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }
}
