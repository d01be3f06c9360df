//! The inbox: an agent's deliveries and their state machine.
//!
//! ```text
//!            my_inbox              my_inbox_ack
//!  pending ───────────▶ seen ─────────────────────▶ acked (final)
//!     ▲                  │ my_inbox_defer
//!     │ kernel restart   ▼
//!     └──── seen    deferred ──(time comes, my_inbox)──▶ seen
//! ```
//! - The inbox is my deliveries that are pending or seen, plus deferred ones whose
//!   time has come, oldest first. Reading marks them seen.
//! - Acks only move forward: acked is final, an unknown or foreign id is an error and
//!   changes nothing. `through` acks every open delivery up to and including the id,
//!   except deferred ones whose time has not come (they were put off on purpose).
//! - On restart, seen goes back to pending: work read but not finished is not lost.
//!
//! `deliveries` holds only open deliveries (pending, seen, deferred); an ack moves
//! the row to `deliveries_done`. So the inbox is a range of the primary key that does
//! not grow with history (before the split, a partial index did that job and every
//! delivery cost two b-tree entries). A broadcast's delivery becomes a row here when
//! its recipient's inbox is first read or changed (`broadcast.rs`): every entry point
//! below writes those rows first, so the state machine only ever sees rows.

use crate::Scope;
use crate::events::Event;
use crate::messaging::Messaging;
use crate::messaging::broadcast;
use crate::messaging::own_inbox::Ahead;
use domain::clock::{fmt_ms, parse_when};
use domain::error::{Error, Result};
use domain::states::DeliveryState;
use schemars::JsonSchema;
use serde::Serialize;
use store::Isolation;
use store::sql;
use store::sql::{Connection, OptionalExtension};

