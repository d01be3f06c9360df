//! One `subscriptions/listen` (2026-07-28): from its lease on the caller's budget
//! to its end.
//!
//! It ends when the client cancels it, when the server stops, when a notification
//! cannot be sent, and when its client is gone. Over HTTP the listen's answer is
//! its own response stream, and a 2026-07-28 client cancels by closing it; rmcp
//! keeps a closed stream's events for a resume and never tells the handler, so
//! the stream's end is learnt from the HTTP layer ([`crate::http::ResponseGone`]).
//! The 2026-07-28 text is that closing the stream *is* the cancellation (a server
//! MUST treat a client's disconnect so), so the listen ends at once, and its slot
//! goes back with it.

use super::budget::{self, Lease};
use super::{Change, Hub};
use crate::http::ResponseGone;
use kernel::{Caller, Kernel};
use rmcp::RoleServer;
use rmcp::service::{RequestContext, SubscriptionContext};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

/// Serves one listen until it ends (see the module's documentation).
pub async fn run(
    hub: &Hub,
    kernel: &Kernel,
    who: &Caller,
    cx: &SubscriptionContext,
) -> Result<(), budget::Refused> {
    // Bounded before anything is read (what was asked, not only what rmcp
    // accepted of it): held until the listen ends.
    let _lease = Lease::listen(
        hub.budgets(),
        budget::owner(who),
        cx.requested()
            .resource_subscriptions
            .as_deref()
            .unwrap_or_default(),
    )?;
    let asked = cx
        .accepted()
        .resource_subscriptions
        .clone()
        .unwrap_or_default();
    // What the caller may not read, it does not hear about.
    let watched = super::authorized(kernel, who, &asked).await;
    let list_changed = cx.accepted().resources_list_changed == Some(true);
    let (mut rx, missed) = hub.changes();
    let tell = async |change: &Change| -> bool {
        for uri in change.uris.iter().filter(|u| watched.contains(*u)) {
            if cx
                .sink()
                .notify_resource_updated(uri.clone())
                .await
                .is_err()
            {
                return false;
            }
        }
        !(list_changed
            && change.list_changed
            && cx.sink().notify_resource_list_changed().await.is_err())
    };
    for change in &missed {
        if !tell(change).await {
            return Ok(());
        }
    }
    let gone = response_gone(cx.request_context());
    loop {
        tokio::select! {
            () = cx.cancelled() => return Ok(()),
            () = closed(gone.as_ref()) => return Ok(()),
            change = rx.recv() => {
                let change = match change {
                    Ok(c) => c,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return Ok(()),
                };
                if !tell(&change).await {
                    return Ok(());
                }
            }
        }
    }
}

/// The token cancelled when this request's HTTP response is over (none on stdio,
/// where the listen ends with the transport).
fn response_gone(ctx: &RequestContext<RoleServer>) -> Option<CancellationToken> {
    let parts = ctx.extensions.get::<::http::request::Parts>()?;
    parts.extensions.get::<ResponseGone>().map(|g| g.0.clone())
}

/// Resolves when the response is over; never without one.
async fn closed(gone: Option<&CancellationToken>) {
    match gone {
        Some(t) => t.cancelled().await,
        None => std::future::pending().await,
    }
}
