//! The SSE events a client may ask for again after losing a stream (`Last-Event-ID`).
//!
//! rmcp's own per-session cache replays from the given event *inclusive* (a resumed
//! client got the last event it had seen a second time) and drops a request's
//! events the moment its response is sent (a client that lost the stream just
//! before the response could never get it). This store replaces that cache through
//! rmcp's `EventStore` hook: every event gets a unique, increasing id; a resume
//! returns the events of the same stream strictly after the given id, then ends
//! (the client reconnects again for anything later). It is bounded: the newest
//! [`MAX_EVENTS`] events, at most [`MAX_BYTES`] of them, none older than [`KEEP`].

use rmcp::transport::common::server_side_http::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::store::{
    EventId, EventStore, EventStoreError, EventStream,
};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const MAX_EVENTS: usize = 4096;
pub const MAX_BYTES: usize = 16 * 1024 * 1024;
pub const KEEP: Duration = Duration::from_secs(120);

struct Stored {
    id: u64,
    stream: Arc<str>,
    event: ServerSseMessage,
    size: usize,
    at: Instant,
}

#[derive(Default)]
struct State {
    next: u64,
    events: VecDeque<Stored>,
    bytes: usize,
}

#[derive(Default)]
pub struct Replay {
    state: Mutex<State>,
}

/// Counts what serializing a message would write, without keeping it.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len();
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn size_of(event: &ServerSseMessage) -> usize {
    let mut c = Counter(64);
    if let Some(m) = &event.message {
        let _ = serde_json::to_writer(&mut c, m.as_ref());
    }
    c.0
}

#[async_trait::async_trait]
impl EventStore for Replay {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<EventId, EventStoreError> {
        let size = size_of(event);
        let now = Instant::now();
        let mut s = self.state.lock().unwrap();
        s.next += 1;
        let id = s.next;
        // Events of one stream share its name: keep one allocation for them.
        let stream = match s.events.back() {
            Some(last) if &*last.stream == stream_id => last.stream.clone(),
            _ => Arc::from(stream_id),
        };
        s.events.push_back(Stored {
            id,
            stream,
            event: event.clone(),
            size,
            at: now,
        });
        s.bytes += size;
        while let Some(front) = s.events.front() {
            let over = s.events.len() > MAX_EVENTS
                || s.bytes > MAX_BYTES
                || now.duration_since(front.at) > KEEP;
            if !over || front.id == id {
                break;
            }
            let gone = s.events.pop_front().expect("front exists");
            s.bytes -= gone.size;
        }
        Ok(id.to_string())
    }

    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        let last: u64 = last_event_id
            .parse()
            .map_err(|_| format!("unknown event id {last_event_id:?}"))?;
        let s = self.state.lock().unwrap();
        let at = s
            .events
            .binary_search_by_key(&last, |e| e.id)
            .map_err(|_| format!("event {last} is unknown or too old to replay"))?;
        let stream = s.events[at].stream.clone();
        let later: Vec<ServerSseMessage> = s
            .events
            .range(at + 1..)
            .filter(|e| e.stream == stream)
            .map(|e| {
                let mut ev = e.event.clone();
                ev.event_id = Some(e.id.to_string());
                ev
            })
            .collect();
        Ok(Box::pin(futures::stream::iter(later)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use rmcp::model::{ServerJsonRpcMessage, ServerResult};

    fn msg(n: i64) -> ServerSseMessage {
        ServerSseMessage::from_message(ServerJsonRpcMessage::response(
            ServerResult::empty(()),
            rmcp::model::NumberOrString::Number(n),
        ))
    }

    #[tokio::test]
    async fn replays_only_later_events_of_the_same_stream() {
        let r = Replay::default();
        let a1 = r.store_event("a", &msg(1)).await.unwrap();
        let _b1 = r.store_event("b", &msg(2)).await.unwrap();
        let a2 = r.store_event("a", &msg(3)).await.unwrap();
        let got: Vec<_> = r.replay_events_after(&a1).await.unwrap().collect().await;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].event_id.as_deref(), Some(a2.as_str()));
        let got: Vec<_> = r.replay_events_after(&a2).await.unwrap().collect().await;
        assert!(
            got.is_empty(),
            "strictly after: the last seen is not sent again"
        );
        assert!(r.replay_events_after("999").await.is_err());
        assert!(r.replay_events_after("x").await.is_err());
    }

    #[tokio::test]
    async fn it_stays_bounded() {
        let r = Replay::default();
        for i in 0..(MAX_EVENTS as i64 + 100) {
            r.store_event("s", &msg(i)).await.unwrap();
        }
        assert_eq!(r.state.lock().unwrap().events.len(), MAX_EVENTS);
        assert!(
            r.replay_events_after("1").await.is_err(),
            "the oldest are gone"
        );
    }
}
