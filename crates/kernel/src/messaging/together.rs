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

use super::one::{self, Answers, KnownAgents, Sending, Written};
use super::{Posted, announce, governed};
use crate::events::Events;
use domain::error::{Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use store::sql::Connection;
use store::{Isolation, Rest, Store, Then, WriteScope};
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
        // Piped: its call goes out with the other piped jobs of its transaction
        // (inbox reads, acks), and its answer is read with theirs.
        let written = self
            .store
            .write_piped(WriteScope::Instance(wid), move |c| {
                let (sends, waiters): (Vec<Sending>, Vec<Waiter>) =
                    together.take(wid).into_iter().unzip();
                *into.lock().unwrap_or_else(|e| e.into_inner()) = waiters;
                let call = one::send_call(c, &sends, &known, None)?;
                let rest: Rest<Answers> = Box::new(move |c| {
                    Ok(match one::read_call(c, &sends, call, &known)? {
                        Written::Sent(answers) => Then::Done(answers),
                        // Nothing was written (the agents had changed): as a job alone.
                        Written::Stale(_) => Then::Again(
                            Isolation::ChecksFirst,
                            Box::new(move |c| write(c, &sends, &known)),
                        ),
                    })
                });
                Ok(rest)
            })
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

#[cfg(test)]
mod tests {
    use super::{MOST, Together, Waiter};
    use crate::Scope;
    use crate::messaging::{Outgoing, governed::Rules, one::Sending};
    use tokio::sync::oneshot;

    fn queue(
        t: &Together,
        wid: i64,
        text: &str,
    ) -> (
        bool,
        oneshot::Receiver<domain::error::Result<super::Posted>>,
    ) {
        let scope = Scope {
            workflow: domain::names::WorkflowRef::global(),
            workflow_id: wid,
            me: "alice".into(),
            lead: false,
            run_id: None,
        };
        let send = Outgoing {
            message: text.into(),
            ..Default::default()
        };
        let (reply, rx) = oneshot::channel();
        let s = Sending {
            scope,
            send,
            rules: Rules::none(0),
        };
        (t.queue(s, Waiter { reply, trace: None }), rx)
    }

    /// Who starts an instance's task, what a job takes (the oldest first, at most
    /// MOST), when the instance is forgotten, and that abandoning it answers its
    /// waiters.
    #[test]
    fn an_instance_s_queue_starts_one_task_and_gives_sends_in_order() {
        let t = Together::default();
        let mut waiting = Vec::new();
        for i in 0..MOST + 2 {
            let (first, rx) = queue(&t, 1, &format!("m{i}"));
            assert_eq!(
                first,
                i == 0,
                "only the first send of an instance starts its task"
            );
            waiting.push(rx);
        }
        assert!(
            queue(&t, 2, "other").0,
            "another instance has a task of its own"
        );
        let taken: Vec<String> = t.take(1).into_iter().map(|(s, _)| s.send.message).collect();
        assert_eq!(taken.len(), MOST);
        assert_eq!(
            (taken[0].as_str(), taken[MOST - 1].as_str()),
            ("m0", "m255")
        );
        assert!(!t.done(1), "two still queued");
        assert!(!queue(&t, 1, "later").0, "its task is still under way");
        let rest: Vec<String> = t.take(1).into_iter().map(|(s, _)| s.send.message).collect();
        assert_eq!(rest, ["m256", "m257", "later"]);
        assert!(t.done(1));
        let (first, mut anew) = queue(&t, 1, "anew");
        assert!(first, "a done instance's next send starts a task");
        assert!(matches!(
            anew.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        ));
        t.abandon(1);
        let closed = matches!(anew.try_recv(), Err(oneshot::error::TryRecvError::Closed));
        assert!(closed, "an abandoned send is answered: its job ended");
        assert!(
            queue(&t, 1, "after").0,
            "an abandoned instance's next send starts a task"
        );
        drop(waiting);
    }
}
