//! The channel: `channel_send` (the one write path for messages) and `channel_read`.
//!
//! Rules (DESIGN "Messaging rules"):
//! - mentions are parsed at write time against the instance's members; the addressed
//!   rule picks the recipients; `@all` is every agent but the sender;
//! - `to` makes a direct message: only sender and `to` see it in `channel_read`, and
//!   only `to` gets a delivery, whatever it mentions; what a contract makes the
//!   kernel say about it (a route's note, a notify) is a direct message too;
//! - one delivery row per recipient is written in the same transaction as the message,
//!   or, for a message to every agent but the sender, one broadcast row (`broadcast`);
//! - a message over [`MAX_MESSAGE_CHARS`] is refused for agents; the lead's long
//!   messages are stored as a resource and the channel keeps a short pointer;
//! - the send guard: when others posted since the sender last read, the send still
//!   succeeds and the result lists what was missed (unless `force`).

mod asked;
pub(crate) mod broadcast;
#[cfg(test)]
mod clock_tests;
#[cfg(test)]
mod content_tests;
mod decide;
mod governed;
#[cfg(test)]
mod governed_tests;
mod guard;
pub mod inbox;
#[cfg(test)]
mod inbox_tests;
pub mod mentions;
pub mod news;
mod one;
mod own_inbox;
#[cfg(test)]
mod piped_tests;
#[cfg(test)]
mod plan_tests;
pub mod read;
pub mod resources;
#[cfg(test)]
mod resources_tests;
pub mod results;
#[cfg(test)]
mod results_tests;
mod rows;
pub(crate) mod runs;
#[cfg(test)]
mod send_cases;
pub(crate) mod senders;
pub mod team;
#[cfg(test)]
mod tests;
mod together;
#[cfg(test)]
mod together_tests;
mod wait;

pub(crate) use asked::{reset_hops_tx, withdraw_tx};

pub use read::{ChannelMessage, ReadResult};

use crate::Scope;
use crate::events::Event;
use crate::events::Events;
use crate::governance::contracts::Contracts;
use crate::messaging::resources::store_resource;
use crate::registry::agent_names;
use crate::timing::Clock;
use decide::{decide, send_result};
use domain::error::{Error, Result};
use domain::names::{LEAD, SYSTEM, WorkflowRef};
use guard::Ahead;
use schemars::JsonSchema;
pub use senders::URGENT;
use senders::{count_hop, outside, urgent_to};
use serde::Serialize;
use std::sync::Arc;
use store::sql::Connection;
use store::{Isolation, Store, WriteScope};

pub const MAX_MESSAGE_CHARS: usize = 4_000;
/// The lead's messages may be longer; past [`MAX_MESSAGE_CHARS`] they become a resource.
pub const MAX_LEAD_MESSAGE_BYTES: usize = 1024 * 1024;
pub const DEFAULT_READ_LIMIT: i64 = 20;
pub const MAX_READ_LIMIT: i64 = 200;
/// The send guard counts missed messages up to this many.
pub const MISSED_COUNT_CAP: i64 = 100;
const PREVIEW_CHARS: usize = 160;

