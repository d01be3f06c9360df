//! A send in one statement, where the database runs server-side functions
//! (PostgreSQL's `channel_send`, its migration 19).
//!
//! Why: on PostgreSQL a send was eight statements on the writer's backend (the
//! agents, the guard's scan, the message, its delivery, the hop count, the cursor,
//! the job's savepoint and its release), about 33 µs of that backend's CPU each,
//! and that backend is the ceiling of every node's writes (see the benchmarks'
//! "Two round trips per send"). Here a send is one statement and one plan.
//!
//! The rules stay in one place, in Rust: [`decide`] picks the recipients, the
//! mentions of no member and the addressee from the instance's agents as this
//! kernel last read them ([`KnownAgents`]); the function checks those against the
//! agents it reads and, when they differ (an agent came or went, on any node),
//! writes nothing and answers with the agents as they are, and the send is decided
//! again. What it does itself is the writing: the message's id above the
//! instance's greatest (so ids keep their order with several nodes writing one
//! instance), the guard's scan (`guard::missed_sql`, the same query), the message,
//! its deliveries or broadcast row, the hop count and the cursor.
//!
//! Which sends take it: one send alone (not a batch), with no contract on messages
//! in force, not urgent, whose text is posted as it is (a long one of the lead's
//! becomes a resource). The others, and a send its checks refuse (whose answer the
//! other path gives from a fresh read of the agents), are written by `post`. Either
//! way a send checks everything before it writes, so its job needs no savepoint.

use super::broadcast::covers_all;
use super::decide::{Decided, decide, send_notes};
use super::guard::{Missed, new_id};
use super::senders::{Hop, hop, outside};
use super::{Outgoing, Posted, SendResult, governed, mentions, message_row};
use crate::Scope;
use crate::registry::agent_names;
use domain::error::{Error, Result};
use domain::names::LEAD;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use store::sql::{self, Connection, ToSql};

/// The guard's scan inside it is `guard::missed_sql`'s, its preview length and cap
/// written as numbers (a parameter's LIMIT would let a generic plan guess a tenth
/// of the rows); `send_cases` checks the two texts agree.
const SEND: &str = "SELECT o_tag, o_id, o_from, o_text FROM channel_send(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, \
                    ?9, ?10, ?11, ?12, ?13, ?14, ?15)";

/// Instances whose agents this kernel remembers, at most; past it, it forgets them all.
const KNOWN_INSTANCES: usize = 4096;

/// The agents of each instance as this kernel last read them: what a send in one
/// statement decides against. Never trusted: the statement checks them.
#[derive(Default)]
pub(crate) struct KnownAgents {
    by_instance: Mutex<HashMap<i64, Arc<[String]>>>,
    /// Sends take `post` alone (a test compares both ways on one engine).
    off: AtomicBool,
    /// Sends written in one statement, and answers that the agents had changed.
    written: AtomicU64,
    stale: AtomicU64,
}

impl KnownAgents {
    fn get(&self, workflow_id: i64) -> Option<Arc<[String]>> {
        let map = self.by_instance.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&workflow_id).cloned()
    }

    fn set(&self, workflow_id: i64, agents: Vec<String>) -> Arc<[String]> {
        let agents: Arc<[String]> = agents.into();
        let mut map = self.by_instance.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= KNOWN_INSTANCES {
            map.clear();
        }
        map.insert(workflow_id, agents.clone());
        agents
    }

    /// How many sends were written in one statement, and how many times the
    /// statement found the agents changed.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (u64, u64) {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        (n(&self.written), n(&self.stale))
    }

    /// Every send is written by `post`, as on an engine without functions.
    #[cfg(test)]
    pub(crate) fn turn_off(&self) {
        self.off.store(true, Ordering::Relaxed);
    }
}

/// Writes `send` in one statement when it can (see the module's doc): the send
/// as posted, or `None` when `post` must write it. Nothing is written before it
/// answers `None`.
pub(super) fn send(
    c: &Connection,
    scope: &Scope,
    send: &Outgoing,
    rules: &governed::Rules,
    known: &KnownAgents,
) -> Result<Option<Posted>> {
    if !c.server_functions() || known.off.load(Ordering::Relaxed) || rules.any() || send.urgent {
        return Ok(None);
    }
    let wid = scope.workflow_id;
    // Whether `agents` were read in this job (else this kernel remembered them).
    let mut fresh = false;
    let mut agents = match known.get(wid) {
        Some(a) => a,
        None => {
            fresh = true;
            known.set(wid, agent_names(c, wid)?)
        }
    };
    // Decided against the agents known, then (at most twice) against those read
    // again or found by the statement.
    for _ in 0..3 {
        let decided = match decide(scope, send, &agents) {
            Ok(d) => d,
            // An agent made since (here or on another node) may be what it lacks.
            Err(_) if !fresh => {
                fresh = true;
                agents = known.set(wid, agent_names(c, wid)?);
                continue;
            }
            Err(_) => return Ok(None),
        };
        if decided.resource.is_some() {
            return Ok(None);
        }
        match write(c, scope, send, (rules.now(), &agents), decided)? {
            Written::Sent(posted) => {
                known.written.fetch_add(1, Ordering::Relaxed);
                return Ok(Some(posted));
            }
            Written::Stale(now) => {
                known.stale.fetch_add(1, Ordering::Relaxed);
                fresh = true;
                agents = known.set(wid, now);
            }
        }
    }
    Ok(None)
}

