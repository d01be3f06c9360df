//! Context: what a team shares besides its channel. Documents behind providers
//! (files or the database) and proposals with votes. Both post to the channel
//! through messaging, below them.

pub(crate) mod departed;
pub mod documents;
pub mod proposals;

use crate::events::Events;
use crate::governance::contracts::Contracts;
use crate::messaging::Messaging;
use crate::registry::Registry;
use crate::timing::Clock;
use std::path::PathBuf;
use std::sync::Arc;
use store::Store;

/// The context room as a service: documents and proposals of every instance.
pub struct Context {
    store: Store,
    events: Events,
    /// The kernel's clock: stamps, and proposals' deadlines.
    clock: Clock,
    contracts: Arc<Contracts>,
    registry: Arc<Registry>,
    messaging: Arc<Messaging>,
    /// Where file-backed documents live unless an instance binds its own folder.
    data_dir: PathBuf,
    /// One document writer at a time, for every file provider this room builds.
    doc_writes: documents::file::Writes,
    /// Wakes the proposal timer early (a new proposal may have an earlier deadline).
    proposal_wake: Arc<tokio::sync::Notify>,
}

impl Context {
    pub fn new(
        (store, events, clock): (Store, Events, Clock),
        contracts: Arc<Contracts>,
        (registry, messaging): (Arc<Registry>, Arc<Messaging>),
        data_dir: PathBuf,
    ) -> Self {
        Self {
            store,
            events,
            clock,
            contracts,
            registry,
            messaging,
            data_dir,
            doc_writes: Default::default(),
            proposal_wake: Arc::default(),
        }
    }
}
