//! Notifications between the kernels of one database: PostgreSQL's LISTEN/NOTIFY on
//! one channel, each message a short text (the kernel's events, serialised above).
//!
//! Two connections of the bus's own, each on a thread of its own, so neither waits
//! for the store's jobs nor they for it: the sender batches what this node publishes
//! into one `pg_notify` statement per batch; the listener waits for what the others
//! publish. A notification is a hint, never the truth: what it says is in the store.
//! A notification can be missed: the listener reconnecting says so itself
//! (`on_gap`); a sender that had to drop some (its queue full, its connection lost)
//! sends [`RESYNC`] with its next batch. Either way the nodes read the store again
//! for what they owe.

use super::client::Client;
use domain::error::Result;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

/// The channel every kernel of a database listens on.
pub const CHANNEL: &str = "agent_worker";
/// The longest payload sent (PostgreSQL refuses 8000 bytes and more).
pub const MAX_PAYLOAD: usize = 7_900;
/// Messages waiting to be sent at most; more are dropped (and made up by the
/// others' catch-up).
const QUEUE: usize = 16_384;
/// Most notifications in one statement.
const BATCH: usize = 256;
/// What a sender that dropped notifications sends next: every node reads the store
/// again.
pub const RESYNC: &str = r#"{"t":"resync"}"#;
/// How long a lost connection waits before connecting again.
const RETRY: Duration = Duration::from_millis(500);

/// What the bus calls: with each payload another kernel sent, and after each
/// (re)connect of the listener.
pub struct Handlers {
    pub on_message: Box<dyn Fn(String) + Send>,
    pub on_gap: Box<dyn Fn() + Send>,
}

/// This node's end of the bus. Dropping it stops both threads (within a second).
pub struct Bus {
    tx: SyncSender<String>,
    stop: Arc<AtomicBool>,
    /// Set when a notification was dropped: the next batch carries [`RESYNC`].
    dropped: Arc<AtomicBool>,
}

impl Bus {
    /// Starts the sender and the listener on `url`; connections are named
    /// `application`. Returns at once: both threads connect (and reconnect) by
    /// themselves.
    pub fn start(url: &str, application: &str, handlers: Handlers) -> Result<Self> {
        let (tx, rx) = sync_channel::<String>(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicBool::new(false));
        let (u, a, d) = (url.to_owned(), application.to_owned(), dropped.clone());
        std::thread::Builder::new()
            .name("bus-send".into())
            .spawn(move || send_loop(&u, &a, &rx, &d))
            .map_err(|e| domain::error::Error::internal(format!("cannot start the bus: {e}")))?;
        let (u, a, s) = (url.to_owned(), application.to_owned(), stop.clone());
        std::thread::Builder::new()
            .name("bus-listen".into())
            .spawn(move || listen_loop(&u, &a, &s, &handlers))
            .map_err(|e| domain::error::Error::internal(format!("cannot start the bus: {e}")))?;
        Ok(Self { tx, stop, dropped })
    }

    /// Queues a payload for the other kernels; never blocks. A payload over
    /// [`MAX_PAYLOAD`] or beyond a full queue is dropped: the others catch up from
    /// the store.
    pub fn send(&self, payload: String) {
        if payload.len() > MAX_PAYLOAD {
            tracing::debug!(len = payload.len(), "bus payload too long; dropped");
            self.dropped.store(true, Ordering::Relaxed);
            return;
        }
        if let Err(TrySendError::Full(_)) = self.tx.try_send(payload) {
            tracing::debug!("bus queue full; a notification was dropped");
            self.dropped.store(true, Ordering::Relaxed);
        }
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn send_loop(url: &str, application: &str, rx: &Receiver<String>, dropped: &AtomicBool) {
    let mut client: Option<Client> = None;
    // Ends when the Bus (the only sender) is dropped.
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        if dropped.swap(false, Ordering::Relaxed) {
            batch.push(RESYNC.to_owned());
        }
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        for attempt in 0..2 {
            if client.is_none() {
                match super::client(url, application) {
                    Ok(c) => client = Some(c),
                    Err(e) => {
                        tracing::warn!("bus: {e}");
                        if attempt == 1 {
                            dropped.store(true, Ordering::Relaxed);
                        }
                        std::thread::sleep(RETRY);
                        continue;
                    }
                }
            }
            let c = client.as_mut().expect("connected");
            match c.execute_sql(
                "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p",
                &[&CHANNEL, &batch],
            ) {
                Ok(_) => break,
                Err(e) => {
                    client = None;
                    if attempt == 1 {
                        tracing::warn!(lost = batch.len(), "bus: notifications not sent: {e}");
                        dropped.store(true, Ordering::Relaxed);
                    }
                }
            }
        }
    }
}

fn listen_loop(url: &str, application: &str, stop: &AtomicBool, h: &Handlers) {
    while !stop.load(Ordering::Relaxed) {
        let mut client = match super::client(url, application).and_then(|mut c| {
            c.batch_execute(&format!("LISTEN {CHANNEL}"))
                .map_err(|e| domain::error::Error::internal(format!("LISTEN failed: {e}")))?;
            Ok(c)
        }) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("bus: {e}");
                std::thread::sleep(RETRY);
                continue;
            }
        };
        // Whatever was sent while this was not listening is lost: say so.
        (h.on_gap)();
        while !stop.load(Ordering::Relaxed) {
            match client.notification(Duration::from_secs(1)) {
                Ok(Some(m)) => (h.on_message)(m.payload().to_owned()),
                // A quiet second: make sure the connection is alive (a dead one errors,
                // a silent one within the store's timeout).
                Ok(None) => {
                    if let Err(e) = client.ping(super::timeout()) {
                        tracing::warn!("bus: the listening connection failed: {e}");
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!("bus: the listening connection failed: {e}");
                    break;
                }
            }
        }
    }
}
