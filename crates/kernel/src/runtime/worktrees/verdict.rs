//! A contract verdict on a merge, recorded in one transaction: its notices, the
//! refusal or the approval that holds the merge, and the decision log.

use crate::governance::approvals::{self, NewApproval};
use crate::governance::contracts::{Decision, record_tx};
use crate::messaging::post_system_to;
use crate::runtime::voting::{contract_list, open_approval_tx};
use domain::contracts;
use domain::error::Result;
use domain::names::WorkflowRef;

/// What a verdict on a merge is about, to record in one transaction.
pub(super) struct VerdictOf {
    pub(super) workflow_id: i64,
    pub(super) workflow: WorkflowRef,
    pub(super) agent_id: i64,
    pub(super) agent: String,
    pub(super) detail: String,
    pub(super) held: String,
}

/// What recording a verdict gives: the posts to announce, and Err (refused, why),
/// Ok(None) (go on) or Ok(Some((approval, its timeout when just asked))).
type Recorded = (
    Vec<crate::messaging::Posted>,
    std::result::Result<Option<(i64, Option<std::time::Duration>)>, String>,
);

impl VerdictOf {
    /// Writes a verdict: its notices, the refusal or the approval that holds the
    /// merge (the same pending one when asked again), and the decision log, at `now`.
    pub(super) fn record_tx(
        &self,
        c: &store::sql::Connection,
        v: &contracts::Verdict,
        now: i64,
    ) -> Result<Recorded> {
        let (wid, wf, name, d2) = (self.workflow_id, &self.workflow, &self.agent, &self.detail);
        let mut posted = Vec::new();
        for (contract, to) in &v.notify {
            record_tx(
                c,
                &Decision::new(wid, name, "merge", d2, vec![contract.clone()], "notified"),
                now,
            )?;
            posted.push(post_system_to(
                c,
                wid,
                wf,
                to,
                &format!("contract \"{contract}\": {d2}."),
                now,
            )?);
        }
        if let Some((contract, reason, _)) = &v.deny {
            record_tx(
                c,
                &Decision {
                    reason: Some(reason.clone()),
                    ..Decision::new(wid, name, "merge", d2, vec![contract.clone()], "denied")
                },
                now,
            )?;
            return Ok((
                posted,
                Err(format!(
                    "contract \"{contract}\" refuses this merge: {reason}"
                )),
            ));
        }
        let Some(a) = &v.approval else {
            return Ok((posted, Ok(None)));
        };
        if let Some(id) = approvals::pending_held(c, wid, &self.held)? {
            return Ok((posted, Ok(Some((id, None)))));
        }
        let new = NewApproval {
            workflow_id: wid,
            agent_id: self.agent_id,
            agent: name.clone(),
            run_id: None,
            event: "merge".into(),
            detail: d2.clone(),
            approval: a.clone(),
        };
        let (id, post) = open_approval_tx(
            c,
            wf,
            new,
            &format!("merge {d2}"),
            now,
            |id, a, too_few| {
                format!(
                    "approval {id}: merge {d2} (contract {}{too_few}); it is done when you approve with \
                 approval_decide {{\"id\": {id}, \"decision\": \"approve\"}}, or not with \"deny\" (within {}).",
                    contract_list(a),
                    humantime::format_duration(a.timeout)
                )
            },
        )?;
        approvals::set_held_tx(c, id, &self.held)?;
        posted.push(post);
        Ok((posted, Ok(Some((id, Some(a.timeout))))))
    }
}
