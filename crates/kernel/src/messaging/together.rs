//! Single sends of one instance written together, where the database runs
//! functions (PostgreSQL).
//!
//! Why: one instance's writes are one writer connection's, one statement at a
//! time, and on PostgreSQL each statement is a round trip to another process:
//! sixteen sessions sending at once waited on sixteen round trips each commit.
//! Here a send is queued on its instance; the first queued starts a writer job,
//! which takes every send queued by the time it runs and writes them with one
//! statement ([`one::send_all`]). Sends queued while that job waits or runs are
//! the next job's. A send's answer comes after the commit, as alone.
//!
//! The job runs in a task of its own, so a caller that gives up does not strand
//! the sends that wait on the job it started. When the job fails, every send it
//! took is told so and was not written; a job that never ran (another job of its
//! transaction failed, or the database could not begin) is tried again, and after
//! [`TRIES`] the sends queued are told. Each send's events are published under the
//! trace of the call that made it.

use super::one::{self, Answers, KnownAgents, Sending};
use super::{Posted, announce, governed};
use crate::events::Events;
use domain::error::{Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use store::sql::Connection;
use store::{Isolation, Store, WriteScope};
use tokio::sync::oneshot;

/// The most sends one job writes; a burst beyond it takes more jobs.
const MOST: usize = 256;

/// How many times a job that never ran is tried before its sends are failed.
const TRIES: usize = 3;

/// Who waits on a queued send: its answer's channel, and the trace of its call.
struct Waiter {
    reply: oneshot::Sender<Result<Posted>>,
    trace: Option<telemetry::Context>,
}

/// The sends queued per instance. An instance is here while a job of it is under
/// way (its queue possibly empty), and only then.
#[derive(Default)]
pub(crate) struct Together {
    queued: Mutex<HashMap<i64, Vec<(Sending, Waiter)>>>,
}

impl Together {
    /// Queues `s`; true when no job of its instance is under way (the caller then
    /// starts one).
    fn queue(&self, s: Sending, w: Waiter) -> bool {
        let mut q = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        let wid = s.scope.workflow_id;
        let first = !q.contains_key(&wid);
        q.entry(wid).or_default().push((s, w));
        first
    }

    /// The instance's sends queued, the oldest first, at most [`MOST`].
    fn take(&self, wid: i64) -> Vec<(Sending, Waiter)> {
        let mut q = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        let Some(list) = q.get_mut(&wid) else {
            return Vec::new();
        };
        let n = list.len().min(MOST);
        list.drain(..n).collect()
    }

    /// True, and the instance forgotten, when none of its sends is queued: the next
    /// send starts a job.
    fn done(&self, wid: i64) -> bool {
        let mut q = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        let empty = q.get(&wid).is_none_or(Vec::is_empty);
        if empty {
            q.remove(&wid);
        }
        empty
    }

    /// Forgets the instance and its queued sends, whose callers are then told their
    /// job ended without an answer (the task writing them ended unexpectedly).
    fn abandon(&self, wid: i64) {
        let mut q = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        q.remove(&wid);
    }
}

/// Forgets the instance's queue if its task ends other than by finding it empty
/// (cancelled with its runtime, or a panic): else every later send of the instance
/// would wait on a task that is gone.
/// Made before the task is spawned, so that a task dropped before it ever ran
/// drops it too.
struct Running {
    together: Arc<Together>,
    wid: i64,
    done: bool,
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.done {
            self.together.abandon(self.wid);
        }
    }
}

/// What the task writing an instance's queued sends needs.
#[derive(Clone)]
pub(super) struct Writer {
    pub(super) store: Store,
    pub(super) events: Events,
    pub(super) known: Arc<KnownAgents>,
    pub(super) together: Arc<Together>,
}

