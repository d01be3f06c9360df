//! Votes of the members (`require_votes`): a proposal that holds an approval. The
//! approval (governance) is the authority: each vote on the proposal is one
//! member's decision on it (`approve` for, `reject` against), and the proposal
//! closes when the approval does, with its outcome, whoever closed it: enough
//! votes, the lead, its deadline, or its run ending. The proposal's own resolution
//! rules never apply, nor its expiry's plurality.

use super::*;
use crate::governance::approvals::{self, Row};
use domain::states::ApprovalState;
use store::sql;

/// The proposal's deadline is a little after its approval's, whose timer closes both.
const AFTER_APPROVAL_MS: i64 = 2000;

/// A vote to open for an approval.
pub struct NewVote<'a> {
    pub workflow_id: i64,
    pub workflow: &'a WorkflowRef,
    pub approval_id: i64,
    /// The agent whose request waits (the proposal's creator; it does not vote).
    pub asker: &'a str,
    /// What it is about: "coder asks to use run_command (shell): deploy prod".
    pub title: String,
    pub voters: &'a [String],
    pub needed: usize,
    pub deadline_ms: i64,
}

/// Opens the proposal the members vote on at `now`, and tells them. Returns its
/// id and the announcement.
pub(crate) fn open_tx(c: &Connection, v: &NewVote<'_>, now: i64) -> Result<(String, Posted)> {
    let num: i64 = c.query_row(
        "SELECT coalesce(max(num), 0) + 1 FROM proposals WHERE workflow_id = ?1",
        [v.workflow_id],
        |r| r.get(0),
    )?;
    let options =
        [("approve", "approve"), ("reject", "reject")].map(|(id, label)| ProposalOption {
            id: id.into(),
            label: label.into(),
        });
    let title: String = v.title.chars().take(MAX_TITLE_CHARS).collect();
    c.execute(
        "INSERT INTO proposals (workflow_id, num, type, title, options, resolution, quorum, tie_breaker,
            binding, creator, created_at, expires_at, approval_id)
         VALUES (?1, ?2, 'approval', ?3, ?4, 'majority', ?5, 'first', 1, ?6, ?7, ?8, ?9)",
        sql::params![
            v.workflow_id,
            num,
            title,
            serde_json::to_string(&options).map_err(|e| Error::internal(e.to_string()))?,
            v.needed as i64,
            v.asker,
            now,
            v.deadline_ms + AFTER_APPROVAL_MS,
            v.approval_id
        ],
    )?;
    let id = format!("prop-{num}");
    let text = format!(
        "{}{id} \"{}\": approval {} waits for a vote of the members, {} of {} for it. Vote with \
         team_vote {{\"proposal\": \"{id}\", \"choice\": \"approve\"}} or \"reject\" by {}.",
        mention_list(v.voters),
        quote(&title),
        v.approval_id,
        v.needed,
        v.voters.len(),
        fmt_ms(v.deadline_ms)
    );
    Ok((id, post_system(c, v.workflow_id, v.workflow, text, now)?))
}

/// `s.me`'s vote on a held proposal, as its decision on approval `approval_id`;
/// closes the proposal when the approval closed. Returns the announcement then.
pub(super) fn cast_tx(
    c: &Connection,
    p: &mut Stored,
    s: &Scope,
    (option, reason, approval_id): (&str, Option<&str>, i64),
    now: i64,
) -> Result<Option<Posted>> {
    if !s.lead && crate::registry::is_sub_agent_tx(c, s.workflow_id, &s.me)? {
        return Err(Error::forbidden(format!(
            "you are {}, made by another agent: a sub-agent never decides an approval, so it \
             does not vote on {} (approval {approval_id})",
            s.me,
            p.id()
        )));
    }
    let decision = (approval_id, s.me.as_str(), option == "approve", reason);
    let r = approvals::decide_tx(c, decision, now)?;
    if r.state == ApprovalState::Pending {
        return Ok(None);
    }
    Ok(Some(close_tx(c, p, &r, now)?))
}

/// A member's decision through approval_decide (at `now`), kept as its vote on
/// the proposal too, so that both show the same votes.
pub(crate) fn record_decision_tx(
    c: &Connection,
    r: &Row,
    (who, approve, reason): (&str, bool, Option<&str>),
    now: i64,
) -> Result<()> {
    c.execute(
        "INSERT INTO votes (workflow_id, num, voter, choice, reason, voted_at)
         SELECT workflow_id, num, ?3, ?4, ?5, ?6 FROM proposals
          WHERE workflow_id = ?1 AND approval_id = ?2 AND status = 'open'
         ON CONFLICT (workflow_id, num, voter) DO UPDATE SET choice = excluded.choice,
           reason = excluded.reason, voted_at = excluded.voted_at",
        sql::params![
            r.workflow_id,
            r.view.id,
            who,
            if approve { "approve" } else { "reject" },
            reason,
            now
        ],
    )?;
    Ok(())
}

/// Closes every open proposal whose approval is closed (approvals lost at a
/// restart or a takeover) at `now`; returns the announcements.
pub(crate) fn close_settled_tx(c: &Connection, now: i64) -> Result<Vec<(i64, Posted)>> {
    let ids: Vec<i64> = c
        .prepare(
            "SELECT p.approval_id FROM proposals p JOIN approvals a ON a.id = p.approval_id
              WHERE p.status = 'open' AND a.state <> 'pending'",
        )?
        .query_map((), |r| r.get(0))?
        .collect::<sql::Result<_>>()?;
    let mut out = Vec::new();
    for id in ids {
        if let Some(r) = approvals::get(c, id)?
            && let Some(p) = close_for_tx(c, &r, now)?
        {
            out.push((r.workflow_id, p));
        }
    }
    Ok(out)
}

/// Closes the open proposal that holds approval `r`, now closed, with its
/// outcome (at `now`).
pub(crate) fn close_for_tx(c: &Connection, r: &Row, now: i64) -> Result<Option<Posted>> {
    let num: Option<i64> = c
        .query_row(
            "SELECT num FROM proposals WHERE workflow_id = ?1 AND approval_id = ?2 AND status = 'open'",
            (r.workflow_id, r.view.id),
            |row| row.get(0),
        )
        .optional()?;
    let Some(num) = num else { return Ok(None) };
    let mut p = load(c, r.workflow_id, num)?;
    Ok(Some(close_tx(c, &mut p, r, now)?))
}

fn close_tx(c: &Connection, p: &mut Stored, r: &Row, now: i64) -> Result<Posted> {
    let (status, winner) = match r.state {
        ApprovalState::Approved => (ProposalStatus::Resolved, Some("approve".to_owned())),
        ApprovalState::Denied => (ProposalStatus::Resolved, Some("reject".to_owned())),
        _ => (ProposalStatus::Expired, None),
    };
    p.close(c, (status, now), winner, "approval")?;
    let text = format!(
        "{} \"{}\" is closed with {} of {} votes: approval {} is {}{}.",
        p.id(),
        quote(&p.title),
        p.votes.len(),
        r.view.approvers.len(),
        r.view.id,
        r.view.state,
        r.view
            .reason
            .as_deref()
            .map(|x| format!(" ({})", quote(x)))
            .unwrap_or_default()
    );
    post_system(c, p.workflow_id, &r.workflow, text, now)
}
