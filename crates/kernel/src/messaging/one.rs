//! The sends of a job in one statement, where the database runs server-side
//! functions (PostgreSQL's `channel_send_many`, its migration 20).
//!
//! Why: on PostgreSQL a send was eight statements on the writer's backend (the
//! agents, the guard's scan, the message, its delivery, the hop count, the cursor,
//! the job's savepoint and its release), about 33 µs of that backend's CPU each,
//! and one instance's writes are one backend at a time (see the benchmarks'
//! "Two round trips per send"). Migration 19 made a send one statement; here the
//! single sends queued for an instance while its writer was busy
//! ([`super::together`]) are one statement together, one plan and one round trip.
//!
//! The rules stay in one place, in Rust: [`decide`] picks each send's recipients,
//! the mentions of no member and the addressee from the instance's agents as this
//! kernel last read them ([`KnownAgents`]); the function checks those against the
//! agents it reads and, when they differ (an agent came or went, on any node),
//! writes nothing and answers with the agents as they are, and the sends are
//! decided again. What it does itself is the writing, in the sends' order: each
//! message's id above the one before and the instance's greatest (so ids keep
//! their order with several nodes writing one instance), the guard's scans
//! (`guard::missed_sql`, the same query, each as its send would have read it
//! alone), the messages, their deliveries or broadcast rows, the hop count and the
//! cursors.
//!
//! Which sends take it: single sends, with no contract on messages in force, not
//! urgent, whose text is posted as it is (a long one of the lead's becomes a
//! resource). The others are written by `post`. A send its checks refuse is
//! answered without a write, the others of its job still written: every send
//! checks everything before anything is written, so the job needs no savepoint.

use super::broadcast::covers_all;
use super::decide::{Decided, decide, send_result};
use super::guard::{Missed, new_id};
use super::senders::{Hops, hop, outside};
use super::{Outgoing, Posted, governed, mentions, message_row};
use crate::Scope;
use crate::registry::agent_names;
use domain::error::{Error, Result};
use domain::names::LEAD;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use store::sql::{self, Connection};

const SEND: &str =
    "SELECT o_i, o_tag, o_id, o_from, o_text FROM channel_send_many(?1, ?2, ?3, ?4, ?5)";

/// Instances whose agents this kernel remembers, at most; past it, it forgets them all.
const KNOWN_INSTANCES: usize = 4096;

/// The agents of each instance as this kernel last read them: what a send in one
/// statement decides against. Never trusted: the statement checks them.
#[derive(Default)]
pub(crate) struct KnownAgents {
    by_instance: Mutex<HashMap<i64, Arc<[String]>>>,
    /// Sends take `post` alone (a test compares both ways on one engine).
    off: AtomicBool,
    /// Sends written by the function, and answers that the agents had changed.
    written: AtomicU64,
    stale: AtomicU64,
    /// Calls of the function.
    calls: AtomicU64,
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

    /// How many sends the function wrote, and how many times it found the agents
    /// changed.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (u64, u64) {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        (n(&self.written), n(&self.stale))
    }

    /// How many times the function was called.
    #[cfg(test)]
    pub(crate) fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Every send is written by `post`, as on an engine without functions.
    #[cfg(test)]
    pub(crate) fn turn_off(&self) {
        self.off.store(true, Ordering::Relaxed);
    }

    /// Whether sends may be written by the function (tests turn it off).
    pub(super) fn on(&self) -> bool {
        !self.off.load(Ordering::Relaxed)
    }
}

/// A single send waiting to be written: by whom, what, and its rules (no contract
/// on messages in force, or it would not wait) with its time.
pub(super) struct Sending {
    pub(super) scope: Scope,
    pub(super) send: Outgoing,
    pub(super) rules: governed::Rules,
}

/// One instance's answers to its sends, in order: each refused without a write,
/// or written.
pub(super) type Answers = Vec<Result<Posted>>;

/// Writes `sends` (single sends of one instance, in the order they were made)
/// with the function; `None` when the instance's agents kept changing under it, and
/// `post` must write them. Nothing is written before it answers `None`.
pub(super) fn send_all(
    c: &Connection,
    sends: &[Sending],
    known: &KnownAgents,
) -> Result<Option<Answers>> {
    // Decided against the agents known or read, then (at most twice) against
    // those the statement found.
    let mut found = None;
    for _ in 0..3 {
        let call = send_call(c, sends, known, found.take())?;
        match read_call(c, sends, call, known)? {
            Written::Sent(answers) => return Ok(Some(answers)),
            Written::Stale(now) => found = Some(now),
        }
    }
    Ok(None)
}

