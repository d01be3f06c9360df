//! `POST /hooks/{name}`: events from outside, for hooks the lead declared
//! (hook_set). Ingress only: no bearer token (the signature is the credential),
//! and the answer carries nothing of the team: `202` once a signed request is
//! kept, before it acts (a retry of one kept is answered the same), else
//! [`refused`], the same response whatever was wrong and whether or not the hook
//! exists.
//!
//! Before the kernel sees a request: at most [`IN_FLIGHT`] are in progress
//! (others are refused at once; a slot is held until the delivery is kept or
//! refused, even if the sender hangs up), a declared length past the limit is refused without
//! reading, and the body is read only up to the limit and within [`BODY_TIME`] (a
//! sender that trickles it is cut off). Each request is a span when traces are
//! exported.

use axum::{
    extract::{Path, Request, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
};
use domain::hooks::{GENERIC_SIGNATURE, GITHUB_SIGNATURE, MAX_BODY, Refusal, Signed};
use kernel::Kernel;
use kernel::hooks::{Request as HookRequest, Taken};
use std::sync::Arc;
use telemetry::{FutureExt, KeyValue, Span, SpanKind};
use tokio::sync::Semaphore;

pub const HOOKS_PATH: &str = "/hooks/{name}";
/// Hook requests in progress at once.
pub const IN_FLIGHT: usize = 16;
/// The longest a request's body may take to arrive.
pub const BODY_TIME: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Clone)]
pub struct Ingress {
    kernel: Arc<Kernel>,
    slots: Arc<Semaphore>,
}

impl Ingress {
    pub fn new(kernel: Arc<Kernel>) -> Self {
        Self {
            kernel,
            slots: Arc::new(Semaphore::new(IN_FLIGHT)),
        }
    }
}

/// Every refusal: no word of why (the kernel's log has it).
fn refused() -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONNECTION, "close")],
        "refused\n",
    )
        .into_response()
}

fn header_of<'a>(h: &'a HeaderMap, names: &[&str]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|n| h.get(*n).and_then(|v| v.to_str().ok()))
}

pub async fn receive(
    State(ingress): State<Ingress>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    // The name as logged: clipped, and escaped by `?` (it came from outside).
    let shown: String = name.chars().take(64).collect();
    let Ok(slot) = ingress.slots.clone().try_acquire_owned() else {
        tracing::info!(hook = ?shown, "hook request refused: too many in progress");
        return refused();
    };
    let span = Span::start(
        "hooks/receive",
        SpanKind::Server,
        None,
        vec![KeyValue::new("agent_worker.hook", name.clone())],
    );
    let work = take(ingress.kernel, (name.clone(), slot), req);
    let outcome = match &span {
        Some(s) => work.with_context(s.context().clone()).await,
        None => work.await,
    };
    match outcome {
        Ok(taken) => {
            if let Some(s) = &span {
                let what = match &taken {
                    Taken::New { .. } => "kept; acting",
                    Taken::Retry { .. } => "retry of a kept delivery",
                };
                s.set("agent_worker.hook.outcome", what.to_owned());
                s.end();
            }
            (StatusCode::ACCEPTED, "accepted\n").into_response()
        }
        Err(why) => {
            tracing::info!(hook = ?shown, %why, "hook request refused");
            if let Some(s) = &span {
                s.fail(why.to_string());
                s.end();
            }
            refused()
        }
    }
}

/// The request read within the limit and handed to the kernel, whose work runs in
/// a task of its own: a sender that hangs up does not cut a start in half.
async fn take(
    kernel: Arc<Kernel>,
    (name, slot): (String, tokio::sync::OwnedSemaphorePermit),
    req: Request,
) -> Result<Taken, Refusal> {
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(Refusal::TooLarge);
    }
    let body = tokio::time::timeout(BODY_TIME, axum::body::to_bytes(body, MAX_BODY))
        .await
        .map_err(|_| Refusal::TooLarge)?
        .map_err(|_| Refusal::TooLarge)?;
    let h = parts.headers;
    let owned = |names: &[&str]| header_of(&h, names).map(str::to_owned);
    let github = owned(&[GITHUB_SIGNATURE]);
    let generic = owned(&[GENERIC_SIGNATURE]);
    let delivery = owned(&["x-github-delivery", "x-hook-delivery"]);
    let event = owned(&["x-github-event", "x-hook-event"]);
    let task = tokio::spawn(
        async move {
            let _slot = slot;
            let req = HookRequest {
                name: &name,
                headers: Signed {
                    github: github.as_deref(),
                    generic: generic.as_deref(),
                    delivery: delivery.as_deref(),
                    event: event.as_deref(),
                },
                body: Arc::from(body.as_ref()),
            };
            kernel.hooks.receive(req).await
        }
        .with_current_context(),
    );
    task.await.map_err(|_| Refusal::NotJson)?
}
