//! Contracts on messages, applied inside the send's transaction.
//!
//! - `deny`: nothing of the send is written (the batch rolls back to its
//!   savepoint) except the decision, and the sender gets the contract's reason.
//! - `route`: the recipients the contract's `to` matches get no delivery; the
//!   route's member gets a system note quoting the message and decides: it forwards
//!   it (sending it itself, which no route of its own turns back) or drops it. A
//!   routed direct message becomes a direct message to that member. Routing governs
//!   delivery (inboxes and wakes); the channel still holds the message.
//! - `notify`: the named members get a system note.
//! - `allow`: exempts the message from routing.
//! - A rate (`more_than` within a window) counts the sender's messages in the
//!   same transaction; a refused send rolls its count back with everything else.
//!
//! Contracts govern agents: the lead's (and the kernel's) messages pass as sent.
//! With no message contract in force this costs nothing: [`Rules::of`] is empty.

use super::rows::Rows;
use super::{Outgoing, Posted, post_system, post_system_direct_at, post_system_to, preview};
use crate::Scope;
use crate::governance::contracts::{Contracts, Decision, in_force, record_tx};
use crate::governance::rates;
use domain::contracts::{self, Contract, Event as Ev, When};
use domain::error::{Error, Result};
use domain::names::SYSTEM;
use domain::permissions::glob;
use std::cell::RefCell;
use store::sql::Connection;

/// The message contracts in force for one send, and its time.
pub(super) struct Rules {
    contracts: Vec<Contract>,
    /// When the send happens (ms since the epoch): its rows' stamp.
    now: i64,
    /// The decision of a refused send: recorded after the rollback.
    refused: RefCell<Option<Decision>>,
}

/// What the contracts did to one message.
#[derive(Default)]
pub(super) struct Governed {
    pub(super) note: Option<String>,
    /// The `allow` of urgent messages that lets this (non-lead) sender send one.
    pub(super) urgent_by: Option<String>,
    /// (contract, member, recipients it took over)
    routed: Vec<(String, String, Vec<String>)>,
    notify: Vec<(String, Vec<String>)>,
    decision: Option<Decision>,
    recipients: Vec<String>,
    /// A direct message (after routing): the kernel's notes about it are direct too.
    direct: bool,
    /// The instance's members, the only ones a direct note can be for.
    members: Vec<String>,
}

impl Rules {
    pub(super) fn none(now: i64) -> Self {
        Self {
            contracts: Vec::new(),
            now,
            refused: RefCell::new(None),
        }
    }

    /// When the send happens.
    pub(super) fn now(&self) -> i64 {
        self.now
    }

    /// Whether any contract on messages is in force for this send.
    pub(super) fn any(&self) -> bool {
        !self.contracts.is_empty()
    }

    pub(super) fn of(contracts: &Contracts, scope: &Scope, now: i64) -> Self {
        let all = contracts.all();
        Self {
            now,
            contracts: in_force(&all, scope.workflow_id, &scope.workflow)
                .filter(|c| matches!(c.when, When::Message { .. }))
                .cloned()
                .collect(),
            refused: RefCell::new(None),
        }
    }

    /// Applies the contracts to a message about to be written: may refuse it,
    /// take recipients away (routing) or change a direct message's addressee.
    pub(super) fn apply(
        &self,
        c: &Connection,
        scope: &Scope,
        (text, urgent): (&str, bool),
        members: &[String],
        recipients: &mut Vec<String>,
        to: &mut Option<String>,
    ) -> Result<Governed> {
        if self.contracts.is_empty() || scope.me == SYSTEM || scope.lead {
            return Ok(Governed::default());
        }
        // A direct message's recipients are its addressee: each name once.
        let mut addressed: Vec<String> = Vec::new();
        for r in to.iter().chain(recipients.iter()) {
            if !addressed.contains(r) {
                addressed.push(r.clone());
            }
        }
        let event = Ev::Message {
            from: &scope.me,
            to: &addressed,
            text,
            urgent,
        };
        let past = rates::count_tx(
            c,
            scope.workflow_id,
            &scope.me,
            &self.contracts,
            &event,
            self.now,
        )?;
        let v = contracts::decide_rated(&self.contracts, &event, |k| past.contains(&k.name));
        if !v.any() {
            return Ok(Governed::default());
        }
        let detail = format!("to {}: {}", addressed.join(", "), preview(text));
        let decision = Decision::of(scope.workflow_id, &scope.me, "message", &detail, &v);
        if let Some((_, why, _)) = &v.deny {
            *self.refused.borrow_mut() = Some(decision);
            return Err(Error::forbidden(format!("{why} (nothing was sent)")));
        }
        let urgent_by = self.urgent_allow(&event);
        let mut routed = Vec::new();
        for (name, member) in &v.routes {
            if member.eq_ignore_ascii_case(&scope.me) {
                continue;
            }
            let Some(member) = members.iter().find(|m| m.eq_ignore_ascii_case(member)) else {
                continue;
            };
            let pattern = self
                .contracts
                .iter()
                .find(|c| c.name == *name)
                .and_then(|c| match &c.when {
                    When::Message { to, .. } => to.clone(),
                    _ => None,
                });
            let taken: Vec<String> = addressed
                .iter()
                .filter(|r| !r.eq_ignore_ascii_case(member))
                .filter(|r| {
                    pattern
                        .as_ref()
                        .is_none_or(|g| glob(&g.to_ascii_lowercase(), &r.to_ascii_lowercase()))
                })
                .cloned()
                .collect();
            if taken.is_empty() {
                continue;
            }
            recipients.retain(|r| !taken.contains(r));
            if to.as_ref().is_some_and(|t| taken.contains(t)) {
                *to = Some(member.clone());
            }
            routed.push((name.clone(), member.clone(), taken));
        }
        Ok(Governed {
            note: routed_note(&routed),
            urgent_by,
            routed,
            notify: v.notify.clone(),
            decision: Some(decision),
            recipients: addressed,
            direct: to.is_some(),
            members: members.to_vec(),
        })
    }
}