/// The sends decided and the function's call sent (its answer read by [`read_call`]).
pub(super) struct Call {
    decided: Vec<Result<Decided>>,
    sent: Option<sql::Later>,
}

/// Decides `sends` against `agents` as the statement found them (`Some`), or else
/// as this kernel knows them (read again when one is refused: an agent made since
/// may be what it lacks), and sends the call for those decided to go.
pub(super) fn send_call(
    c: &Connection,
    sends: &[Sending],
    known: &KnownAgents,
    found: Option<Arc<[String]>>,
) -> Result<Call> {
    let Some(first) = sends.first() else {
        return Ok(Call {
            decided: Vec::new(),
            sent: None,
        });
    };
    let wid = first.scope.workflow_id;
    let (mut agents, mut fresh) = match (found, known.get(wid)) {
        (Some(now), _) => (now, true),
        (None, Some(a)) => (a, false),
        (None, None) => (known.set(wid, agent_names(c, wid)?), true),
    };
    let decided = loop {
        match decide_all(sends, &agents, fresh) {
            Some(d) => break d,
            None => (agents, fresh) = (known.set(wid, agent_names(c, wid)?), true),
        }
    };
    let sent = write(c, sends, (&agents, known), &decided)?;
    Ok(Call { decided, sent })
}

/// Each send decided against `agents`; `None` when one is refused and the agents
/// were remembered: an agent made since (here or on another node) may be what it
/// lacks.
fn decide_all(sends: &[Sending], agents: &[String], fresh: bool) -> Option<Vec<Result<Decided>>> {
    let mut out = Vec::with_capacity(sends.len());
    for s in sends {
        let d = decide(&s.scope, &s.send, agents).and_then(|d| match d.resource {
            // `together` queues none: `becomes_resource` is the rule `decide` keeps.
            Some(_) => Err(Error::internal(
                "a send whose text becomes a resource was queued",
            )),
            None => Ok(d),
        });
        if d.is_err() && !fresh {
            return None;
        }
        out.push(d);
    }
    Some(out)
}

pub(super) enum Written {
    Sent(Answers),
    /// Nothing was written: the instance's agents are these.
    Stale(Arc<[String]>),
}

/// A send as the function reads it (see migration 20's doc).
#[derive(serde::Serialize)]
struct Row {
    c: String,
    s: String,
    t: String,
    k: &'static str,
    o: Option<String>,
    m: String,
    p: String,
    n: i64,
    d: Vec<String>,
    b: bool,
    r: bool,
    g: bool,
    i: usize,
    a: usize,
}

/// Sends the function's call with the sends `decided` against `agents` (the
/// refused ones left out); None when every one was refused.
fn write(
    c: &Connection,
    sends: &[Sending],
    (agents, known): (&[String], &KnownAgents),
    decided: &[Result<Decided>],
) -> Result<Option<sql::Later>> {
    let mut rows: Vec<Row> = Vec::new();
    let mut hops = Hops::default();
    for (s, d) in sends.iter().zip(decided) {
        if let Ok(d) = d {
            rows.push(row(s, d, agents, &rows)?);
            hops.then(hop(&s.scope, &d.recipients));
        }
    }
    if rows.is_empty() {
        return Ok(None);
    }
    let wid = sends[0].scope.workflow_id;
    let params: [&dyn sql::ToSql; 5] = [
        &wid,
        &agents.join(","),
        &json(&rows)?,
        &hops.reset,
        &hops.add,
    ];
    known.calls.fetch_add(1, Ordering::Relaxed);
    Ok(Some(c.prepare_cached(SEND)?.query_later(&params[..])?))
}

