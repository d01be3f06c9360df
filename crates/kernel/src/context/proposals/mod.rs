//! Proposals and votes: team decisions that are persisted, resolved by rule, and
//! expire on time.
//!
//! - Types: election, decision, approval, assignment. approval defaults to the options
//!   approve/reject; election and assignment default to the instance's agents; a
//!   decision needs its options.
//! - Voters are the members of the instance: its agents and the lead (`user`). The
//!   default quorum is the number of agents when the proposal is created. A revote
//!   replaces the earlier vote. The rules are in [`tally`].
//! - Only the creator or the lead may cancel, and only while open.
//! - Every event (creation, vote, resolution, expiry, cancellation) posts a system
//!   message in the same transaction as the change; its leading @mentions are the
//!   members who must act, so their inboxes (and schedulers) see it. Text quoted from
//!   members has its @ signs removed so that it never mentions anyone by accident.
//! - Expiry is enforced by a kernel task that sleeps until the next deadline (see
//!   [`Context::start_proposal_timer`](crate::context::Context)), not only when someone looks. In the moment
//!   between a deadline and the timer, a vote or cancel is refused and a status read
//!   closes it first, so nobody acts on or sees an open proposal past its deadline.
//! - `binding` is recorded and shown: a binding decision is one the team agreed to
//!   follow; an advisory one informs. The kernel has nothing to enforce beyond that.

pub mod drafts;
mod expiry;
#[cfg(test)]
mod expiry_tests;
pub mod held;
#[cfg(test)]
mod held_tests;
mod ops;
mod stored;
pub mod tally;
#[cfg(test)]
mod tests;

use stored::{load, proposal_num};

use crate::Scope;
use crate::context::Context;
use crate::messaging::{Posted, post_system};
use crate::registry::agent_names;
use domain::clock::{fmt_ms, parse_duration};
use domain::error::{Error, Result};
use domain::names::{LEAD, WorkflowRef};
use domain::states::ProposalStatus;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Weak};
use std::time::Duration;
use store::sql::{Connection, OptionalExtension};
use tally::{Cast, Named, Outcome, Resolution, Rules, TieBreaker};

pub const TYPES: &[&str] = &["election", "decision", "approval", "assignment"];
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);
pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);
pub const MAX_OPTIONS: usize = 20;
pub const MAX_TITLE_CHARS: usize = 200;
pub const MAX_DESCRIPTION_CHARS: usize = 2000;
pub const MAX_LABEL_CHARS: usize = 200;
pub const MAX_OPTION_ID_CHARS: usize = 64;
pub const MAX_REASON_CHARS: usize = 1000;
/// team_proposal_status without a proposal lists the open ones and this many closed.
const RECENT_CLOSED: i64 = 10;
/// The timer re-checks at least this often (clock changes, missed notifications).
const TIMER_MAX_SLEEP: Duration = Duration::from_secs(30);

