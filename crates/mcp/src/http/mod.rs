//! The HTTP face: `/mcp` (streamable HTTP) behind bearer authentication.
//!
//! Every request to `/mcp` must carry `Authorization: Bearer <token>`: the admin
//! token makes the caller the lead, an agent token makes it that agent; anything
//! else is a 401 that says why. The resolved [`Caller`] rides in the request's
//! extensions, which rmcp hands to the tool as `http::request::Parts` (identity per
//! request). rmcp checks `Host` (loopback names only) and we enable its `Origin`
//! check for loopback origins, which together stop DNS-rebinding from a browser.
//! `POST /hooks/{name}` takes signed events from outside ([`hooks`]), without a
//! token. Every other path is 404, not 401: OAuth discovery (`/.well-known/…`,
//! `/register`) must not look like an authorization server that refuses clients.
//!
//! Between authentication and rmcp, [`guard`] checks each message and binds
//! sessions to their token; [`sessions`] keeps idle sessions cheap and bounded.

mod guard;
pub mod hooks;
pub mod replay;
pub mod sessions;
pub mod sse;

use super::{AgentWorker, Tools};
use axum::{
    extract::{Request, State},
    http::{StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
pub use guard::{MAX_BODY, ResponseGone};
use kernel::Kernel;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use sessions::{Owner, Sessions};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub const MCP_PATH: &str = "/mcp";
/// The reconnect hint in SSE priming events.
const SSE_RETRY: Duration = Duration::from_secs(3);

pub fn app(kernel: Arc<Kernel>, tools: Arc<Tools>, ct: CancellationToken) -> axum::Router {
    // Priming events and ids from our replay store, so a dropped stream can be
    // resumed (older clients get the priming filtered out, see `sse`).
    let mut manager =
        LocalSessionManager::default().with_event_store(Arc::new(replay::Replay::default()));
    manager.session_config.sse_retry = Some(SSE_RETRY);
    let manager = Arc::new(manager);
    let sessions = Sessions::new(manager.clone());
    // rmcp's own idle limit is only a backstop: `sessions` parks idle ones sooner.
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(ct.clone())
        .with_allowed_origins(["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"])
        .enforce_origin_validation()
        // Simple request/response tools answer with plain JSON where sessions are not used.
        .with_json_response(true)
        .with_sse_retry(Some(SSE_RETRY))
        .with_max_request_body_bytes(MAX_BODY);
    let mut config = config;
    config.session_store = Some(Arc::new(sessions::Store(sessions.clone())));
    sessions.spawn_sweeper(ct);
    let k = kernel.clone();
    let kernel_for_hooks = kernel.clone();
    let service = StreamableHttpService::new(
        move || Ok(AgentWorker::new(k.clone(), tools.clone())),
        manager,
        config,
    );
    let mcp = axum::Router::new()
        .nest_service(MCP_PATH, service)
        .layer(middleware::from_fn_with_state(sessions, guard::guard))
        .layer(middleware::from_fn_with_state(kernel, authenticate));
    // Signed events from outside: no bearer token, no session (see `hooks`).
    let ingress = axum::Router::new()
        .route(hooks::HOOKS_PATH, axum::routing::post(hooks::receive))
        .with_state(hooks::Ingress::new(kernel_for_hooks));
    axum::Router::new()
        .merge(mcp)
        .merge(ingress)
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found: the MCP endpoint is /mcp") })
}

fn bearer(req: &Request) -> Option<&str> {
    let v = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

async fn authenticate(State(kernel): State<Arc<Kernel>>, mut req: Request, next: Next) -> Response {
    match kernel.registry().authenticate(bearer(&req)).await {
        Ok(caller) => {
            kernel.runtime().touch_client();
            let owner = Owner::of_token(bearer(&req).unwrap_or_default().trim());
            req.extensions_mut().insert(caller);
            req.extensions_mut().insert(owner);
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
