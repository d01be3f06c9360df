//! A contract verdict on an action the runtime holds (a merge, an agent making an
//! agent), recorded in one transaction: its notices, the refusal or the approval
//! that holds the action, and the decision log.

use crate::governance::approvals::{self, NewApproval};
use crate::governance::contracts::{Decision, record_tx};
use crate::messaging::post_system_to;
use crate::runtime::voting::{contract_list, open_approval_tx};
use domain::contracts;
use domain::error::Result;
use domain::names::WorkflowRef;

/// What a verdict is about, to record in one transaction.
pub(crate) struct VerdictOf {
    pub(crate) workflow_id: i64,
    pub(crate) workflow: WorkflowRef,
    pub(crate) agent_id: i64,
    pub(crate) agent: String,
    /// The run acting, if one is.
    pub(crate) run_id: Option<String>,
    /// The contracts' event word (`merge`, `agent_new`).
    pub(crate) event: &'static str,
    pub(crate) detail: String,
    /// What the approval's post calls the action.
    pub(crate) title: String,
    /// Kept with the approval, so that asking again finds the pending one.
    pub(crate) held: Option<String>,
    /// A refusal says "contract C refuses <this>: why" (None: the reason alone).
    pub(crate) refuses: Option<&'static str>,
    /// The approval's post says the action is done once approved (else that it
    /// waits for the decision).
    pub(crate) done_when_approved: bool,
}

/// What recording a verdict gives: the posts to announce, and Err (refused, why),
/// Ok(None) (go on) or Ok(Some((approval, its timeout when just asked))).
pub(crate) type Recorded = (
    Vec<crate::messaging::Posted>,
    std::result::Result<Option<(i64, Option<std::time::Duration>)>, String>,
);

impl VerdictOf {
    /// Writes a verdict: its notices, the refusal or the approval that holds the
    /// action (the same pending one when asked again), and the decision log, at `now`.
    pub(crate) fn record_tx(
        &self,
        c: &store::sql::Connection,
        v: &contracts::Verdict,
        now: i64,
    ) -> Result<Recorded> {
        let (wid, wf, name, d2) = (self.workflow_id, &self.workflow, &self.agent, &self.detail);
        let decision = |contract: &String, outcome| {
            Decision::new(wid, name, self.event, d2, vec![contract.clone()], outcome)
        };
        let mut posted = Vec::new();
        for (contract, to) in &v.notify {
            record_tx(c, &decision(contract, "notified"), now)?;
            let text = format!("contract \"{contract}\": {d2}.");
            posted.push(post_system_to(c, wid, wf, to, &text, now)?);
        }
        if let Some((contract, reason, _)) = &v.deny {
            let d = Decision {
                reason: Some(reason.clone()),
                ..decision(contract, "denied")
            };
            record_tx(c, &d, now)?;
            let why = match self.refuses {
                Some(what) => format!("contract \"{contract}\" refuses {what}: {reason}"),
                None => reason.clone(),
            };
            return Ok((posted, Err(why)));
        }
        let Some(a) = &v.approval else {
            return Ok((posted, Ok(None)));
        };
        if let Some(held) = &self.held
            && let Some(id) = approvals::pending_held(c, wid, held)?
        {
            return Ok((posted, Ok(Some((id, None)))));
        }
        let new = NewApproval {
            workflow_id: wid,
            agent_id: self.agent_id,
            agent: name.clone(),
            run_id: self.run_id.clone(),
            event: self.event.into(),
            detail: d2.clone(),
            approval: a.clone(),
        };
        let (id, post) = open_approval_tx(c, wf, new, &self.title, now, |id, a, too_few| {
            let decide = format!("approval_decide {{\"id\": {id}, \"decision\": \"approve\"}}");
            let until = if self.done_when_approved {
                format!("it is done when you approve with {decide}, or not with \"deny\"")
            } else {
                format!("it waits until you decide with {decide} or \"deny\"")
            };
            format!(
                "approval {id}: {} (contract {}{too_few}); {until} (within {}).",
                self.title,
                contract_list(a),
                humantime::format_duration(a.timeout)
            )
        })?;
        if let Some(held) = &self.held {
            approvals::set_held_tx(c, id, held)?;
        }
        posted.push(post);
        Ok((posted, Ok(Some((id, Some(a.timeout))))))
    }
}
