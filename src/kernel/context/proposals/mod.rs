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
//!   [`Kernel::start_proposal_timer`]), not only when someone looks. In the moment
//!   between a deadline and the timer, a vote or cancel is refused and a status read
//!   closes it first, so nobody acts on or sees an open proposal past its deadline.
//! - `binding` is recorded and shown: a binding decision is one the team agreed to
//!   follow; an advisory one informs. The kernel has nothing to enforce beyond that.

pub mod tally;

use crate::error::{Error, Result};
use crate::kernel::clock::{fmt_ms, now_ms, parse_duration};
use crate::kernel::messaging::{Posted, post_system};
use crate::kernel::registry::agent_names;
use crate::kernel::{Kernel, Scope};
use crate::names::{LEAD, WorkflowRef};
use rusqlite::{Connection, OptionalExtension};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Weak};
use std::time::Duration;
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
    status: String,
    winner: Option<String>,
    closed_by: Option<String>,
    created_at: i64,
    expires_at: i64,
    closed_at: Option<i64>,
    votes: Vec<(Cast, Option<String>, i64)>,
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

/// Parses `prop-3`, `3` or `latest` (the newest open proposal, else the newest).
fn proposal_num(c: &Connection, workflow_id: i64, id: &str) -> Result<i64> {
    let id = id.trim();
    if id.eq_ignore_ascii_case("latest") {
        let n: Option<i64> = c
            .query_row(
                "SELECT num FROM proposals WHERE workflow_id = ?1 ORDER BY status = 'open' DESC, num DESC LIMIT 1",
                [workflow_id],
                |r| r.get(0),
            )
            .optional()?;
        return n.ok_or_else(|| {
            Error::not_found("there are no proposals yet; create one with team_proposal_create")
        });
    }
    let digits = id.strip_prefix("prop-").unwrap_or(id);
    let num: i64 = digits.parse().map_err(|_| {
        Error::invalid(format!(
            "unknown proposal id {id:?}: use an id like \"prop-3\" (see team_proposal_status) or \"latest\""
        ))
    })?;
    let exists: Option<i64> = c
        .query_row(
            "SELECT 1 FROM proposals WHERE workflow_id = ?1 AND num = ?2",
            (workflow_id, num),
            |r| r.get(0),
        )
        .optional()?;
    exists.map(|_| num).ok_or_else(|| {
        Error::not_found(format!(
            "no proposal prop-{num} here; see team_proposal_status for the ids"
        ))
    })
}