#[derive(Debug, Clone, Default)]
pub struct Outgoing {
    pub message: String,
    pub to: Option<String>,
    pub force: bool,
    /// A direct message from the lead (or a member an `allow` of urgent messages
    /// names) that stops its addressee's turn (priority `urgent`): once it is written, an [`Event::Urgent`] has the node running
    /// the agent stop its run and start the next.
    pub urgent: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MissedMessage {
    pub id: String,
    pub from: String,
    /// The first characters of the message.
    pub preview: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SendResult {
    /// The new message id (sortable; use it as `since` in channel_read).
    pub id: String,
    /// Who got it in their inbox.
    pub recipients: Vec<String>,
    /// Messages from others posted since you last read the channel (empty with force).
    pub missed: Vec<MissedMessage>,
    /// How many messages you missed in all (missed lists at most 10; counted up to 100).
    pub missed_count: i64,
    /// @names that are not members of this workflow instance (nobody got those).
    pub unknown_mentions: Vec<String>,
    /// Set when a long lead message was stored as a resource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Guidance, e.g. about missed messages or unknown mentions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

pub(crate) fn preview(s: &str) -> String {
    let mut p: String = s.chars().take(PREVIEW_CHARS).collect();
    if p.len() < s.len() {
        p.push('…');
    }
    p
}

/// A message written inside a store job; announce it with [`Kernel::announce`] once
/// the job has committed.
pub(crate) struct Posted {
    pub(crate) result: SendResult,
    recipients: Vec<String>,
    /// The kernel's own message to the lead (a pause, a failure, a guard): what
    /// MCP logging tells the lead's clients.
    notice: Option<String>,
    /// The kernel's messages written with this one, each with its instance (a
    /// contract's notes in the same one; an organisation's channel).
    extra: Vec<(i64, Posted)>,
}

impl Posted {
    /// Announces `other` (written in the same job, in instance `workflow_id`)
    /// with this one.
    pub(crate) fn also(&mut self, workflow_id: i64, other: Posted) {
        self.extra.push((workflow_id, other));
    }
}

/// Posts the kernel's own message (`from: system`, kind `system`) at `now` inside a
/// store job, through the same rules as any message: its @mentions decide whose
/// inbox gets it. Used where an event must reach people in the same transaction as
/// the change.
pub(crate) fn post_system(
    c: &Connection,
    workflow_id: i64,
    workflow: &WorkflowRef,
    text: String,
    now: i64,
) -> Result<Posted> {
    post_system_as(c, (workflow_id, workflow), None, text, now)
}

/// [`post_system`] as a direct message to the member `to`: what the kernel says
/// about a direct message is as private as it.
pub(crate) fn post_system_direct_at(
    c: &Connection,
    (workflow_id, workflow): (i64, &WorkflowRef),
    to: &str,
    text: String,
    now: i64,
) -> Result<Posted> {
    post_system_as(c, (workflow_id, workflow), Some(to.to_owned()), text, now)
}

fn post_system_as(
    c: &Connection,
    (workflow_id, workflow): (i64, &WorkflowRef),
    to: Option<String>,
    text: String,
    now: i64,
) -> Result<Posted> {
    let scope = Scope {
        workflow: workflow.clone(),
        workflow_id,
        me: SYSTEM.into(),
        // Like the lead's, a long system post becomes a resource instead of failing.
        lead: true,
        run_id: None,
    };
    let mut rows = rows::Rows::new(workflow_id, now);
    if c.server_functions() {
        rows.above(guard::greatest_id(c, workflow_id)?);
    }
    let mut posted = post(
        c,
        &scope,
        &Outgoing {
            message: text.clone(),
            to,
            force: true,
            urgent: false,
        },
        &governed::Rules::none(now),
        (&agent_names(c, workflow_id)?, &mut rows, None),
    )?;
    rows.write(c)?;
    if posted.recipients.iter().any(|r| r == LEAD) {
        posted.notice = Some(text);
    }
    Ok(posted)
}

/// [`post_system`] addressed to `to`: their names lead the text, so their
/// inboxes get it (the lead is `user`).
pub(crate) fn post_system_to(
    c: &Connection,
    workflow_id: i64,
    workflow: &WorkflowRef,
    to: &[String],
    text: &str,
    now: i64,
) -> Result<Posted> {
    let who: String = to.iter().map(|m| format!("@{m} ")).collect();
    post_system(c, workflow_id, workflow, format!("{who}{text}"), now)
}

/// Writes one message and its deliveries, `agents` being the instance's agents,
/// gathering the rows in `rows` (the caller writes them), with its guard's scan
/// sent `ahead` if it was. Runs inside a store job.
fn post(
    c: &Connection,
    scope: &Scope,
    send: &Outgoing,
    rules: &governed::Rules,
    (agents, rows, ahead): (&[String], &mut rows::Rows, Option<Ahead>),
) -> Result<Posted> {
    let mut d = decide(scope, send, agents)?;
    let me = &scope.me;
    // Contracts on messages: refuse, re-route, tell (see `governed`).
    let governed = rules.apply(
        c,
        scope,
        (&send.message, send.urgent),
        &d.members,
        &mut d.recipients,
        &mut d.to,
    )?;
    let priority = if send.urgent {
        let allowed = governed.urgent_by.is_some();
        if allowed && !scope.lead && crate::registry::is_sub_agent_tx(c, scope.workflow_id, me)? {
            return Err(senders::sub_agent_urgent(me));
        }
        urgent_to(scope, d.to.as_deref(), agents, allowed)?;
        URGENT
    } else {
        mentions::priority(&d.parsed, &send.message)
    };
    let (id, scan) = match ahead {
        Some(a) => (a.id, Some(a.scan)),
        None => (rows.new_id(), None),
    };
    if let Some((rid, full)) = &d.resource {
        store_resource(c, rid, ("markdown", full), (me, rules.now()))?;
    }
    let content = std::mem::take(&mut d.content);
    rows.message(message_row(
        scope,
        (&id, rules.now()),
        content,
        &d.to,
        &d.recipients,
        priority,
    )?);
    deliver(c, scope, &id, &d.recipients, agents, d.to.is_none(), rows)?;
    count_hop(scope, &d.recipients, rows);
    let missed = if send.force {
        (Vec::new(), 0)
    } else {
        // The send guard reads the channel: what is gathered is written first.
        rows.write(c)?;
        guard::missed_since_last_read(c, scope, &id, scan)?
    };
    if !outside(me) {
        rows.read_through(scope, &id);
    }
    if rules.any() {
        // A contract's notes are messages of their own, after this one.
        rows.write(c)?;
    }
    let extra = governed
        .after(c, scope, (&id, &send.message), rules.now())?
        .into_iter()
        .map(|p| (scope.workflow_id, p))
        .collect();
    Ok(Posted {
        extra,
        recipients: d.recipients.clone(),
        result: send_result(scope, d, id, missed, governed.note.as_deref()),
        notice: None,
    })
}

/// A message's row as stored: sent by the scope's member at `now`, its mentions
/// exactly its recipients.
fn message_row(
    scope: &Scope,
    (id, now): (&str, i64),
    content: String,
    to: &Option<String>,
    recipients: &[String],
    priority: &str,
) -> Result<rows::MessageRow> {
    Ok(rows::MessageRow {
        id: id.to_owned(),
        sender: scope.me.clone(),
        content,
        kind: if scope.me == SYSTEM {
            "system"
        } else {
            "message"
        },
        to: to.clone(),
        mentions: serde_json::to_string(recipients).map_err(|e| Error::internal(e.to_string()))?,
        priority: priority.to_owned(),
        created_at: now,
    })
}

/// Moves a reader's cursor forward (never back).
pub(super) fn set_cursor(c: &Connection, workflow_id: i64, reader: &str, id: &str) -> Result<()> {
    c.prepare_cached(
        "INSERT INTO read_cursors (workflow_id, reader, last_read) VALUES (?1, ?2, ?3)
         ON CONFLICT (workflow_id, reader) DO UPDATE SET last_read =
             CASE WHEN excluded.last_read > read_cursors.last_read THEN excluded.last_read ELSE read_cursors.last_read END",
    )?
    .execute_later((workflow_id, reader, id))?;
    Ok(())
}

/// The channel and the inboxes as a service: it writes messages and deliveries
/// under the contracts on messages, and announces them on the event bus (the
/// only way it signals the rooms above).
pub struct Messaging {
    store: Store,
    events: Events,
    contracts: Arc<Contracts>,
    /// The kernel's clock: when a message is sent, a delivery deferred.
    clock: Clock,
    /// This kernel's node: recovery leaves other nodes' deliveries alone.
    node: String,
    /// What the sends written by a function decide against (see `one`).
    known: Arc<one::KnownAgents>,
    /// Single sends queued per instance, to be written together (see `together`).
    together: Arc<together::Together>,
}

impl Messaging {
    pub fn new(
        (store, events, clock): (Store, Events, Clock),
        contracts: Arc<Contracts>,
        node: String,
    ) -> Self {
        Self {
            store,
            events,
            contracts,
            clock,
            node,
            known: Arc::default(),
            together: Arc::default(),
        }
    }

    pub async fn channel_send(&self, scope: &Scope, send: Outgoing) -> Result<SendResult> {
        let rules = governed::Rules::of(&self.contracts, scope, self.clock.now_ms());
        if self.goes_together(scope, &send, &rules) {
            let writer = together::Writer {
                store: self.store.clone(),
                events: self.events.clone(),
                known: self.known.clone(),
                together: self.together.clone(),
            };
            let s = one::Sending {
                scope: scope.clone(),
                send,
                rules,
            };
            return Ok(writer.send(s).await?.result);
        }
        let mut sent = self.channel_send_many(scope, vec![send]).await?;
        Ok(sent.remove(0))
    }

    /// Whether `send` is written with the others queued on its instance (see
    /// `together`): where the database runs functions, unless a contract on
    /// messages is in force, it is urgent, or its text becomes a resource.
    fn goes_together(&self, scope: &Scope, send: &Outgoing, rules: &governed::Rules) -> bool {
        self.store.server_functions()
            && self.known.on()
            && !rules.any()
            && !send.urgent
            && !decide::becomes_resource(scope, &send.message)
    }

    /// Posts messages in one transaction, each through the same rules as
    /// `channel_send`; all or none are written. (The benchmark preloads with it.)
    pub async fn channel_send_many(
        &self,
        scope: &Scope,
        sends: Vec<Outgoing>,
    ) -> Result<Vec<SendResult>> {
        let s = scope.clone();
        let urgent: Vec<bool> = sends.iter().map(|o| o.urgent).collect();
        let rules = governed::Rules::of(&self.contracts, scope, self.clock.now_ms());
        let wide = rules.any()
            || sends
                .iter()
                .any(|o| decide::becomes_resource(scope, &o.message));
        let (lock, isolation) = send_lock(scope.workflow_id, sends.len(), wide);
        let posted = self
            .store
            .write_as(lock, isolation, move |c| {
                governed::post_all(c, &s, &sends, &rules, post)
            })
            .await??;
        for (p, urgent) in posted.iter().zip(urgent) {
            self.announce(scope.workflow_id, p);
            if let (true, Some(agent)) = (urgent, p.recipients.first()) {
                self.events.publish(Event::Urgent {
                    workflow_id: scope.workflow_id,
                    agent: agent.clone(),
                });
            }
        }
        Ok(posted.into_iter().map(|p| p.result).collect())
    }

    /// Publishes a committed message's events (the wake source for recipients).
    pub(crate) fn announce(&self, workflow_id: i64, posted: &Posted) {
        announce(&self.events, workflow_id, posted);
    }
}

/// Publishes a committed message's events on `events` (the wake source for
/// recipients).
fn announce(events: &Events, workflow_id: i64, posted: &Posted) {
    for (w, p) in &posted.extra {
        announce(events, *w, p);
    }
    let message_id = &posted.result.id;
    events.publish(Event::Posted {
        workflow_id,
        message_id: message_id.clone(),
    });
    if !posted.recipients.is_empty() {
        events.publish(Event::Delivered {
            workflow_id,
            recipients: posted.recipients.as_slice().into(),
            message_id: message_id.clone(),
        });
    }
    if let Some(text) = &posted.notice {
        events.publish(Event::Notice {
            workflow_id,
            text: text.clone(),
        });
    }
}

/// The message's deliveries: one broadcast row when it goes to every agent but the
/// sender (`undirected`, no DM), and a pending row for each recipient it leaves.
fn deliver(
    c: &Connection,
    scope: &Scope,
    id: &str,
    recipients: &[String],
    agents: &[String],
    undirected: bool,
    rows: &mut rows::Rows,
) -> Result<()> {
    // To every agent but the sender: one broadcast row; only the recipients it
    // does not cover (the lead) get their rows now.
    let broadcast = undirected && broadcast::covers_all(recipients, agents, &scope.me);
    if broadcast {
        broadcast::record(c, scope.workflow_id, id, &scope.me)?;
    }
    // The members are the agents and the lead, so the lead is all a broadcast leaves.
    for r in recipients.iter().filter(|r| !broadcast || *r == LEAD) {
        rows.delivery(r, id);
    }
    Ok(())
}

/// The lock and isolation of a job writing `n` sends in instance `wid`, `wide`
/// when a contract on messages is in force or a text becomes a resource. A send
/// alone checks everything before it writes and touches its instance's rows
/// alone. A batch's later send may be refused after the earlier ones wrote, and a
/// contract's checks (a rate counted, urgent allowed) come after its first writes:
/// those keep a savepoint each; a contract's decision and counts, and resources,
/// are every instance's, so those take the global lock.
fn send_lock(wid: i64, n: usize, wide: bool) -> (WriteScope, Isolation) {
    match (n, wide) {
        (_, true) => (WriteScope::Global, Isolation::Savepoint),
        (1, false) => (WriteScope::Instance(wid), Isolation::ChecksFirst),
        _ => (WriteScope::Instance(wid), Isolation::Savepoint),
    }
}