/// The answer to the call `call` sent: each send's, or that the agents had
/// changed (nothing written).
pub(super) fn read_call(
    c: &Connection,
    sends: &[Sending],
    call: Call,
    known: &KnownAgents,
) -> Result<Written> {
    let mut answer = Answer::new(call.decided.iter().filter(|d| d.is_ok()).count());
    if let Some(sent) = call.sent {
        answer.read(c, &mut sent.rows(c)?)?;
        if let Some(agents) = answer.stale {
            known.stale.fetch_add(1, Ordering::Relaxed);
            let wid = sends[0].scope.workflow_id;
            return Ok(Written::Stale(known.set(wid, agents)));
        }
    }
    let mut written = answer.ids.into_iter().zip(answer.missed);
    let answers = sends.iter().zip(call.decided).map(|(s, d)| {
        let d = d?;
        match written.next() {
            Some((Some(id), missed)) => Ok(posted(s, d, id, missed)),
            _ => Err(Error::internal(
                "channel_send_many answered no id for a send",
            )),
        }
    });
    let answers: Answers = answers.collect();
    let n = answers.iter().filter(|a| a.is_ok()).count();
    known.written.fetch_add(n as u64, Ordering::Relaxed);
    Ok(Written::Sent(answers))
}

/// `s`, decided as `d`, as the function reads it, after `before` in its job.
fn row(s: &Sending, d: &Decided, agents: &[String], before: &[Row]) -> Result<Row> {
    let (scope, now) = (&s.scope, s.rules.now());
    let priority = mentions::priority(&d.parsed, &s.send.message);
    let m = message_row(
        scope,
        (&new_id(), now),
        d.content.clone(),
        &d.to,
        &d.recipients,
        priority,
    )?;
    let broadcast = d.to.is_none() && covers_all(&d.recipients, agents, &scope.me);
    let cursor = !outside(&scope.me);
    // The sender's cursor as its send would find it: past its last send here.
    let after = before.iter().rposition(|r| r.r && r.s == m.sender);
    Ok(Row {
        c: m.id,
        s: m.sender,
        t: m.content,
        k: m.kind,
        o: m.to,
        m: m.mentions,
        p: m.priority,
        n: now,
        // The members are the agents and the lead, so the lead is all a broadcast leaves.
        d: d.recipients
            .iter()
            .filter(|r| !broadcast || *r == LEAD)
            .cloned()
            .collect(),
        b: broadcast,
        r: cursor,
        g: !s.send.force,
        i: before.len() + 1,
        a: after.map_or(0, |i| i + 1),
    })
}

/// The answer to a send written as `d`, with the id it was given and what it missed.
fn posted(s: &Sending, d: Decided, id: String, missed: Missed) -> Posted {
    Posted {
        extra: Vec::new(),
        recipients: d.recipients.clone(),
        result: send_result(&s.scope, d, id, missed.answer(), None),
        notice: None,
    }
}

/// What the statement answered: each written send's id and the messages its guard
/// found missed, or the agents as they are (nothing written).
struct Answer {
    ids: Vec<Option<String>>,
    missed: Vec<Missed>,
    stale: Option<Vec<String>>,
}

impl Answer {
    fn new(n: usize) -> Self {
        Self {
            ids: vec![None; n],
            missed: (0..n).map(|_| Missed::default()).collect(),
            stale: None,
        }
    }

    /// Reads the statement's answer. The statement wrote unless it answered that
    /// the agents had changed, and the store cannot tell that from a SELECT: a
    /// failure after it wrote (an answer not understood) must fail its whole
    /// transaction, not leave the sends written behind an error.
    fn read(&mut self, c: &Connection, rows: &mut sql::Rows<'_>) -> Result<()> {
        let read = (|| -> Result<()> {
            while let Some(r) = rows.next()? {
                let tag = r.get_str(1)?;
                if tag == "stale" {
                    let names = r.get_str(4)?.split(',').filter(|n| !n.is_empty());
                    self.stale = Some(names.map(str::to_owned).collect());
                    continue;
                }
                let i = usize::try_from(r.get::<i64>(0)? - 1)
                    .ok()
                    .filter(|i| *i < self.ids.len())
                    .ok_or_else(|| {
                        Error::internal("channel_send_many answered a send it was not given")
                    })?;
                match tag {
                    "sent" => {
                        c.note_write();
                        self.ids[i] = Some(r.get::<String>(2)?);
                    }
                    "missed" if self.missed[i].count_one() => {
                        let text = r.get_ref(4)?.as_str().map_err(sql::Error::from)?;
                        self.missed[i].list(r.get(2)?, r.get(3)?, text);
                    }
                    "missed" => {}
                    other => {
                        return Err(Error::internal(format!(
                            "channel_send_many answered {other:?}"
                        )));
                    }
                }
            }
            Ok(())
        })();
        if read.is_err() {
            c.note_write();
        }
        read
    }
}

/// A list as the JSON text the function reads.
fn json<T: serde::Serialize + ?Sized>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::internal(e.to_string()))
}
