//! Who a message is from, and what follows from it: the lead's message starts the
//! hop count over and an agent's to another agent adds one; a sender's reading
//! moves past its own message unless it is no member (the kernel, a hook); an
//! urgent message is the lead's, or a member's a contract allows; a hook's post
//! is sent as `hook:<name>`.

use super::{Messaging, Outgoing, SendResult, rows};
use crate::Scope;
use domain::error::{Error, Result};
use domain::names::{HOOK_SENDER, LEAD, SYSTEM};

impl Messaging {
    /// Posts what hook `hook` delivered in the instance `scope` names, as
    /// `hook:<name>`: governed by the hook's contracts, not by those on messages
    /// (as the lead's); it resets no hop count, moves no cursor, and its direct
    /// messages to an agent are the lead's to read too (channel_read).
    pub(crate) async fn hook_post(
        &self,
        scope: &Scope,
        hook: &str,
        send: Outgoing,
    ) -> Result<SendResult> {
        let scope = Scope {
            me: format!("{HOOK_SENDER}{hook}"),
            // Passes as the lead's does: a long payload becomes a resource.
            lead: true,
            run_id: None,
            ..scope.clone()
        };
        self.channel_send(
            &scope,
            Outgoing {
                urgent: false,
                ..send
            },
        )
        .await
    }
}

/// Whether `sender` is no member: the kernel, or a hook. Its post counts no hop
/// and moves no reader's cursor (it reads nothing).
pub(super) fn outside(sender: &str) -> bool {
    sender == SYSTEM || sender.starts_with(HOOK_SENDER)
}

/// The priority of a message that stops its addressee's turn.
pub const URGENT: &str = "urgent";

/// Why sub-agent `me` may not send urgent though a contract names it: it is never
/// the member its name would say (as in an organisation or an approval).
pub(super) fn sub_agent_urgent(me: &str) -> Error {
    Error::forbidden(format!(
        "you are {me}, made by another agent: a sub-agent never stops a turn (whatever its \
         name); send it without urgent, it reaches a running sdk agent at its next step"
    ))
}

/// Why an urgent message cannot be sent, if it cannot: only the lead, or a member
/// a contract's `allow` of urgent messages names (`allowed`), may stop a turn,
/// and only of one agent, named in `to`.
pub(super) fn urgent_to(
    scope: &Scope,
    to: Option<&str>,
    agents: &[String],
    allowed: bool,
) -> Result<()> {
    if scope.me == SYSTEM || !(scope.lead || allowed) {
        return Err(Error::forbidden(format!(
            "urgent: only the lead may stop an agent's turn, or a member a contract allows; send it \
             without urgent (it reaches a running sdk agent at its next step), or ask the lead for a \
             contract {{when: {{event: message, from: {}, urgent: true}}, then: {{action: allow}}}}",
            scope.me
        )));
    }
    match to {
        Some(t) if agents.iter().any(|a| a == t) => Ok(()),
        _ => Err(Error::invalid(
            "urgent needs `to`: the agent whose turn it stops (a direct message to one agent)",
        )),
    }
}

/// What a message does to the hop guard's count (see guards.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Hop {
    Keep,
    /// The lead spoke: the count starts over.
    Reset,
    /// An agent's message reached another agent.
    Add,
}

/// The hop guard's count: the lead's message resets it; an agent's message that
/// reaches another agent adds one.
pub(super) fn hop(scope: &Scope, recipients: &[String]) -> Hop {
    if scope.me == LEAD {
        Hop::Reset
    } else if !outside(&scope.me) && recipients.iter().any(|r| r != LEAD) {
        Hop::Add
    } else {
        Hop::Keep
    }
}

/// [`hop`] gathered in `rows`.
pub(super) fn count_hop(scope: &Scope, recipients: &[String], rows: &mut rows::Rows) {
    rows.hop(hop(scope, recipients));
}

/// The hop moves of a job's messages as one: set to `add` after the last reset
/// (`reset`), or raised by `add`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Hops {
    pub(super) reset: bool,
    pub(super) add: i64,
}

impl Hops {
    /// The moves so far, then `h`.
    pub(super) fn then(&mut self, h: Hop) {
        match h {
            Hop::Keep => {}
            Hop::Add => self.add += 1,
            Hop::Reset => {
                *self = Hops {
                    reset: true,
                    add: 0,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Hop, Hops};

    /// A job's hop moves, folded in order as `Rows` and the sends' function apply
    /// them: set to the adds after the last reset, or raised by them.
    #[test]
    fn a_job_s_hop_moves_fold_into_one() {
        let check = |moves: &[Hop], expect: (bool, i64)| {
            let mut h = Hops::default();
            for m in moves {
                h.then(*m);
            }
            assert_eq!((h.reset, h.add), expect, "{moves:?}");
        };
        use Hop::*;
        check(&[], (false, 0));
        check(&[Keep, Keep], (false, 0));
        check(&[Add, Keep, Add], (false, 2));
        check(&[Add, Reset], (true, 0));
        check(&[Add, Reset, Add, Keep, Add], (true, 2));
        check(&[Reset, Add, Reset], (true, 0));
    }
}