enum Written {
    Sent(Posted),
    /// Nothing was written: the instance's agents are these.
    Stale(Vec<String>),
}

/// Calls the function with what `decided` says, decided against `agents`.
fn write(
    c: &Connection,
    scope: &Scope,
    send: &Outgoing,
    (now, agents): (i64, &[String]),
    d: Decided,
) -> Result<Written> {
    let priority = mentions::priority(&d.parsed, &send.message);
    let row = message_row(
        scope,
        (&new_id(), now),
        d.content,
        &d.to,
        &d.recipients,
        priority,
    )?;
    let broadcast = d.to.is_none() && covers_all(&d.recipients, agents, &scope.me);
    // The members are the agents and the lead, so the lead is all a broadcast leaves.
    let deliver: Vec<&String> = d
        .recipients
        .iter()
        .filter(|r| !broadcast || *r == LEAD)
        .collect();
    let hops: i64 = match hop(scope, &d.recipients) {
        Hop::Keep => 0,
        Hop::Add => 1,
        Hop::Reset => -1,
    };
    let params: [&dyn ToSql; 15] = [
        &scope.workflow_id,
        &agents.join(","),
        &row.id,
        &row.sender,
        &row.content,
        &row.kind,
        &row.to,
        &row.mentions,
        &row.priority,
        &now,
        &json(&deliver)?,
        &broadcast,
        &hops,
        &!outside(&scope.me),
        &!send.force,
    ];
    let mut st = c.prepare_cached(SEND)?;
    let mut rows = st.query(&params[..])?;
    let Answer { id, stale, missed } = answer(c, &mut rows)?;
    if let Some(agents) = stale {
        return Ok(Written::Stale(agents));
    }
    let id = id.ok_or_else(|| Error::internal("channel_send answered no id"))?;
    let (missed, missed_count) = missed.answer();
    let nobody = d.recipients.is_empty() && d.to.is_none();
    let notes = send_notes(scope, missed_count, &d.unknown, &d.members, None, nobody);
    Ok(Written::Sent(Posted {
        extra: Vec::new(),
        recipients: d.recipients.clone(),
        result: SendResult {
            id,
            recipients: d.recipients,
            missed,
            missed_count,
            unknown_mentions: d.unknown,
            resource: None,
            note: (!notes.is_empty()).then(|| notes.join(" ")),
        },
        notice: None,
    }))
}

/// What the statement answered: the new message's id, or the agents as they are
/// (nothing written), and the messages the guard found missed.
struct Answer {
    id: Option<String>,
    stale: Option<Vec<String>>,
    missed: Missed,
}

/// Reads the statement's answer. The statement wrote unless it answered that the
/// agents had changed, and the store cannot tell that from a SELECT: a failure
/// after it wrote (an answer not understood) must fail its whole transaction, not
/// leave the send written behind an error.
fn answer(c: &Connection, rows: &mut sql::Rows<'_>) -> Result<Answer> {
    let mut a = Answer {
        id: None,
        stale: None,
        missed: Missed::default(),
    };
    let read = (|| -> Result<()> {
        while let Some(r) = rows.next()? {
            match r.get_str(0)? {
                "sent" => {
                    c.note_write();
                    a.id = Some(r.get::<String>(1)?);
                }
                "stale" => {
                    let names = r.get_str(3)?.split(',').filter(|n| !n.is_empty());
                    a.stale = Some(names.map(str::to_owned).collect());
                }
                "missed" if a.missed.count_one() => {
                    let text = r.get_ref(3)?.as_str().map_err(sql::Error::from)?;
                    a.missed.list(r.get(1)?, r.get(2)?, text);
                }
                "missed" => {}
                other => {
                    return Err(Error::internal(format!("channel_send answered {other:?}")));
                }
            }
        }
        Ok(())
    })();
    if let Err(e) = read {
        c.note_write();
        return Err(e);
    }
    Ok(a)
}

/// A list as the JSON text the function reads.
fn json<T: serde::Serialize + ?Sized>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::internal(e.to_string()))
}
