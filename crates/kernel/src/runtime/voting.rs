//! Opening an approval: to its approvers, or as a vote of the members, a proposal
//! they answer with team_vote (`context::proposals::held`). Tool requests and
//! merges open theirs here.

use crate::context::proposals::held;
use crate::governance::approvals::{self, NewApproval};
use crate::messaging::{Posted, post_system_to};
use crate::registry::agent_names;
use crate::registry::orgs;
use domain::contracts::Approval;
use domain::error::Result;
use domain::names::{LEAD, WorkflowRef};
use store::sql::Connection;

/// Opens approval `a` and tells who decides it: its approvers (`tell` writes the
/// message, given the approval and why the lead decides a vote, if so), or, for a
/// vote of the members, the proposal `title` they vote on (every agent of the
/// instance but the asker becomes an approver, and the count what the vote needs
/// of them). With too few members to give what the vote needs, the lead decides,
/// told why. All of it at `now`.
pub(crate) fn open_approval_tx(
    c: &Connection,
    wf: &WorkflowRef,
    mut a: NewApproval,
    title: &str,
    now: i64,
    tell: impl FnOnce(i64, &Approval, &str) -> String,
) -> Result<(i64, Posted)> {
    let (wid, name) = (a.workflow_id, a.agent.clone());
    // The members: for an instance run within an organisation, its people and its
    // agent members that are agents of the instance (who can vote here); else the
    // instance's agents.
    let org = orgs::of_tx(c, wid)?;
    let voters: Vec<String> = match a.approval.votes.is_empty() {
        false => match &org {
            Some(_) => orgs::voters_tx(c, wid)?,
            None => agent_names(c, wid)?,
        }
        .into_iter()
        .filter(|m| !m.eq_ignore_ascii_case(&name))
        .collect(),
        true => Vec::new(),
    };
    let needed = a
        .approval
        .votes_needed(voters.len())
        .filter(|n| *n <= voters.len());
    let mut too_few = String::new();
    if let Some(n) = needed {
        for m in &voters {
            if !a
                .approval
                .approvers
                .iter()
                .any(|x| x.eq_ignore_ascii_case(m))
            {
                a.approval.approvers.push(m.clone());
            }
        }
        a.approval.count = a.approval.count.max(n);
    } else if let Some(asked) = a.approval.votes_text() {
        too_few = format!(
            "; the contract asks a vote of {asked} of the members, and {name} has {} other member(s), \
             so you decide",
            voters.len()
        );
        a.approval.votes.clear();
    }
    if a.approval.approvers.is_empty() {
        a.approval.approvers.push(LEAD.to_owned());
        a.approval.count = 1;
    }
    let id = approvals::insert_tx(c, &a, now)?;
    let a = a.approval;
    if let Some(needed) = needed {
        let vote = held::NewVote {
            workflow_id: wid,
            workflow: wf,
            approval_id: id,
            title: title.to_owned(),
            asker: &name,
            voters: &voters,
            needed,
            deadline_ms: approvals::get(c, id)?.map_or(0, |r| r.deadline_ms()),
        };
        let (_, mut posted) = held::open_tx(c, &vote, now)?;
        let text = format!(
            "approval {id} (\"{title}\") waits for a vote of the members, {needed} of {} for it: decide \
             it with approval_decide {{\"id\": {id}, \"decision\": \"approve\"}} or \"deny\".",
            voters.len()
        );
        tell_in_org(c, (wid, wf, now), org, &a.approvers, &text, &mut posted)?;
        return Ok((id, posted));
    }
    let text = tell(id, &a, &too_few);
    let mut posted = post_system_to(c, wid, wf, &a.approvers, &text, now)?;
    tell_in_org(c, (wid, wf, now), org, &a.approvers, &text, &mut posted)?;
    Ok((id, posted))
}

/// Approvers who are members of the instance's organisation but not agents of
/// the instance are told in the organisation's channel (with the post `posted`) at
/// `now`.
fn tell_in_org(
    c: &Connection,
    (wid, wf, now): (i64, &WorkflowRef, i64),
    org: Option<(i64, WorkflowRef, Vec<String>)>,
    approvers: &[String],
    text: &str,
    posted: &mut Posted,
) -> Result<()> {
    let Some((owid, owf, members)) = org else {
        return Ok(());
    };
    let here = agent_names(c, wid)?;
    let to: Vec<String> = approvers
        .iter()
        .filter(|x| members.iter().any(|m| m.eq_ignore_ascii_case(x)))
        .filter(|x| !here.iter().any(|m| m.eq_ignore_ascii_case(x)))
        .cloned()
        .collect();
    if !to.is_empty() {
        let note = post_system_to(c, owid, &owf, &to, &format!("(in {wf}) {text}"), now)?;
        posted.also(owid, note);
    }
    Ok(())
}

/// The contracts of an approval, quoted: "\"a\", \"b\"".
pub(crate) fn contract_list(a: &Approval) -> String {
    a.contracts
        .iter()
        .map(|x| format!("\"{x}\""))
        .collect::<Vec<_>>()
        .join(", ")
}