pub const DEFAULT_INBOX_LIMIT: i64 = 50;
pub const MAX_INBOX_LIMIT: i64 = 200;
pub const DEFAULT_DEFER: &str = "10m";
pub const MAX_DEFER_MS: i64 = 30 * 24 * 3600 * 1000;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InboxMessage {
    pub id: String,
    pub from: String,
    pub content: String,
    pub created_at: String,
    /// `high` when several members are mentioned or the text says urgent/asap/blocked/critical.
    pub priority: String,
    /// True for a direct message (only you can see it besides the sender).
    pub dm: bool,
    /// The message asks you for a result fitting this JSON schema: end by
    /// calling result_submit with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_schema: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Inbox {
    /// Oldest first. Reading marks them seen; ack them when handled.
    pub messages: Vec<InboxMessage>,
    /// How many more are waiting beyond this page.
    pub remaining: i64,
    /// How many are deferred to a later time (not shown yet).
    pub deferred: i64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AckResult {
    /// How many deliveries this call acknowledged (0 if they were already acked).
    pub acked: i64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DeferResult {
    pub message_id: String,
    /// When it comes back into the inbox.
    pub deferred_until: String,
}

/// The delivery's open state as a query sent now (see [`delivery_state`]).
fn state_ahead(c: &Connection, scope: &Scope, message_id: &str) -> Result<sql::Later> {
    Ok(c
        .prepare_cached("SELECT state FROM deliveries WHERE workflow_id = ?1 AND recipient = ?2 AND message_id = ?3")?
        .query_later((scope.workflow_id, &scope.me, message_id))?)
}

/// The delivery's state, or an error that says whether the id is unknown or just not
/// addressed to this member; its open state read from `open` when it was sent.
fn delivery_state(
    c: &Connection,
    scope: &Scope,
    message_id: &str,
    open: Option<sql::Later>,
) -> Result<DeliveryState> {
    let open = match open {
        Some(sent) => sent,
        None => state_ahead(c, scope, message_id)?,
    };
    if let Some(r) = open.rows(c)?.next()? {
        return Ok(r.parse(0)?);
    }
    let done: Option<i64> = c
        .prepare_cached(
            "SELECT 1 FROM deliveries_done WHERE workflow_id = ?1 AND recipient = ?2 AND message_id = ?3",
        )?
        .query_row((scope.workflow_id, &scope.me, message_id), |r| r.get(0))
        .optional()?;
    if done.is_some() {
        return Ok(DeliveryState::Acked);
    }
    let exists: Option<i64> = c
        .prepare_cached("SELECT 1 FROM messages WHERE workflow_id = ?1 AND id = ?2")?
        .query_row((scope.workflow_id, message_id), |r| r.get(0))
        .optional()?;
    Err(match exists {
        Some(_) => Error::forbidden(format!(
            "message {message_id} was not delivered to {}; you can only ack or defer ids from your own my_inbox",
            scope.me
        )),
        None => Error::not_found(format!(
            "unknown message id {message_id:?} in {}; use an id returned by my_inbox",
            scope.workflow
        )),
    })
}

impl Messaging {
    /// Returns the open inbox, oldest first, and marks the returned deliveries seen.
    pub async fn my_inbox(&self, scope: &Scope, limit: Option<i64>) -> Result<Inbox> {
        let limit = limit.unwrap_or(DEFAULT_INBOX_LIMIT);
        if !(1..=MAX_INBOX_LIMIT).contains(&limit) {
            return Err(Error::invalid(format!(
                "limit must be between 1 and {MAX_INBOX_LIMIT} (default {DEFAULT_INBOX_LIMIT})"
            )));
        }
        // Its marks go out with its reads, unless broadcasts must be written first
        // (then the page is read and marked after them): one round trip, piped.
        // It refuses nothing once it wrote, so alone it needs no savepoint either.
        let ahead = move |c: &Connection, s: &Scope, now| {
            send_reads(c, s, (limit, now), Mark::UnlessBroadcasts)
        };
        self.piped_own_inbox(
            scope,
            (
                Box::new(ahead),
                Box::new(move |c, s, now, sent| {
                    read_inbox(c, s, (limit, now), (Some(sent), Mark::Yes)).map(Some)
                }),
            ),
            (
                Isolation::ChecksFirst,
                (
                    Box::new(ahead),
                    Box::new(move |c, s, now, (sent, current)| {
                        read_inbox(c, s, (limit, now), (current.then_some(sent), Mark::Yes))
                    }),
                ),
            ),
        )
        .await
    }

    /// The inbox as my_inbox shows it, without marking anything seen (what an MCP
    /// resource shows: looking is not reading).
    pub async fn inbox_peek(&self, scope: &Scope, limit: i64) -> Result<Inbox> {
        let (s, now) = (scope.clone(), self.clock.now_ms());
        let peeked = self
            .store
            .read(move |c| {
                if broadcast::unwritten(c, s.workflow_id, &s.me)? > 0 {
                    return Ok(None);
                }
                read_inbox(c, &s, (limit, now), (None, Mark::No)).map(Some)
            })
            .await?;
        if let Some(inbox) = peeked {
            return Ok(inbox);
        }
        // Broadcasts that are not its rows yet: write them (they stay pending), then look.
        self.in_own_inbox(
            (scope, Isolation::ChecksFirst),
            (
                Box::new(sends_nothing),
                Box::new(move |c, s, now, _| read_inbox(c, s, (limit, now), (None, Mark::No))),
            ),
        )
        .await
    }

    /// Acknowledges one delivery, or (`through`) every open one up to and including it.
    pub async fn my_inbox_ack(
        &self,
        scope: &Scope,
        message_id: &str,
        through: bool,
    ) -> Result<AckResult> {
        let id = message_id.trim().to_owned();
        // Piped, the lookup and the ack go out with the broadcasts' check, and the
        // ack acks only when the delivery is open and no broadcast is to be written
        // first. Else it runs whole, in a savepoint (an ack the lookup refuses is
        // rolled back with it).
        let r = self
            .piped_own_inbox(
                scope,
                (
                    acks_ahead(id.clone(), through, Guard::Piped),
                    Box::new(|c, _, _, (state, sent)| {
                        if state.rows(c)?.next()?.is_none() {
                            return Ok(None);
                        }
                        let acked = count(c, sent)? as i64;
                        Ok(Some(AckResult { acked }))
                    }),
                ),
                (
                    Isolation::Savepoint,
                    (
                        acks_ahead(id.clone(), through, Guard::None),
                        Box::new(move |c, s, now, ((state, sent), current)| {
                            let mut acked = count(c, sent)?;
                            if current {
                                delivery_state(c, s, &id, Some(state))?;
                            } else {
                                // Broadcast rows were written after: they are acked too.
                                delivery_state(c, s, &id, None)?;
                                let which = Settle::acking(&id, through);
                                acked += settle(c, s.workflow_id, &s.me, which, now)?;
                            }
                            Ok(AckResult {
                                acked: acked as i64,
                            })
                        }),
                    ),
                ),
            )
            .await?;
        // A worker's run says so when it ends (RunEnded), once its row is final.
        if r.acked > 0 && scope.run_id.is_none() {
            self.events.publish(Event::Acked {
                workflow_id: scope.workflow_id,
                agent: scope.me.clone(),
            });
        }
        Ok(r)
    }

    /// Puts a delivery off until a duration from now or a time (default 10 minutes).
    pub async fn my_inbox_defer(
        &self,
        scope: &Scope,
        message_id: &str,
        until: Option<&str>,
    ) -> Result<DeferResult> {
        // Stamped by the kernel's clock, which the scheduler's gate reads it by.
        let now = self.clock.now_ms();
        let until_ms = parse_when(until.unwrap_or(DEFAULT_DEFER), "until", now)?;
        if until_ms <= now {
            return Err(Error::invalid(
                "until is in the past: give a later time or a duration such as \"30m\"",
            ));
        }
        if until_ms - now > MAX_DEFER_MS {
            return Err(Error::invalid(
                "until is more than 30 days away; defer for less",
            ));
        }
        let id = message_id.trim().to_owned();
        self.in_own_inbox(
            (scope, Isolation::Savepoint),
            (Box::new(sends_nothing), Box::new(move |c, s, now, _| {
                if delivery_state(c, s, &id, None)? == DeliveryState::Acked {
                    return Err(Error::conflict(format!(
                        "message {id} is already acked; acks are final, so it cannot be deferred"
                    )));
                }
                c.prepare_cached(
                    "UPDATE deliveries SET state = 'deferred', defer_until = ?4, updated_at = ?5
                     WHERE workflow_id = ?1 AND recipient = ?2 AND message_id = ?3",
                )?
                .execute(sql::params![s.workflow_id, s.me, id, until_ms, now])?;
                Ok(DeferResult {
                    message_id: id,
                    deferred_until: fmt_ms(until_ms),
                })
            })),
        )
        .await
    }

    /// Restart recovery: deliveries read but not acked become pending again, except
    /// those of agents another node runs (their runs are that node's).
    pub(crate) async fn requeue_seen(&self) -> Result<usize> {
        let node = self.node.clone();
        self.store
            .write(move |c| {
                Ok(c.execute(
                    "UPDATE deliveries SET state = 'pending' WHERE state = 'seen'
                       AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.workflow_id = deliveries.workflow_id
                                         AND a.name = deliveries.recipient AND a.node <> ?1)",
                    [node],
                )?)
            })
            .await
    }
}

/// An inbox job's first statements when it has none to send with the broadcasts'
/// check.
fn sends_nothing(_: &Connection, _: &Scope, _: i64) -> Result<()> {
    Ok(())
}

/// Whether an ack's statements carry the checks of a piped job.
#[derive(Clone, Copy)]
enum Guard {
    None,
    /// They write only when the delivery acked is open and no broadcast is to be
    /// written first: else they do nothing (the job then runs whole).
    Piped,
}

/// An ack's statements: the delivery's open state, and the ack itself (see
/// [`settle_later`]).
fn acks_ahead(id: String, through: bool, guard: Guard) -> Ahead<(sql::Later, sql::Later)> {
    Box::new(move |c, s, now| {
        let state = state_ahead(c, s, &id)?;
        let which = Settle::acking(&id, through);
        let sent = settle_later(c, (s.workflow_id, &s.me), (which, guard), now)?;
        Ok((state, sent))
    })
}

/// Which open deliveries of a member an ack settles.
pub(crate) enum Settle<'a> {
    /// The one with this message id.
    One(&'a str),
    /// Every one up to this id, except those deferred to later than now.
    Through(&'a str),
    /// Those a finished run read (state seen).
    Seen,
}

impl<'a> Settle<'a> {
    /// An ack of `id`: that delivery, or (`through`) every one up to it.
    fn acking(id: &'a str, through: bool) -> Self {
        if through {
            Self::Through(id)
        } else {
            Self::One(id)
        }
    }
}

/// Acks open deliveries of `recipient`: they move to `deliveries_done` (acks are
/// final, and the open table stays small). Returns how many.
pub(crate) fn settle(
    c: &Connection,
    workflow_id: i64,
    recipient: &str,
    which: Settle,
    now: i64,
) -> Result<usize> {
    count(
        c,
        settle_later(c, (workflow_id, recipient), (which, Guard::None), now)?,
    )
}

/// [`settle`] sent now: the copy and the delete go out together, and the deleted
/// rows (the count) are read with [`count`] (on PostgreSQL with the answer of a
/// statement sent later).
fn settle_later(
    c: &Connection,
    (workflow_id, recipient): (i64, &str),
    (which, guard): (Settle, Guard),
    now: i64,
) -> Result<sql::Later> {
    let (cond, id) = match which {
        Settle::One(id) => ("message_id = ?3", id),
        Settle::Through(id) => (
            "message_id <= ?3 AND NOT (state = 'deferred' AND defer_until > ?4)",
            id,
        ),
        Settle::Seen => ("state = 'seen'", ""),
    };
    let guard = match guard {
        Guard::None => String::new(),
        Guard::Piped => format!(
            " AND {} AND EXISTS (SELECT 1 FROM deliveries o WHERE o.workflow_id = ?1
                  AND o.recipient = ?2 AND o.message_id = ?3)",
            broadcast::NONE_UNWRITTEN
        ),
    };
    let which = format!("workflow_id = ?1 AND recipient = ?2 AND {cond}{guard}");
    // Parameters are numbered in this order; a statement binds as many as it names
    // (the delete of `Seen` names two, the copy that stamps `?4` four).
    let params: [&dyn sql::ToSql; 4] = [&workflow_id, &recipient, &id, &now];
    let mut copy = c.prepare_cached(&format!(
        "INSERT INTO deliveries_done (workflow_id, recipient, message_id, read_by, updated_at)
         SELECT workflow_id, recipient, message_id, read_by, ?4 FROM deliveries WHERE {which}
         ON CONFLICT (workflow_id, recipient, message_id)
         DO UPDATE SET read_by = excluded.read_by, updated_at = excluded.updated_at"
    ))?;
    let n = copy.parameter_count();
    copy.execute_later(&params[..n])?;
    let mut delete =
        c.prepare_cached(&format!("DELETE FROM deliveries WHERE {which} RETURNING 1"))?;
    let n = delete.parameter_count();
    Ok(delete.query_later(&params[..n])?)
}

/// How many rows a statement sent with RETURNING gave back.
fn count(c: &Connection, sent: sql::Later) -> Result<usize> {
    let mut rows = sent.rows(c)?;
    let mut n = 0;
    while rows.next()?.is_some() {
        n += 1;
    }
    Ok(n)
}

/// The deliveries due to `?2` in instance `?1` at `?3`, oldest first, at most `?4`,
/// with their messages.
///
/// `+ 0` keeps the instance out of the planner's reach on the messages side: each
/// message is then found by its instance and id together, one probe per delivery,
/// whatever the statistics say. Without it PostgreSQL applies `?1` to messages alone
/// and, with statistics taken before the instance had messages (they estimate one
/// row), may scan the instance's whole history for every delivery with the id as a
/// filter: 3 s for one read of 50 with 400,000 messages, the fall of the bench's
/// phases 1b to 3 (see `plan_tests`).
pub(crate) const READ: &str = "
    SELECT d.message_id, m.sender, m.content, m.created_at, m.priority, m.to_member IS NOT NULL
      FROM deliveries d
     CROSS JOIN messages m
     WHERE m.workflow_id = d.workflow_id + 0 AND m.id = d.message_id
       AND d.workflow_id = ?1 AND d.recipient = ?2
       AND (d.state <> 'deferred' OR d.defer_until <= ?3)
     ORDER BY d.message_id LIMIT ?4";

/// Marks READ's page (the same parameters) seen by run `?5`, or by the member when
/// `?5` is null; what that reader saw already is left as it is. Every delivery has
/// its message (messages are never deleted), so the page is the due deliveries
/// between its first and last ids: found once (a materialised CTE, its bounds
/// read by subqueries that run before the scan), then the scan reads that range
/// alone. As `IN (page)`, or as a join with the page, PostgreSQL ran the page again
/// for each of the member's open deliveries (9 ms a read with 600 open); bounded by
/// the last id only, the scan walked what acks left at the front of the member's
/// range until vacuum came (`plan_tests`).
const MARK: &str = "
    WITH page AS MATERIALIZED (
        SELECT min(p.message_id) AS lo, max(p.message_id) AS hi FROM (
            SELECT d.message_id FROM deliveries d
             WHERE d.workflow_id = ?1 AND d.recipient = ?2
               AND (d.state <> 'deferred' OR d.defer_until <= ?3)
             ORDER BY d.message_id LIMIT ?4) p)
    UPDATE deliveries SET state = 'seen', defer_until = NULL, updated_at = ?3, read_by = ?5
     WHERE workflow_id = ?1 AND recipient = ?2
       AND message_id >= (SELECT lo FROM page) AND message_id <= (SELECT hi FROM page)
       AND (state <> 'deferred' OR defer_until <= ?3)
       AND NOT (state = 'seen' AND read_by IS NOT DISTINCT FROM ?5)";

/// Whether an inbox read marks its page seen.
#[derive(Clone, Copy)]
pub(super) enum Mark {
    /// Looking is not reading.
    No,
    Yes,
    /// Unless broadcasts are not the member's rows yet
    /// ([`broadcast::NONE_UNWRITTEN`]): the page would then change, and is read and
    /// marked again after them.
    UnlessBroadcasts,
}

impl Mark {
    /// Its statement (READ's parameters and the reader), if it marks.
    pub(super) fn sql(self) -> Option<String> {
        match self {
            Self::No => None,
            Self::Yes => Some(MARK.to_owned()),
            Self::UnlessBroadcasts => Some(format!("{MARK} AND {}", broadcast::NONE_UNWRITTEN)),
        }
    }
}

/// The inbox's reads, sent at once (one round trip on PostgreSQL): the page, the
/// member's open asks and the counts, then the page's marks. Marking it seen
/// changes neither the page nor the counts (seen and pending are both open).
pub(super) struct Reads {
    page: sql::Later,
    asks: sql::Later,
    counts: sql::Later,
}

/// Sends the inbox's reads and `mark`s (see [`Reads`]).
fn send_reads(c: &Connection, s: &Scope, (limit, now): (i64, i64), mark: Mark) -> Result<Reads> {
    let (wid, me) = (s.workflow_id, &s.me);
    let page = c
        .prepare_cached(READ)?
        .query_later(sql::params![wid, me, now, limit])?;
    let asks = super::results::open_schemas_ahead(c, wid, me)?;
    // Both counts in one statement.
    let counts = c
        .prepare_cached(
            "SELECT count(CASE WHEN d.state <> 'deferred' OR d.defer_until <= ?3 THEN 1 END),
                    count(CASE WHEN d.state = 'deferred' AND d.defer_until > ?3 THEN 1 END)
               FROM deliveries d WHERE d.workflow_id = ?1 AND d.recipient = ?2",
        )?
        .query_later(sql::params![wid, me, now])?;
    if let Some(marks) = mark.sql() {
        c.prepare_cached(&marks)?
            .execute_later(sql::params![wid, me, now, limit, s.run_id])?;
    }
    Ok(Reads { page, asks, counts })
}

/// The caller's due deliveries, oldest first, with counts, from the reads `sent`
/// (or sent now, with `mark`).
fn read_inbox(
    c: &sql::Connection,
    s: &Scope,
    (limit, now): (i64, i64),
    (sent, mark): (Option<Reads>, Mark),
) -> Result<Inbox> {
    let reads = match sent {
        Some(r) => r,
        None => send_reads(c, s, (limit, now), mark)?,
    };
    let mut messages = Vec::new();
    let mut page = reads.page.rows(c)?;
    while let Some(r) = page.next()? {
        messages.push(InboxMessage {
            id: r.get(0)?,
            from: r.get(1)?,
            content: r.get(2)?,
            created_at: fmt_ms(r.get(3)?),
            priority: r.get(4)?,
            dm: r.get(5)?,
            result_schema: None,
        });
    }
    // What asks for a result says so (few rows: the open asks of one member).
    for (id, schema) in super::results::open_schemas_of(reads.asks.rows(c)?)? {
        if let Some(m) = messages.iter_mut().find(|m| m.id == id) {
            m.result_schema = Some(schema);
        }
    }
    let mut counts = reads.counts.rows(c)?;
    let (open, deferred): (i64, i64) = match counts.next()? {
        Some(r) => (r.get(0)?, r.get(1)?),
        None => (0, 0),
    };
    Ok(Inbox {
        remaining: open - messages.len() as i64,
        messages,
        deferred,
    })
}
