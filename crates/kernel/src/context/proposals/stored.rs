//! A proposal as stored: its row and votes, read back, and what follows from them.

use super::*;
use store::sql;

/// Parses `prop-3`, `3` or `latest` (the newest open proposal, else the newest).
pub(super) fn proposal_num(c: &Connection, workflow_id: i64, id: &str) -> Result<i64> {
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

pub(super) fn load(c: &Connection, workflow_id: i64, num: i64) -> Result<Stored> {
    let mut p = c
        .prepare_cached(
            "SELECT type, title, description, options, resolution, quorum, tie_breaker, binding, creator,
                    status, winner, closed_by, created_at, expires_at, closed_at, contract, approval_id
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
                resolution: Resolution::parse(&r.get::<String>(4)?)
                    .unwrap_or(Resolution::Plurality),
                quorum: r.get::<i64>(5)? as usize,
                tie_breaker: TieBreaker::parse(&r.get::<String>(6)?).unwrap_or(TieBreaker::First),
                binding: r.get(7)?,
                creator: r.get(8)?,
                status: r.parse(9)?,
                winner: r.get(10)?,
                closed_by: r.get(11)?,
                created_at: r.get(12)?,
                expires_at: r.get(13)?,
                closed_at: r.get(14)?,
                contract: r.get(15)?,
                approval_id: r.get(16)?,
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
        .collect::<sql::Result<Vec<_>>>()?;
    Ok(p)
}

impl Stored {
    pub(super) fn id(&self) -> String {
        format!("prop-{}", self.num)
    }
    pub(super) fn option_ids(&self) -> Vec<String> {
        self.options.iter().map(|o| o.id.clone()).collect()
    }
    pub(super) fn casts(&self) -> Vec<Cast> {
        self.votes.iter().map(|(c, _, _)| c.clone()).collect()
    }
    pub(super) fn label(&self, id: &str) -> String {
        self.options
            .iter()
            .find(|o| o.id == id)
            .map_or_else(|| id.to_owned(), |o| o.label.clone())
    }
    pub(super) fn rules<'a>(&'a self, option_ids: &'a [String]) -> Rules<'a> {
        Rules {
            options: option_ids,
            resolution: self.resolution,
            quorum: self.quorum,
            tie_breaker: self.tie_breaker,
            creator: &self.creator,
        }
    }
    pub(super) fn outcome(&self) -> Outcome {
        self.rules(&self.option_ids()).outcome(&self.casts())
    }
    pub(super) fn expiry_winner(&self) -> Option<String> {
        self.rules(&self.option_ids()).expiry_winner(&self.casts())
    }
    pub(super) fn voted(&self, name: &str) -> bool {
        self.votes
            .iter()
            .any(|(c, _, _)| c.voter.eq_ignore_ascii_case(name))
    }
    /// Everyone a closing event concerns: the agents and the creator.
    pub(super) fn involved(&self, agents: &[String]) -> Vec<String> {
        let mut all = agents.to_vec();
        if !all.iter().any(|a| a.eq_ignore_ascii_case(&self.creator)) {
            all.push(self.creator.clone());
        }
        all
    }
    pub(super) fn counts(&self) -> String {
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

    pub(super) fn view(&self, workflow: &WorkflowRef, agents: &[String]) -> ProposalView {
        let open = self.status == ProposalStatus::Open;
        // A held vote (see `held`): the one who asked never votes on it.
        let held = self.approval_id.is_some();
        let waiting_for: Vec<String> = if open {
            agents
                .iter()
                .filter(|a| !(self.voted(a) || held && a.eq_ignore_ascii_case(&self.creator)))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        let note = open.then(|| match self.outcome() {
            _ if held => format!(
                "{}; it needs {} for it, and is refused once that can no longer be reached",
                self.counts(),
                self.quorum
            ),
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
            status: self.status.as_str().to_owned(),
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

    /// Closes it as `status` at `now`, in the database and in `self`.
    pub(super) fn close(
        &mut self,
        c: &Connection,
        (status, now): (ProposalStatus, i64),
        winner: Option<String>,
        by: &str,
    ) -> Result<()> {
        c.execute(
            "UPDATE proposals SET status = ?3, winner = ?4, closed_by = ?5, closed_at = ?6
             WHERE workflow_id = ?1 AND num = ?2",
            sql::params![self.workflow_id, self.num, status.as_str(), winner, by, now],
        )?;
        self.status = status;
        self.winner = winner;
        self.closed_by = Some(by.into());
        self.closed_at = Some(now);
        Ok(())
    }

    /// Refuses a change to an open proposal whose deadline has passed by `now`: the
    /// expiry timer is closing it, with the votes cast by the deadline.
    pub(super) fn check_deadline(&self, now: i64) -> Result<()> {
        if self.status == ProposalStatus::Open && self.expires_at <= now {
            return Err(Error::conflict(format!(
                "{} passed its deadline ({}) and is being closed with the votes cast by then; \
                 see team_proposal_status",
                self.id(),
                fmt_ms(self.expires_at)
            )));
        }
        Ok(())
    }

    pub(super) fn winner_text(&self) -> String {
        match &self.winner {
            Some(w) if self.label(w) == *w => quote(w),
            Some(w) => format!("{} ({})", quote(w), quote(&self.label(w))),
            None => "no winner".into(),
        }
    }
}