fn load(c: &Connection, workflow_id: i64, num: i64) -> Result<Stored> {
    let mut p = c
        .prepare_cached(
            "SELECT type, title, description, options, resolution, quorum, tie_breaker, binding, creator,
                    status, winner, closed_by, created_at, expires_at, closed_at
             FROM proposals WHERE workflow_id = ?1 AND num = ?2",
        )?
        .query_row((workflow_id, num), |r| {
            let options: String = r.get(3)?;
            Ok(Stored {
                workflow_id,
                num,
                kind: r.get(0)?,
                title: r.get(1)?,
                description: r.get(2)?,
                options: serde_json::from_str(&options).unwrap_or_default(),
                resolution: Resolution::parse(&r.get::<_, String>(4)?)
                    .unwrap_or(Resolution::Plurality),
                quorum: r.get::<_, i64>(5)? as usize,
                tie_breaker: TieBreaker::parse(&r.get::<_, String>(6)?).unwrap_or(TieBreaker::First),
                binding: r.get(7)?,
                creator: r.get(8)?,
                status: r.get(9)?,
                winner: r.get(10)?,
                closed_by: r.get(11)?,
                created_at: r.get(12)?,
                expires_at: r.get(13)?,
                closed_at: r.get(14)?,
                votes: Vec::new(),
            })
        })?;
    let mut st = c.prepare_cached(
        "SELECT voter, choice, reason, voted_at FROM votes WHERE workflow_id = ?1 AND num = ?2 ORDER BY voted_at, voter",
    )?;
    p.votes = st
        .query_map((workflow_id, num), |r| {
            Ok((
                Cast {
                    voter: r.get(0)?,
                    choice: r.get(1)?,
                },
                r.get(2)?,
                r.get(3)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(p)
}

impl Stored {
    fn id(&self) -> String {
        format!("prop-{}", self.num)
    }
    fn option_ids(&self) -> Vec<String> {
        self.options.iter().map(|o| o.id.clone()).collect()
    }
    fn casts(&self) -> Vec<Cast> {
        self.votes.iter().map(|(c, _, _)| c.clone()).collect()
    }
    fn label(&self, id: &str) -> String {
        self.options
            .iter()
            .find(|o| o.id == id)
            .map_or_else(|| id.to_owned(), |o| o.label.clone())
    }
    fn rules<'a>(&'a self, option_ids: &'a [String]) -> Rules<'a> {
        Rules {
            options: option_ids,
            resolution: self.resolution,
            quorum: self.quorum,
            tie_breaker: self.tie_breaker,
            creator: &self.creator,
        }
    }
    fn outcome(&self) -> Outcome {
        self.rules(&self.option_ids()).outcome(&self.casts())
    }
    fn expiry_winner(&self) -> Option<String> {
        self.rules(&self.option_ids()).expiry_winner(&self.casts())
    }
    fn voted(&self, name: &str) -> bool {
        self.votes
            .iter()
            .any(|(c, _, _)| c.voter.eq_ignore_ascii_case(name))
    }
    /// Everyone a closing event concerns: the agents and the creator.
    fn involved(&self, agents: &[String]) -> Vec<String> {
        let mut all = agents.to_vec();
        if !all.iter().any(|a| a.eq_ignore_ascii_case(&self.creator)) {
            all.push(self.creator.clone());
        }
        all
    }
    fn counts(&self) -> String {
        self.options
            .iter()
            .map(|o| {
                let n = self
                    .votes
                    .iter()
                    .filter(|(c, _, _)| c.choice == o.id)
                    .count();
                format!("{} {n}", o.id)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn view(&self, workflow: &WorkflowRef, agents: &[String]) -> ProposalView {
        let open = self.status == "open";
        let waiting_for: Vec<String> = if open {
            agents.iter().filter(|a| !self.voted(a)).cloned().collect()
        } else {
            Vec::new()
        };
        let note = open.then(|| match self.outcome() {
            Outcome::Waiting { votes, quorum } => format!(
                "{votes} of {quorum} votes needed so far{}",
                if waiting_for.is_empty() {
                    String::new()
                } else {
                    format!("; waiting for {}", waiting_for.join(", "))
                }
            ),
            Outcome::CreatorMustDecide(tied) => format!(
                "tie between {}: {} decides by voting for one of them",
                tied.join(" and "),
                self.creator
            ),
            Outcome::NoMajority => format!(
                "no option has more than half of the votes ({}); a revote can break the deadlock",
                self.counts()
            ),
            Outcome::NotUnanimous => format!(
                "the votes differ ({}); it resolves only when every vote names the same option",
                self.counts()
            ),
            Outcome::Winner(_) => "resolving".into(),
        });
        ProposalView {
            id: self.id(),
            workflow: workflow.to_string(),
            kind: self.kind.clone(),
            title: self.title.clone(),
            description: self.description.clone(),
            options: self
                .options
                .iter()
                .map(|o| OptionTally {
                    id: o.id.clone(),
                    label: o.label.clone(),
                    votes: self
                        .votes
                        .iter()
                        .filter(|(c, _, _)| c.choice == o.id)
                        .count(),
                })
                .collect(),
            resolution: self.resolution.name().into(),
            quorum: self.quorum,
            tie_breaker: self.tie_breaker.name().into(),
            binding: self.binding,
            creator: self.creator.clone(),
            status: self.status.clone(),
            winner: self.winner.as_ref().map(|w| ProposalOption {
                id: w.clone(),
                label: self.label(w),
            }),
            votes: self
                .votes
                .iter()
                .map(|(c, reason, at)| VoteView {
                    voter: c.voter.clone(),
                    choice: c.choice.clone(),
                    reason: reason.clone(),
                    voted_at: fmt_ms(*at),
                })
                .collect(),
            waiting_for,
            created_at: fmt_ms(self.created_at),
            expires_at: fmt_ms(self.expires_at),
            closed_at: self.closed_at.map(fmt_ms),
            closed_by: self.closed_by.clone(),
            note,
        }
    }

    /// Closes it in the database and in `self`.
    fn close(
        &mut self,
        c: &Connection,
        status: &str,
        winner: Option<String>,
        by: &str,
    ) -> Result<()> {
        let now = now_ms();
        c.execute(
            "UPDATE proposals SET status = ?3, winner = ?4, closed_by = ?5, closed_at = ?6
             WHERE workflow_id = ?1 AND num = ?2",
            rusqlite::params![self.workflow_id, self.num, status, winner, by, now],
        )?;
        self.status = status.into();
        self.winner = winner;
        self.closed_by = Some(by.into());
        self.closed_at = Some(now);
        Ok(())
    }

    /// Refuses a change to an open proposal whose deadline has just passed: the
    /// expiry timer is closing it, with the votes cast by the deadline.
    fn check_deadline(&self) -> Result<()> {
        if self.status == "open" && self.expires_at <= now_ms() {
            return Err(Error::conflict(format!(
                "{} passed its deadline ({}) and is being closed with the votes cast by then; \
                 see team_proposal_status",
                self.id(),
                fmt_ms(self.expires_at)
            )));
        }
        Ok(())
    }

    fn winner_text(&self) -> String {
        match &self.winner {
            Some(w) if self.label(w) == *w => quote(w),
            Some(w) => format!("{} ({})", quote(w), quote(&self.label(w))),
            None => "no winner".into(),
        }
    }
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

/// System messages written in a job, with their workflow instance, to announce after commit.
type Announcements = Vec<(i64, Posted)>;

/// Closes every open proposal of the whole kernel whose deadline has passed. Runs in a
/// store job; returns the posted messages and the next deadline still ahead.
fn expire_due_tx(c: &Connection) -> Result<(Announcements, Option<i64>)> {
    let now = now_ms();
    let due: Vec<(i64, i64, String, String)> = c
        .prepare_cached(
            "SELECT p.workflow_id, p.num, w.name, w.tag FROM proposals p JOIN workflows w ON w.id = p.workflow_id
             WHERE p.status = 'open' AND p.expires_at <= ?1",
        )?
        .query_map([now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut posted = Vec::new();
    for (wid, num, name, tag) in due {
        let wf = WorkflowRef { name, tag };
        let mut p = load(c, wid, num)?;
        let winner = p.expiry_winner();
        p.close(c, "expired", winner, "expiry")?;
        let agents = agent_names(c, wid)?;
        let text = format!(
            "{}{} \"{}\" expired at its deadline with {} of {} votes: {}{}.",
            mention_list(&p.involved(&agents)),
            p.id(),
            quote(&p.title),
            p.votes.len(),
            p.quorum,
            p.winner_text(),
            if p.winner.is_some() {
                " by plurality"
            } else {
                ""
            }
        );
        posted.push((wid, post_system(c, wid, &wf, text)?));
    }
    let next: Option<i64> = c
        .prepare_cached("SELECT min(expires_at) FROM proposals WHERE status = 'open'")?
        .query_row([], |r| r.get(0))?;
    Ok((posted, next))
}

impl Kernel {
    fn announce_all(&self, posted: &[(i64, Posted)]) {
        for (wid, p) in posted {
            self.announce(*wid, p);
        }
    }

    /// Closes overdue proposals now; returns the next deadline.
    pub(crate) async fn expire_due(&self) -> Result<Option<i64>> {
        let (posted, next) = self.store.write(expire_due_tx).await?;
        self.announce_all(&posted);
        Ok(next)
    }

    /// Starts the task that expires proposals on time. It sleeps until the next
    /// deadline, wakes early when a proposal is created, and ends with the kernel.
    pub(crate) fn start_proposal_timer(self: &Arc<Self>) {
        let weak: Weak<Self> = Arc::downgrade(self);
        let wake = self.proposal_wake.clone();
        tokio::spawn(async move {
            loop {
                let Some(kernel) = weak.upgrade() else { return };
                let sleep = match kernel.expire_due().await {
                    Ok(Some(next)) => Duration::from_millis((next - now_ms()).max(0) as u64),
                    Ok(None) => TIMER_MAX_SLEEP,
                    Err(e) => {
                        tracing::error!("expiring proposals failed: {e}");
                        Duration::from_secs(1)
                    }
                };
                drop(kernel);
                tokio::select! {
                    _ = tokio::time::sleep(sleep.min(TIMER_MAX_SLEEP)) => {}
                    _ = wake.notified() => {}
                }
            }
        });
    }

    pub async fn proposal_create(&self, scope: &Scope, new: NewProposal) -> Result<Created> {
        let kind = pick("proposal type", &new.kind, TYPES)?.to_owned();
        let title = new.title.trim().to_owned();
        if title.is_empty() {
            return Err(Error::invalid(
                "title is empty: say in a few words what is being decided",
            ));
        }
        too_long("title", &title, MAX_TITLE_CHARS)?;
        let description = new
            .description
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(str::to_owned);
        if let Some(d) = &description {
            too_long("description", d, MAX_DESCRIPTION_CHARS)?;
        }
        let resolution = rule(
            "resolution",
            new.resolution.as_deref(),
            Resolution::Plurality,
        )?;
        let tie = rule("tie_breaker", new.tie_breaker.as_deref(), TieBreaker::First)?;
        let timeout = match new
            .timeout
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            None => DEFAULT_TIMEOUT,
            Some(t) => parse_duration(t, "timeout")?,
        };
        if timeout < Duration::from_secs(1) || timeout > MAX_TIMEOUT {
            return Err(Error::invalid(format!(
                "timeout must be between 1s and 7d (default 1h), got {}",
                humantime::format_duration(timeout)
            )));
        }
        let binding = new.binding.unwrap_or(true);
        let s = scope.clone();
        let (created, posted) = self
            .store
            .write(move |c| {
                let agents = agent_names(c, s.workflow_id)?;
                let options = options_for(&kind, &new.options, &agents)?;
                let eligible = agents.len() + 1; // the agents and the lead
                let quorum = match new.quorum {
                    None => agents.len().max(1),
                    Some(q) if q >= 1 && q as usize <= eligible => q as usize,
                    Some(q) => {
                        return Err(Error::invalid(format!(
                            "quorum {q} is impossible: {eligible} member(s) can vote here (the agents and the lead); \
                             leave it out to require every agent"
                        )));
                    }
                };
                let num: i64 = c.query_row(
                    "SELECT coalesce(max(num), 0) + 1 FROM proposals WHERE workflow_id = ?1",
                    [s.workflow_id],
                    |r| r.get(0),
                )?;
                let now = now_ms();
                let expires_at = now + timeout.as_millis() as i64;
                c.execute(
                    "INSERT INTO proposals (workflow_id, num, type, title, description, options, resolution, quorum,
                        tie_breaker, binding, creator, created_at, expires_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                    rusqlite::params![
                        s.workflow_id,
                        num,
                        kind,
                        title,
                        description,
                        serde_json::to_string(&options).map_err(|e| Error::internal(e.to_string()))?,
                        resolution.name(),
                        quorum as i64,
                        tie.name(),
                        binding,
                        s.me,
                        now,
                        expires_at
                    ],
                )?;
                let p = load(c, s.workflow_id, num)?;
                let asked: Vec<String> = agents
                    .iter()
                    .filter(|a| !a.eq_ignore_ascii_case(&s.me))
                    .cloned()
                    .collect();
                let text = format!(
                    "{}{} proposes {} \"{}\" ({kind}; {}, quorum {quorum}, {}).{}\nOptions: {}.\n\
                     Vote with team_vote(proposal: \"{}\", choice: <option id>, reason: ...) before {}.",
                    mention_list(&asked),
                    s.me,
                    p.id(),
                    quote(&p.title),
                    resolution.name(),
                    if binding { "binding" } else { "advisory" },
                    p.description
                        .as_deref()
                        .map(|d| format!("\n{}", quote(d)))
                        .unwrap_or_default(),
                    p.options
                        .iter()
                        .map(|o| if o.id == o.label {
                            quote(&o.id)
                        } else {
                            format!("{} = {}", quote(&o.id), quote(&o.label))
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                    p.id(),
                    fmt_ms(p.expires_at),
                );
                let posted = post_system(c, s.workflow_id, &s.workflow, text)?;
                Ok((p.view(&s.workflow, &agents), posted))
            })
            .await?;
        self.announce(scope.workflow_id, &posted);
        self.proposal_wake.notify_one();
        Ok(Created {
            proposal: created,
            message_id: posted.result.id,
        })
    }

    pub async fn proposal_vote(
        &self,
        scope: &Scope,
        proposal: &str,
        choice: &str,
        reason: Option<&str>,
    ) -> Result<Voted> {
        let reason = reason
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_owned);
        if let Some(r) = &reason {
            too_long("reason", r, MAX_REASON_CHARS)?;
        }
        let (proposal, choice) = (proposal.to_owned(), choice.trim().to_owned());
        let s = scope.clone();
        let (voted, posted) = self
            .store
            .write(move |c| {
                let mut posted = Announcements::new();
                let num = proposal_num(c, s.workflow_id, &proposal)?;
                let mut p = load(c, s.workflow_id, num)?;
                if p.status != "open" {
                    return Err(Error::conflict(format!(
                        "{} is {} ({}); it takes no more votes. See team_proposal_status",
                        p.id(),
                        p.status,
                        p.winner_text()
                    )));
                }
                p.check_deadline()?;
                let agents = agent_names(c, s.workflow_id)?;
                if !s.lead && !agents.iter().any(|a| a.eq_ignore_ascii_case(&s.me)) {
                    return Err(Error::forbidden(format!(
                        "only members of {} vote; members: {}, {LEAD}",
                        s.workflow,
                        agents.join(", ")
                    )));
                }
                let Some(option) = p
                    .options
                    .iter()
                    .find(|o| o.id == choice)
                    .or_else(|| p.options.iter().find(|o| o.id.eq_ignore_ascii_case(&choice)))
                    .or_else(|| p.options.iter().find(|o| o.label.eq_ignore_ascii_case(&choice)))
                else {
                    return Err(Error::invalid(format!(
                        "{choice:?} is not an option of {}; choose one of: {}",
                        p.id(),
                        p.option_ids().join(", ")
                    )));
                };
                let option = option.id.clone();
                let revote = p.voted(&s.me);
                c.execute(
                    "INSERT INTO votes (workflow_id, num, voter, choice, reason, voted_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (workflow_id, num, voter) DO UPDATE SET choice = excluded.choice,
                       reason = excluded.reason, voted_at = excluded.voted_at",
                    rusqlite::params![s.workflow_id, num, s.me, option, reason, now_ms()],
                )?;
                p = load(c, s.workflow_id, num)?;
                let outcome = p.outcome();
                // Who must act after this vote: nobody, unless the proposal is stuck.
                let (must_act, stuck): (Vec<String>, String) = match &outcome {
                    Outcome::CreatorMustDecide(tied) => (
                        vec![p.creator.clone()],
                        format!(
                            " Tie between {}: {} decides by voting for one of them.",
                            tied.iter().map(|t| quote(t)).collect::<Vec<_>>().join(" and "),
                            p.creator
                        ),
                    ),
                    Outcome::NoMajority | Outcome::NotUnanimous => (
                        p.votes
                            .iter()
                            .map(|(c, _, _)| c.voter.clone())
                            .filter(|v| !v.eq_ignore_ascii_case(&s.me))
                            .collect(),
                        format!(
                            " No {} yet ({}): a revote can break the deadlock.",
                            if matches!(outcome, Outcome::NoMajority) {
                                "majority"
                            } else {
                                "unanimity"
                            },
                            quote(&p.counts())
                        ),
                    ),
                    _ => (Vec::new(), String::new()),
                };
                let must_act: Vec<String> = must_act
                    .into_iter()
                    .filter(|m| !m.eq_ignore_ascii_case(&s.me))
                    .collect();
                let text = format!(
                    "{}{} {}voted {} on {}{}. {} of {} votes.{stuck}",
                    mention_list(&must_act),
                    s.me,
                    if revote { "re" } else { "" },
                    quote(&option),
                    p.id(),
                    reason
                        .as_deref()
                        .map(|r| format!(" (reason: {})", quote(r)))
                        .unwrap_or_default(),
                    p.votes.len(),
                    p.quorum
                );
                posted.push((s.workflow_id, post_system(c, s.workflow_id, &s.workflow, text)?));
                let resolved = if let Outcome::Winner(w) = outcome {
                    p.close(c, "resolved", Some(w), "quorum")?;
                    let tell: Vec<String> = p
                        .involved(&agents)
                        .into_iter()
                        .filter(|m| !m.eq_ignore_ascii_case(&s.me))
                        .collect();
                    let text = format!(
                        "{}{} \"{}\" is resolved: {} wins ({}, {} of {} votes; {}).",
                        mention_list(&tell),
                        p.id(),
                        quote(&p.title),
                        p.winner_text(),
                        p.resolution.name(),
                        p.votes.len(),
                        p.quorum,
                        if p.binding { "binding" } else { "advisory" }
                    );
                    posted.push((s.workflow_id, post_system(c, s.workflow_id, &s.workflow, text)?));
                    true
                } else {
                    false
                };
                let view = p.view(&s.workflow, &agents);
                Ok((
                    Voted {
                        resolved,
                        winner: view.winner.clone(),
                        proposal: view,
                    },
                    posted,
                ))
            })
            .await?;
        self.announce_all(&posted);
        Ok(voted)
    }

    pub async fn proposal_status(
        &self,
        scope: &Scope,
        proposal: Option<&str>,
    ) -> Result<StatusList> {
        let (list, overdue) = self.read_proposals(scope, proposal).await?;
        if !overdue {
            return Ok(list);
        }
        // The timer is about to close one; do it now so nobody sees it open late.
        self.expire_due().await?;
        Ok(self.read_proposals(scope, proposal).await?.0)
    }

    /// The proposals status shows, and whether one of them is open past its deadline.
    async fn read_proposals(
        &self,
        scope: &Scope,
        proposal: Option<&str>,
    ) -> Result<(StatusList, bool)> {
        let proposal = proposal.map(str::to_owned);
        let s = scope.clone();
        self.store
            .read(move |c| {
                let nums: Vec<i64> = match &proposal {
                    Some(p) => vec![proposal_num(c, s.workflow_id, p)?],
                    None => {
                        let mut st = c.prepare_cached(
                            "SELECT num FROM proposals WHERE workflow_id = ?1 AND status = 'open'
                             UNION ALL
                             SELECT num FROM (SELECT num FROM proposals WHERE workflow_id = ?1 AND status <> 'open'
                                              ORDER BY num DESC LIMIT ?2)",
                        )?;
                        let mut n = st
                            .query_map((s.workflow_id, RECENT_CLOSED), |r| r.get(0))?
                            .collect::<rusqlite::Result<Vec<i64>>>()?;
                        n.sort_unstable_by(|a, b| b.cmp(a));
                        n
                    }
                };
                let agents = agent_names(c, s.workflow_id)?;
                let stored = nums
                    .into_iter()
                    .map(|n| load(c, s.workflow_id, n))
                    .collect::<Result<Vec<_>>>()?;
                let overdue = stored.iter().any(|p| p.check_deadline().is_err());
                let proposals = stored
                    .iter()
                    .map(|p| p.view(&s.workflow, &agents))
                    .collect();
                Ok((StatusList { proposals }, overdue))
            })
            .await
    }

    pub async fn proposal_cancel(&self, scope: &Scope, proposal: &str) -> Result<Cancelled> {
        let proposal = proposal.to_owned();
        let s = scope.clone();
        let (view, posted) = self
            .store
            .write(move |c| {
                let mut posted = Announcements::new();
                let num = proposal_num(c, s.workflow_id, &proposal)?;
                let mut p = load(c, s.workflow_id, num)?;
                if !s.lead && !p.creator.eq_ignore_ascii_case(&s.me) {
                    return Err(Error::forbidden(format!(
                        "only {} (who created {}) or the lead can cancel it; vote against it instead",
                        p.creator,
                        p.id()
                    )));
                }
                if p.status != "open" {
                    return Err(Error::conflict(format!(
                        "{} is already {}; only an open proposal can be cancelled",
                        p.id(),
                        p.status
                    )));
                }
                p.check_deadline()?;
                p.close(c, "cancelled", None, &s.me)?;
                let agents = agent_names(c, s.workflow_id)?;
                let tell: Vec<String> = agents
                    .iter()
                    .filter(|a| !p.voted(a) && !a.eq_ignore_ascii_case(&s.me))
                    .cloned()
                    .collect();
                let text = format!(
                    "{}{} \"{}\" was cancelled by {}; no vote is needed.",
                    mention_list(&tell),
                    p.id(),
                    quote(&p.title),
                    s.me
                );
                posted.push((s.workflow_id, post_system(c, s.workflow_id, &s.workflow, text)?));
                Ok((p.view(&s.workflow, &agents), posted))
            })
            .await?;
        self.announce_all(&posted);
        Ok(Cancelled { proposal: view })
    }
}
