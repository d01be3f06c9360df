//! The HTTP face: `/mcp` (streamable HTTP) behind bearer authentication.
//!
//! Every request must carry `Authorization: Bearer <token>`: the admin token makes
//! the caller the lead, an agent token makes it that agent; anything else is a 401
//! that says why. The resolved [`Caller`] rides in the request's extensions, which
//! rmcp hands to the tool as `http::request::Parts` (identity per request). rmcp
//! checks `Host` (loopback names only) and we enable its `Origin` check for loopback
//! origins, which together stop DNS-rebinding from a browser.

use super::{AgentWorker, Tools};
use crate::kernel::Kernel;
use axum::{
    extract::{Request, State},
    http::{StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub const MCP_PATH: &str = "/mcp";

pub fn app(kernel: Arc<Kernel>, tools: Arc<Tools>, ct: CancellationToken) -> axum::Router {
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(ct)
        .with_allowed_origins(["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"])
        .enforce_origin_validation()
        // Simple request/response tools answer with plain JSON where sessions are not used.
        .with_json_response(true)
        // No SSE priming events: they promise a resumability we do not offer (no event
        // store), and their empty `data:` breaks clients that parse every event as
        // JSON (Gemini CLI's MCP client failed with "Unexpected end of JSON input").
        .with_sse_retry(None);
    let k = kernel.clone();
    // The same for session streams: the session manager has its own priming setting.
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.sse_retry = None;
    let service = StreamableHttpService::new(
        move || Ok(AgentWorker::new(k.clone(), tools.clone())),
        sessions.into(),
        config,
    );
    axum::Router::new()
        .nest_service(MCP_PATH, service)
        .layer(middleware::from_fn_with_state(kernel, authenticate))
}

fn bearer(req: &Request) -> Option<&str> {
    let v = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

async fn authenticate(State(kernel): State<Arc<Kernel>>, mut req: Request, next: Next) -> Response {
    match kernel.authenticate(bearer(&req)).await {
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Err(e) => {
            let body = serde_json::json!({
                "jsonrpc": "2.0",
                "id": null,
                "error": { "code": -32001, "message": format!("unauthorized: {e}") }
            });
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer realm=\"agent-worker\"")],
                axum::Json(body),
            )
                .into_response()
        }
    }
}
