//! Waiting instead of polling: my_inbox and channel_read with `wait_seconds`.
//!
//! A read that finds something answers at once; an empty one waits for a
//! committed event that could change its answer (a delivery to the reader, a post
//! in its channel) and reads again, until it finds something or the wait is over.
//! The event subscription is taken before the first read, so nothing that commits
//! in between is missed; a lagging subscriber reads again (the store is the truth).

use super::ReadResult;
use super::inbox::Inbox;
use crate::Scope;
use crate::events::Event;
use crate::messaging::Messaging;
use domain::error::Result;
use std::future::Future;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

impl Messaging {
    /// my_inbox, waiting up to `wait` for a delivery when the inbox is empty.
    pub async fn my_inbox_wait(
        &self,
        scope: &Scope,
        limit: Option<i64>,
        wait: Duration,
    ) -> Result<Inbox> {
        let relevant = |e: &Event| match e {
            Event::Delivered {
                workflow_id,
                recipients,
                ..
            } => *workflow_id == scope.workflow_id && recipients.contains(&scope.me),
            _ => false,
        };
        self.read_or_wait(
            wait,
            relevant,
            |i: &Inbox| i.messages.is_empty(),
            || self.my_inbox(scope, limit),
        )
        .await
    }

    /// channel_read, waiting up to `wait` for a message when there is none to show
    /// (after `since`, or in an empty channel).
    pub async fn channel_read_wait(
        &self,
        scope: &Scope,
        since: Option<String>,
        limit: Option<i64>,
        wait: Duration,
    ) -> Result<ReadResult> {
        let relevant = |e: &Event| matches!(e, Event::Posted { workflow_id, .. } if *workflow_id == scope.workflow_id);
        self.read_or_wait(
            wait,
            relevant,
            |r: &ReadResult| r.messages.is_empty(),
            || self.channel_read(scope, since.clone(), limit),
        )
        .await
    }

    /// Reads; if the answer is empty, reads again on each relevant event until it
    /// is not or `wait` has passed (then the last, empty, answer).
    async fn read_or_wait<T, F, Fut>(
        &self,
        wait: Duration,
        relevant: impl Fn(&Event) -> bool,
        empty: impl Fn(&T) -> bool,
        read: F,
    ) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        if wait.is_zero() {
            return read().await;
        }
        let mut rx = self.events.subscribe();
        let first = read().await?;
        if !empty(&first) {
            return Ok(first);
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let again = match tokio::time::timeout_at(deadline, rx.recv()).await {
                Err(_) | Ok(Err(RecvError::Closed)) => return read().await,
                Ok(Ok(e)) => relevant(&e),
                Ok(Err(RecvError::Lagged(_))) => true,
            };
            if again {
                let r = read().await?;
                if !empty(&r) {
                    return Ok(r);
                }
            }
        }
    }
}
