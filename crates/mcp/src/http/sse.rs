//! SSE response bodies as a client of a given protocol version should see them.
//!
//! MCP 2025-11-25 (SEP-1699) has the server open every SSE stream with a priming
//! event: an event id, a `retry` hint and empty data, so a client that loses the
//! stream can resume it. Clients of earlier versions do not expect it, and some
//! parse every event's data as JSON (Gemini CLI, which speaks 2025-06-18, failed
//! with "Unexpected end of JSON input"). rmcp primes every stream; this filter
//! takes the priming events out of the streams of older clients.

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http_body::Frame;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The first protocol version whose clients expect priming events.
pub const PRIMING_SINCE: &str = "2025-11-25";

/// Whether a client of `version` expects priming events (versions are dates, so
/// they compare as strings).
pub fn wants_priming(version: &str) -> bool {
    version >= PRIMING_SINCE
}

/// The body without its priming events (and without any other event that carries
/// no data: such an event is never dispatched to an EventSource anyway).
pub fn without_priming(body: Body) -> Body {
    Body::new(StripPriming {
        inner: body,
        buf: BytesMut::new(),
        done: false,
    })
}

struct StripPriming {
    inner: Body,
    /// Bytes of an event not yet complete.
    buf: BytesMut,
    done: bool,
}

/// The end (exclusive, blank line included) of the first complete event in `buf`.
pub fn event_end(buf: &[u8]) -> Option<usize> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A priming event: it has a `data` field, and every `data` line is empty.
fn is_priming(event: &[u8]) -> bool {
    let mut has_data = false;
    for line in event.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(d) = line.strip_prefix(b"data:") {
            has_data = true;
            if !d.iter().all(u8::is_ascii_whitespace) {
                return false;
            }
        } else if line == b"data" {
            has_data = true;
        }
    }
    has_data
}

impl StripPriming {
    /// The complete events in the buffer, priming ones dropped.
    fn drain(&mut self) -> Bytes {
        let mut out = BytesMut::new();
        while let Some(end) = event_end(&self.buf) {
            let event = self.buf.split_to(end);
            if !is_priming(&event) {
                out.extend_from_slice(&event);
            }
        }
        out.freeze()
    }
}

impl http_body::Body for StripPriming {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    self.done = true;
                    // A trailing partial event is passed on as it is.
                    let rest = self.buf.split().freeze();
                    if rest.is_empty() {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(rest))));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        self.buf.extend_from_slice(&data);
                        let out = self.drain();
                        if !out.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(out))));
                        }
                    }
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn priming_events_are_dropped_and_everything_else_kept() {
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from_static(b"id: 0\nretry: 3000\ndata:\n\n")),
            Ok(Bytes::from_static(b"data: {\"jsonrpc\":\"2.0\",")),
            Ok(Bytes::from_static(
                b"\"id\":1}\nid: 1\n\n:\n\ndata: x\r\n\r\n",
            )),
        ];
        let body = Body::from_stream(futures::stream::iter(chunks));
        let out = without_priming(body).collect().await.unwrap().to_bytes();
        assert_eq!(
            &out[..],
            b"data: {\"jsonrpc\":\"2.0\",\"id\":1}\nid: 1\n\n:\n\ndata: x\r\n\r\n"
        );
        assert!(wants_priming("2025-11-25") && wants_priming("2026-07-28"));
        assert!(!wants_priming("2025-06-18") && !wants_priming(""));
    }
}