impl Writer {
    /// Queues `s` and waits for its answer, starting its instance's job if none is
    /// under way.
    pub(super) async fn send(&self, s: Sending) -> Result<Posted> {
        let (reply, rx) = oneshot::channel();
        let wid = s.scope.workflow_id;
        let trace = telemetry::current_parent();
        if self.together.queue(s, Waiter { reply, trace }) {
            let running = Running {
                together: self.together.clone(),
                wid,
                done: false,
            };
            tokio::spawn(self.clone().run(running));
        }
        rx.await.unwrap_or_else(|_| {
            Err(Error::internal(
                "the job writing the send ended without an answer",
            ))
        })
    }

    /// Jobs of the instance `running` names until none of its sends is queued.
    async fn run(self, mut running: Running) {
        let wid = running.wid;
        let mut unrun = 0;
        loop {
            let (waiters, written) = self.job(wid).await;
            match written {
                Ok(answers) => {
                    for (w, answer) in waiters.into_iter().zip(answers) {
                        if let Ok(p) = &answer {
                            let _in_trace = w.trace.map(telemetry::Context::attach);
                            announce(&self.events, wid, p);
                        }
                        let _ = w.reply.send(answer);
                    }
                }
                Err(e) if waiters.is_empty() => {
                    // The job never ran: try again, then give up on the sends queued.
                    unrun += 1;
                    if unrun == TRIES {
                        unrun = 0;
                        for (_, w) in self.together.take(wid) {
                            let _ = w.reply.send(Err(same(&e)));
                        }
                    }
                }
                Err(e) => {
                    for w in waiters {
                        let _ = w.reply.send(Err(same(&e)));
                    }
                }
            }
            if self.together.done(wid) {
                running.done = true;
                return;
            }
        }
    }

    /// One job of instance `wid`: those it took, and what it wrote (an error if it
    /// never ran, with none taken).
    async fn job(&self, wid: i64) -> (Vec<Waiter>, Result<Answers>) {
        let taken: Arc<Mutex<Vec<Waiter>>> = Arc::default();
        let (together, known, into) = (self.together.clone(), self.known.clone(), taken.clone());
        let written = self
            .store
            .write_as(
                WriteScope::Instance(wid),
                Isolation::ChecksFirst,
                move |c| {
                    let (sends, waiters): (Vec<Sending>, Vec<Waiter>) =
                        together.take(wid).into_iter().unzip();
                    *into.lock().unwrap_or_else(|e| e.into_inner()) = waiters;
                    write(c, &sends, &known)
                },
            )
            .await;
        let waiters = std::mem::take(&mut *taken.lock().unwrap_or_else(|e| e.into_inner()));
        (waiters, written)
    }
}

/// Writes `sends` with the function, or (when the instance's agents kept
/// changing under it) one by one through `post`.
fn write(c: &Connection, sends: &[Sending], known: &KnownAgents) -> Result<Answers> {
    if let Some(answers) = one::send_all(c, sends, known)? {
        return Ok(answers);
    }
    let each = sends.iter().map(|s| {
        let one = std::slice::from_ref(&s.send);
        match governed::post_all(c, &s.scope, one, &s.rules, super::post) {
            Ok(Ok(mut posted)) if posted.len() == 1 => Ok(posted.remove(0)),
            Ok(Ok(_)) => Err(Error::internal("post wrote other than the one send")),
            Ok(Err(e)) | Err(e) => Err(e),
        }
    });
    Ok(each.collect())
}

/// `e` again, for each send of a job that failed.
fn same(e: &Error) -> Error {
    match e {
        Error::Invalid(m) => Error::Invalid(m.clone()),
        Error::NotFound(m) => Error::NotFound(m.clone()),
        Error::Conflict(m) => Error::Conflict(m.clone()),
        Error::Forbidden(m) => Error::Forbidden(m.clone()),
        Error::Store(inner) => Error::Store(inner.to_string().into()),
        Error::Unavailable(m) => Error::Unavailable(m.clone()),
        Error::Internal(m) => Error::Internal(m.clone()),
    }
}