/// An option as the caller gives it: a label (its id is the label itself) or an
/// explicit id with an optional label.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OptionArg {
    Label(String),
    Full {
        id: String,
        /// Shown to voters (default: the id).
        #[serde(default)]
        label: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ProposalOption {
    /// What to pass as `choice` to team_vote.
    pub id: String,
    pub label: String,
}

/// What team_proposal_create asks for.
#[derive(Debug, Clone, Default)]
pub struct NewProposal {
    pub kind: String,
    pub title: String,
    pub description: Option<String>,
    pub options: Vec<OptionArg>,
    pub resolution: Option<String>,
    pub quorum: Option<i64>,
    pub tie_breaker: Option<String>,
    pub binding: Option<bool>,
    pub timeout: Option<String>,
    /// A contract the proposal would install (see [`drafts`]).
    pub contract: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OptionTally {
    pub id: String,
    pub label: String,
    pub votes: usize,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct VoteView {
    pub voter: String,
    pub choice: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub voted_at: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ProposalView {
    /// The proposal id, e.g. prop-3 (pass it to team_vote).
    pub id: String,
    pub workflow: String,
    /// election, decision, approval or assignment.
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The options with their current vote counts.
    pub options: Vec<OptionTally>,
    /// plurality, majority or unanimous.
    pub resolution: String,
    /// Votes needed before it can resolve.
    pub quorum: usize,
    /// first, random or creator-decides.
    pub tie_breaker: String,
    /// True: the team follows the outcome; false: advisory.
    pub binding: bool,
    pub creator: String,
    /// open, resolved, expired or cancelled.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub winner: Option<ProposalOption>,
    pub votes: Vec<VoteView>,
    /// Agents who have not voted yet (while open).
    pub waiting_for: Vec<String>,
    pub created_at: String,
    /// The deadline: when still open then, it expires with the plurality winner.
    pub expires_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_at: Option<String>,
    /// quorum (resolved by votes), expiry, or who cancelled it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_by: Option<String>,
    /// Why an open proposal has not resolved yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Created {
    pub proposal: ProposalView,
    /// The channel message that announced it.
    pub message_id: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Voted {
    pub proposal: ProposalView,
    /// True when this vote resolved the proposal.
    pub resolved: bool,
    /// The approval this vote closed (a vote of the members), for the runtime.
    #[serde(skip)]
    #[schemars(skip)]
    pub closed_approval: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub winner: Option<ProposalOption>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StatusList {
    /// The open proposals and the most recently closed ones, newest first.
    pub proposals: Vec<ProposalView>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Cancelled {
    pub proposal: ProposalView,
}

/// A proposal row with its votes.
struct Stored {
    workflow_id: i64,
    num: i64,
    kind: String,
    title: String,
    description: Option<String>,
    options: Vec<ProposalOption>,
    resolution: Resolution,
    quorum: usize,
    tie_breaker: TieBreaker,
    binding: bool,
    creator: String,
    status: ProposalStatus,
    winner: Option<String>,
    closed_by: Option<String>,
    created_at: i64,
    expires_at: i64,
    closed_at: Option<i64>,
    votes: Vec<(Cast, Option<String>, i64)>,
    /// The contract it would install, as drafted (JSON).
    contract: Option<String>,
    /// The approval it holds: a vote of the members ([`held`]).
    approval_id: Option<i64>,
}

fn pick<'a>(what: &str, value: &str, allowed: &'a [&'a str]) -> Result<&'a str> {
    let v = value.trim().to_ascii_lowercase();
    allowed.iter().find(|a| **a == v).copied().ok_or_else(|| {
        Error::invalid(format!(
            "unknown {what} {value:?}: use one of {}",
            allowed.join(", ")
        ))
    })
}

/// A rule argument: its default when not given, else one of the rule's names.
fn rule<T: Named>(what: &str, value: Option<&str>, default: T) -> Result<T> {
    match value {
        None => Ok(default),
        Some(v) => T::parse(v).ok_or_else(|| {
            Error::invalid(format!("unknown {what} {v:?}: use one of {}", T::names()))
        }),
    }
}

fn too_long(what: &str, s: &str, max: usize) -> Result<()> {
    let n = s.chars().count();
    if n > max {
        return Err(Error::invalid(format!(
            "{what} is {n} characters; at most {max}. Put long text in a document or a resource and refer to it"
        )));
    }
    Ok(())
}

/// Member text quoted in a system message: without @ signs, so it mentions nobody.
fn quote(s: &str) -> String {
    s.replace('@', "")
}

fn mention_list(names: &[String]) -> String {
    names.iter().map(|n| format!("@{n} ")).collect()
}

/// The normalised options of a new proposal.
fn options_for(kind: &str, given: &[OptionArg], agents: &[String]) -> Result<Vec<ProposalOption>> {
    let mut out: Vec<ProposalOption> = Vec::new();
    if given.is_empty() {
        return match kind {
            "approval" => Ok(["approve", "reject"]
                .iter()
                .map(|o| ProposalOption {
                    id: o.to_string(),
                    label: o.to_string(),
                })
                .collect()),
            "election" | "assignment" if agents.len() >= 2 => Ok(agents
                .iter()
                .map(|a| ProposalOption {
                    id: a.clone(),
                    label: a.clone(),
                })
                .collect()),
            _ => Err(Error::invalid(format!(
                "a {kind} needs options: pass at least two, as strings (\"Postgres\") or {{id, label}} objects"
            ))),
        };
    }
    for o in given {
        let (id, label) = match o {
            OptionArg::Label(l) => (l.trim().to_owned(), l.trim().to_owned()),
            OptionArg::Full { id, label } => {
                let id = id.trim().to_owned();
                let label = match label.trim() {
                    "" => id.clone(),
                    l => l.to_owned(),
                };
                (id, label)
            }
        };
        if id.is_empty() {
            return Err(Error::invalid(
                "an option is empty: give every option an id or a label",
            ));
        }
        too_long("an option id", &id, MAX_OPTION_ID_CHARS)?;
        too_long("an option label", &label, MAX_LABEL_CHARS)?;
        if out.iter().any(|e| e.id.eq_ignore_ascii_case(&id)) {
            return Err(Error::invalid(format!(
                "option {id:?} is given twice; option ids must differ"
            )));
        }
        out.push(ProposalOption { id, label });
    }
    if out.len() < 2 {
        return Err(Error::invalid(
            "a proposal needs at least two options to choose from",
        ));
    }
    if out.len() > MAX_OPTIONS {
        return Err(Error::invalid(format!(
            "{} options given; at most {MAX_OPTIONS}",
            out.len()
        )));
    }
    Ok(out)
}
