//! Reading the channel: what a member sees of it, oldest first, and the cursor that
//! remembers how far it read.

use super::{DEFAULT_READ_LIMIT, MAX_READ_LIMIT, Messaging, set_cursor};
use crate::Scope;
use domain::clock::fmt_ms;
use domain::error::{Error, Result};
use schemars::JsonSchema;
use serde::Serialize;
use store::sql;
use store::sql::OptionalExtension;
use store::{Isolation, WriteScope::Instance as instance};

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ChannelMessage {
    pub id: String,
    pub from: String,
    pub content: String,
    pub created_at: String,
    /// `message` or `system`.
    pub kind: String,
    /// Set on a direct message: its only recipient.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The members this message was delivered to.
    pub mentions: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReadResult {
    /// Oldest first.
    pub messages: Vec<ChannelMessage>,
    /// True when more messages follow the last one returned (read again with since = its id).
    pub has_more: bool,
}

fn message_row(r: &sql::Row) -> sql::Result<ChannelMessage> {
    let mentions: String = r.get(6)?;
    Ok(ChannelMessage {
        id: r.get(0)?,
        from: r.get(1)?,
        content: r.get(2)?,
        created_at: fmt_ms(r.get(3)?),
        kind: r.get(4)?,
        to: r.get(5)?,
        mentions: serde_json::from_str(&mentions).unwrap_or_default(),
    })
}

impl Messaging {
    /// Reads the channel as the scope's member sees it: without `since`, the latest
    /// `limit` messages; with `since`, the next `limit` after that id. Oldest first.
    pub async fn channel_read(
        &self,
        scope: &Scope,
        since: Option<String>,
        limit: Option<i64>,
    ) -> Result<ReadResult> {
        let (since, limit) = checked(since, limit)?;
        let s = scope.clone();
        // The instance's messages and the member's cursor.
        self.store
            .write_as(
                instance(scope.workflow_id),
                Isolation::Savepoint,
                move |c| {
                    let mut read = select(c, &s, since.as_deref(), limit)?;
                    if let Some(last) = read.messages.last() {
                        set_cursor(c, s.workflow_id, &s.me, &last.id)?;
                    }
                    read.messages.shrink_to_fit();
                    Ok(read)
                },
            )
            .await
    }

    /// What channel_read returns, on a reader thread, moving no cursor: for a
    /// person watching (the dashboard), whose looking is not the lead's reading.
    pub async fn channel_view(
        &self,
        scope: &Scope,
        since: Option<String>,
        limit: Option<i64>,
    ) -> Result<ReadResult> {
        let (since, limit) = checked(since, limit)?;
        let s = scope.clone();
        self.store
            .read(move |c| select(c, &s, since.as_deref(), limit))
            .await
    }
}

fn checked(since: Option<String>, limit: Option<i64>) -> Result<(Option<String>, i64)> {
    let limit = limit.unwrap_or(DEFAULT_READ_LIMIT);
    if !(1..=MAX_READ_LIMIT).contains(&limit) {
        return Err(Error::invalid(format!(
            "limit must be between 1 and {MAX_READ_LIMIT} (default {DEFAULT_READ_LIMIT})"
        )));
    }
    let since = since.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    Ok((since, limit))
}

/// The messages `s.me` may see after `since` (oldest first), or the latest ones.
fn select(c: &sql::Connection, s: &Scope, since: Option<&str>, limit: i64) -> Result<ReadResult> {
    const COLS: &str = "id, sender, content, created_at, kind, to_member, mentions";
    // A direct message is its two members' only: not a later agent's
    // that took one of their names (agent_delete, then agent_new). A hook's
    // (no member) is the lead's to read too.
    const VISIBLE: &str = "workflow_id = ?1 AND (to_member IS NULL OR ((sender = ?2 OR to_member = ?2) \
        AND created_at >= COALESCE((SELECT a.created_at FROM agents a WHERE a.workflow_id = ?1 AND a.name = ?2), 0)) \
        OR (?2 = 'user' AND sender LIKE 'hook:%'))";
    let Some(since) = since else {
        let mut st = c.prepare_cached(&format!(
            "SELECT {COLS} FROM messages WHERE {VISIBLE} ORDER BY id DESC LIMIT ?3"
        ))?;
        let mut rows = st
            .query_map(sql::params![s.workflow_id, s.me, limit], message_row)?
            .collect::<sql::Result<Vec<_>>>()?;
        rows.reverse();
        return Ok(ReadResult {
            messages: rows,
            has_more: false,
        });
    };
    let known: Option<i64> = c
        .prepare_cached("SELECT 1 FROM messages WHERE workflow_id = ?1 AND id = ?2")?
        .query_row((s.workflow_id, since), |r| r.get(0))
        .optional()?;
    if known.is_none() {
        return Err(Error::not_found(format!(
            "unknown message id {since:?} in {}: pass an id returned by channel_read or channel_send, \
             or leave since out to get the latest messages",
            s.workflow
        )));
    }
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLS} FROM messages WHERE {VISIBLE} AND id > ?3 ORDER BY id LIMIT ?4"
    ))?;
    let mut rows = st
        .query_map(
            sql::params![s.workflow_id, s.me, since, limit + 1],
            message_row,
        )?
        .collect::<sql::Result<Vec<_>>>()?;
    let has_more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    Ok(ReadResult {
        messages: rows,
        has_more,
    })
}
