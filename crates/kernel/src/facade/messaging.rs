//! The façade of [`Messaging`](crate::messaging::Messaging), the channel, inboxes, status and resources: each method hands the call to
//! the room (its documentation is there), resolving names first where it needs them.

use crate::messaging::inbox::{AckResult, DeferResult, Inbox};
use crate::messaging::resources::{Created, Resource};
use crate::messaging::team::{Member, Status, StatusUpdate};
use crate::messaging::{Outgoing, ReadResult, SendResult};
use crate::{Kernel, Scope};
use domain::error::Result;
use std::time::Duration;

/// The channel and the inboxes.
impl Kernel {
    pub async fn channel_send(&self, scope: &Scope, send: Outgoing) -> Result<SendResult> {
        self.messaging.channel_send(scope, send).await
    }

    pub async fn channel_send_many(
        &self,
        scope: &Scope,
        sends: Vec<Outgoing>,
    ) -> Result<Vec<SendResult>> {
        self.messaging.channel_send_many(scope, sends).await
    }

    pub async fn channel_read(
        &self,
        scope: &Scope,
        since: Option<String>,
        limit: Option<i64>,
    ) -> Result<ReadResult> {
        self.messaging.channel_read(scope, since, limit).await
    }

    pub async fn channel_view(
        &self,
        scope: &Scope,
        since: Option<String>,
        limit: Option<i64>,
    ) -> Result<ReadResult> {
        self.messaging.channel_view(scope, since, limit).await
    }

    pub async fn my_inbox(&self, scope: &Scope, limit: Option<i64>) -> Result<Inbox> {
        self.messaging.my_inbox(scope, limit).await
    }

    pub async fn inbox_peek(&self, scope: &Scope, limit: i64) -> Result<Inbox> {
        self.messaging.inbox_peek(scope, limit).await
    }

    pub async fn my_inbox_ack(
        &self,
        scope: &Scope,
        message_id: &str,
        through: bool,
    ) -> Result<AckResult> {
        self.messaging
            .my_inbox_ack(scope, message_id, through)
            .await
    }

    pub async fn my_inbox_defer(
        &self,
        scope: &Scope,
        message_id: &str,
        until: Option<&str>,
    ) -> Result<DeferResult> {
        self.messaging
            .my_inbox_defer(scope, message_id, until)
            .await
    }

    pub async fn my_inbox_wait(
        &self,
        scope: &Scope,
        limit: Option<i64>,
        wait: Duration,
    ) -> Result<Inbox> {
        self.messaging.my_inbox_wait(scope, limit, wait).await
    }

    pub async fn channel_read_wait(
        &self,
        scope: &Scope,
        since: Option<String>,
        limit: Option<i64>,
        wait: Duration,
    ) -> Result<ReadResult> {
        self.messaging
            .channel_read_wait(scope, since, limit, wait)
            .await
    }

    pub async fn my_status_set(&self, scope: &Scope, u: StatusUpdate) -> Result<Status> {
        self.messaging.my_status_set(scope, u).await
    }

    pub async fn team_members(&self, scope: &Scope, include_status: bool) -> Result<Vec<Member>> {
        self.messaging.team_members(scope, include_status).await
    }

    pub async fn resource_create(
        &self,
        scope: &Scope,
        content: String,
        kind: Option<&str>,
    ) -> Result<Created> {
        self.messaging.resource_create(scope, content, kind).await
    }

    pub async fn resource_read(&self, id: &str) -> Result<Resource> {
        self.messaging.resource_read(id).await
    }
}
