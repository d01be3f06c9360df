//! What every `/mcp` request passes before rmcp sees it (after authentication):
//!
//! - the body is read up to the size limit (413 with `Connection: close` past it)
//!   and checked as one JSON-RPC message ([`crate::jsonrpc`]): a bad one is
//!   answered here, with the error the specification names; a `tools/call`
//!   that asked for a task is marked for the handler ([`tasks::mark`]);
//! - a request naming a session must come from the token that opened it, else it
//!   gets the same 404 as an unknown session ([`super::sessions`]);
//! - a new session is claimed for its token (and the caps applied);
//! - DELETE of a session answers 204 (rmcp says 202, which clients log as a
//!   failure);
//! - SSE streams of clients older than 2025-11-25 lose their priming events
//!   ([`super::sse`]);
//! - a response still streaming keeps its session from being parked;
//! - the handler learns when a request's response is over, finished or dropped
//!   because its client closed the connection ([`ResponseGone`]).

use super::sessions::{Active, Owner, Refused, Sessions};
use super::sse;
use crate::jsonrpc::{self, INVALID_PARAMS};
use crate::tasks;
use axum::{
    body::Body,
    extract::{Request, State},
    http::{HeaderValue, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use bytes::Bytes;
use serde_json::{Value, json};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio_util::sync::CancellationToken;

/// The largest request body (rmcp's own limit, so both agree).
pub const MAX_BODY: usize = domain::protocol::MAX_MCP_BODY;
const SESSION_ID: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";

/// In a request's extensions: cancelled once its response is over, sent in full
/// or dropped (its client closed the connection, or the process is gone). rmcp
/// keeps a stateless request's handler running after its stream closed (it
/// stores what follows for a resume) and does not tell it; this does.
#[derive(Clone)]
pub struct ResponseGone(pub CancellationToken);

fn json_error(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn session_not_found(id: Option<Value>) -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        json!({"jsonrpc": "2.0", "id": id.unwrap_or(Value::Null), "error": {
            "code": -32001,
            "message": "session not found: it expired, was closed, or was never yours; start a new session with initialize",
        }}),
    )
}

pub async fn guard(State(sessions): State<Arc<Sessions>>, req: Request, next: Next) -> Response {
    let Some(owner) = req.extensions().get::<Owner>().copied() else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let sid = req
        .headers()
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let header_version = req
        .headers()
        .get(PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let method = req.method().clone();

    // The body of a POST, checked; other methods carry none.
    let (req, message) = if method == Method::POST && is_json(&req) {
        let (mut parts, body) = req.into_parts();
        let mut bytes = match axum::body::to_bytes(body, MAX_BODY).await {
            Ok(b) => b,
            Err(_) => return too_large(),
        };
        let mut message = match jsonrpc::check_bytes(&bytes) {
            Ok(m) => m,
            Err(r) => {
                let status = if r.code == INVALID_PARAMS && r.id.is_some() {
                    StatusCode::OK
                } else {
                    StatusCode::BAD_REQUEST
                };
                return json_error(status, r.to_json());
            }
        };
        if tasks::mark(&mut message) {
            bytes = Bytes::from(serde_json::to_vec(&message).unwrap_or_default());
            parts.headers.remove(header::CONTENT_LENGTH);
        }
        (Request::from_parts(parts, Body::from(bytes)), Some(message))
    } else {
        (req, None)
    };
    let request_id = message.as_ref().and_then(|m| m.get("id")).cloned();
    let (req, gone) = watched(req);

    let mut active: Option<Active> = None;
    let version = match &sid {
        Some(id) => match sessions.enter(id, owner) {
            Ok((v, a)) => {
                active = Some(a);
                header_version.unwrap_or(v)
            }
            Err(Refused::Unknown | Refused::NotYours) => return session_not_found(request_id),
        },
        None => message
            .as_ref()
            .filter(|m| m.get("method").and_then(Value::as_str) == Some("initialize"))
            .and_then(|m| m.pointer("/params/protocolVersion"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(header_version)
            .unwrap_or_default(),
    };

    let mut resp = next.run(req).await;

    if sid.is_none()
        && let Some(new) = resp
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    {
        let evicted = sessions.opened(&new, owner, &version);
        if !evicted.is_empty() {
            let s = sessions.clone();
            tokio::spawn(async move { s.close(evicted).await });
        }
    }
    if method == Method::DELETE && resp.status() == StatusCode::ACCEPTED {
        if let Some(id) = &sid {
            sessions.forget(id);
        }
        *resp.status_mut() = StatusCode::NO_CONTENT;
        return resp;
    }
    if resp.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return too_large();
    }
    deliver(resp, &version, (active, gone))
}

/// The response as its client should get it: priming events only for a client
/// that expects them, and `held` kept until the body is done (or dropped).
fn deliver<T: Send + Unpin + 'static>(mut resp: Response, version: &str, held: T) -> Response {
    let is_sse = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    if is_sse && !sse::wants_priming(version) {
        resp = resp.map(sse::without_priming);
    }
    resp.map(|b| {
        Body::new(Hold {
            inner: b,
            _held: held,
        })
    })
}

/// The request with its [`ResponseGone`], and the guard that cancels it when
/// dropped: with the response's body, or here if no response is made.
fn watched(mut req: Request) -> (Request, tokio_util::sync::DropGuard) {
    let gone = CancellationToken::new();
    req.extensions_mut().insert(ResponseGone(gone.clone()));
    (req, gone.drop_guard())
}

fn is_json(req: &Request) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|ct| ct.split(';').next())
        .is_some_and(|ct| ct.trim().eq_ignore_ascii_case("application/json"))
}

/// 413 with a JSON-RPC error, and `Connection: close`: the rest of the body is
/// not read, so the connection cannot carry another request.
fn too_large() -> Response {
    let mut r = json_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        json!({"jsonrpc": "2.0", "id": null, "error": {
            "code": jsonrpc::INVALID_REQUEST,
            "message": format!(
                "the request body is larger than {MAX_BODY} bytes; store large content with resource_create \
                 in pieces, or put it in a document"
            ),
        }}),
    );
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// A response body that holds something until the body is done (or dropped).
struct Hold<T> {
    inner: Body,
    _held: T,
}

impl<T: Send + Unpin + 'static> http_body::Body for Hold<T> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