impl Rules {
    /// The `allow` of urgent messages that lets this one be sent: only one written
    /// for urgent messages does (an allow of a sender's messages in general does
    /// not).
    fn urgent_allow(&self, event: &Ev) -> Option<String> {
        self.contracts
            .iter()
            .filter(|k| matches!(k.when, When::Message { urgent: true, .. }))
            .filter(|k| matches!(k.then, contracts::Then::Allow) && k.rate.is_none())
            .find(|k| contracts::matches(k, event))
            .map(|k| k.name.clone())
    }
}

/// What the sender is told of the routes that took its message.
fn routed_note(routed: &[(String, String, Vec<String>)]) -> Option<String> {
    (!routed.is_empty()).then(|| {
        routed
            .iter()
            .map(|(c, m, taken)| {
                format!(
                    "contract \"{c}\" routed this to @{m} first instead of {} (@{m} forwards it or drops it)",
                    taken.join(", ")
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    })
}

impl Governed {
    /// Once the message is written (at `now`): the decision and the kernel's notes.
    pub(super) fn after(
        &self,
        c: &Connection,
        scope: &Scope,
        (id, text): (&str, &str),
        now: i64,
    ) -> Result<Vec<Posted>> {
        let Some(d) = &self.decision else {
            return Ok(Vec::new());
        };
        record_tx(c, d, now)?;
        // Quoted text never mentions anyone by accident.
        let quote = preview(text).replace('@', "");
        let mut out = Vec::new();
        let (wid, wf) = (scope.workflow_id, &scope.workflow);
        for (contract, member, taken) in &self.routed {
            let text = format!(
                "@{member} contract \"{contract}\": a message from {} for {} was routed to you (id {id}): «{quote}». \
                 Forward it by sending it yourself (mention them), or drop it.",
                scope.me,
                taken.join(", "),
            );
            out.push(match self.direct {
                true => post_system_direct_at(c, (wid, wf), member, text, now)?,
                false => post_system(c, wid, wf, text, now)?,
            });
        }
        for (contract, to) in &self.notify {
            let text = format!(
                "contract \"{contract}\": {} sent a message to {} (id {id}): «{quote}».",
                scope.me,
                if self.recipients.is_empty() {
                    "nobody".into()
                } else {
                    self.recipients.join(", ")
                }
            );
            if !self.direct {
                out.push(post_system_to(c, wid, wf, to, &text, now)?);
                continue;
            }
            // One direct note per member told; a name of no member reaches nobody,
            // as its mention would not.
            for m in to
                .iter()
                .filter_map(|m| self.members.iter().find(|x| x.eq_ignore_ascii_case(m)))
            {
                out.push(post_system_direct_at(
                    c,
                    (wid, wf),
                    m,
                    format!("@{m} {text}"),
                    now,
                )?);
            }
        }
        Ok(out)
    }
}

/// How one message is written (see `post` in the module above): its rows gathered.
pub(super) type Post = fn(
    &Connection,
    &Scope,
    &Outgoing,
    &Rules,
    (&[String], &mut Rows, Option<super::guard::Ahead>),
) -> Result<Posted>;

/// Writes a batch of messages through `post`, the instance's agents read once for
/// all of them, together with the first one's guard scan (see
/// [`super::guard::Ahead`]). A refusal by a contract rolls the batch back (all or
/// none) but keeps its decision; it is returned inside `Ok` so that the store
/// commits the decision.
pub(super) fn post_all(
    c: &Connection,
    scope: &Scope,
    sends: &[Outgoing],
    rules: &Rules,
    post: Post,
) -> Result<Result<Vec<Posted>>> {
    // Where several nodes may write the instance, its greatest id comes first (the
    // ids are kept above it), so the first send's scan is not sent ahead.
    let several = c.server_functions();
    let mut ahead = match sends.first() {
        Some(first) if !several => super::guard::scan_ahead(c, scope, first)?,
        _ => None,
    };
    let top = several
        .then(|| super::guard::greatest_id(c, scope.workflow_id))
        .transpose()?;
    let agents = crate::registry::agent_names(c, scope.workflow_id)?;
    let mut rows = Rows::new(scope.workflow_id, rules.now);
    if let Some(top) = top {
        rows.above(top);
    }
    if rules.contracts.is_empty() {
        let posted = sends
            .iter()
            .map(|m| post(c, scope, m, rules, (&agents, &mut rows, ahead.take())))
            .collect::<Result<Vec<_>>>()?;
        rows.write(c)?;
        return Ok(Ok(posted));
    }
    c.execute_batch("SAVEPOINT governed_sends")?;
    let mut out = Vec::new();
    for m in sends {
        match post(c, scope, m, rules, (&agents, &mut rows, ahead.take())) {
            Ok(p) => out.push(p),
            Err(e) => {
                let refused = rules.refused.borrow_mut().take();
                c.execute_batch("ROLLBACK TO governed_sends; RELEASE governed_sends")?;
                return match refused {
                    Some(d) => {
                        record_tx(c, &d, rules.now)?;
                        Ok(Err(e))
                    }
                    None => Err(e),
                };
            }
        }
    }
    rows.write(c)?;
    c.execute_batch("RELEASE governed_sends")?;
    Ok(Ok(out))
}
