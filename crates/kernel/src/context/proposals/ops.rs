//! The proposal tools: create, vote, status, cancel.

use super::expiry::Announcements;
use super::*;
use store::sql;

impl Context {
    pub async fn proposal_create(&self, scope: &Scope, new: NewProposal) -> Result<Created> {
        let Checked {
            kind,
            title,
            description,
            resolution,
            tie,
            timeout,
            binding,
            draft,
        } = checked(&new)?;
        let (s, now) = (scope.clone(), self.clock.now_ms());
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
                let expires_at = now + timeout.as_millis() as i64;
                c.execute(
                    "INSERT INTO proposals (workflow_id, num, type, title, description, options, resolution, quorum,
                        tie_breaker, binding, creator, created_at, expires_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                    sql::params![
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
                if let Some((_, spec)) = &draft {
                    c.execute(
                        "UPDATE proposals SET contract = ?3 WHERE workflow_id = ?1 AND num = ?2",
                        (s.workflow_id, num, spec),
                    )?;
                }
                let p = load(c, s.workflow_id, num)?;
                let asked: Vec<String> = agents
                    .iter()
                    .filter(|a| !a.eq_ignore_ascii_case(&s.me))
                    .cloned()
                    .collect();
                let text = announcement(&p, &asked, &s.me, &kind, resolution, binding, quorum);
                let posted = post_system(c, s.workflow_id, &s.workflow, text, now)?;
                Ok((p.view(&s.workflow, &agents), posted))
            })
            .await?;
        self.messaging.announce(scope.workflow_id, &posted);
        self.proposal_wake.notify_one();
        Ok(Created {
            proposal: created,
            message_id: posted.result.id,
        })
    }

    pub(crate) async fn proposal_vote(
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
        let (s, now) = (scope.clone(), self.clock.now_ms());
        let (voted, posted) = self
            .store
            .write(move |c| {
                let mut posted = Announcements::new();
                let num = proposal_num(c, s.workflow_id, &proposal)?;
                let mut p = load(c, s.workflow_id, num)?;
                if p.status != ProposalStatus::Open {
                    return Err(Error::conflict(format!(
                        "{} is {} ({}); it takes no more votes. See team_proposal_status",
                        p.id(),
                        p.status,
                        p.winner_text()
                    )));
                }
                p.check_deadline(now)?;
                let agents = agent_names(c, s.workflow_id)?;
                if !s.lead && !agents.iter().any(|a| a.eq_ignore_ascii_case(&s.me)) {
                    return Err(Error::forbidden(format!(
                        "only members of {} vote; members: {}, {LEAD}",
                        s.workflow,
                        agents.join(", ")
                    )));
                }
                let option = chosen(&p, &choice)?;
                let revote = p.voted(&s.me);
                record_vote(c, &s, (num, &option, reason.as_deref()), now)?;
                p = load(c, s.workflow_id, num)?;
                if let Some(approval) = p.approval_id {
                    // A vote of the members: the vote is a decision on the approval.
                    let closed =
                        held::cast_tx(c, &mut p, &s, (&option, reason.as_deref(), approval), now)?;
                    let mut voted = Voted::of(&p, &s, &agents, closed.is_some());
                    if let Some(post) = closed {
                        posted.push((s.workflow_id, post));
                        voted.closed_approval = Some(approval);
                    }
                    return Ok((voted, posted));
                }
                if s.lead && p.contract.is_some() {
                    // A drafted contract: the lead's vote decides it.
                    posted.push((
                        s.workflow_id,
                        drafts::decide(c, &mut p, (&s, &option), now)?,
                    ));
                    return Ok((Voted::of(&p, &s, &agents, true), posted));
                }
                let outcome = p.outcome();
                let (must_act, stuck) = who_must_act(&p, &outcome, &s.me);
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
                posted.push((
                    s.workflow_id,
                    post_system(c, s.workflow_id, &s.workflow, text, now)?,
                ));
                let resolved = match outcome {
                    Outcome::Winner(w) => {
                        posted.push((s.workflow_id, resolve(c, &mut p, (w, &agents, &s), now)?));
                        true
                    }
                    _ => false,
                };
                Ok((Voted::of(&p, &s, &agents, resolved), posted))
            })
            .await?;
        self.announce_all(&posted);
        if voted.resolved {
            // A drafted contract may have come into force.
            self.contracts.changed().await?;
        }
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
    pub(super) async fn read_proposals(
        &self,
        scope: &Scope,
        proposal: Option<&str>,
    ) -> Result<(StatusList, bool)> {
        let proposal = proposal.map(str::to_owned);
        let (s, now) = (scope.clone(), self.clock.now_ms());
        self.store
            .read(move |c| {
                let nums: Vec<i64> = match &proposal {
                    Some(p) => vec![proposal_num(c, s.workflow_id, p)?],
                    None => {
                        let mut st = c.prepare_cached(
                            "SELECT num FROM proposals WHERE workflow_id = ?1 AND status = 'open'
                             UNION ALL
                             SELECT num FROM (SELECT num FROM proposals WHERE workflow_id = ?1 AND status <> 'open'
                                              ORDER BY num DESC LIMIT ?2) recent",
                        )?;
                        let mut n = st
                            .query_map((s.workflow_id, RECENT_CLOSED), |r| r.get(0))?
                            .collect::<sql::Result<Vec<i64>>>()?;
                        n.sort_unstable_by(|a, b| b.cmp(a));
                        n
                    }
                };
                let agents = agent_names(c, s.workflow_id)?;
                let stored = nums
                    .into_iter()
                    .map(|n| load(c, s.workflow_id, n))
                    .collect::<Result<Vec<_>>>()?;
                let overdue = stored.iter().any(|p| p.check_deadline(now).is_err());
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
        let (s, now) = (scope.clone(), self.clock.now_ms());
        let (view, posted) = self
            .store
            .write(move |c| {
                let mut posted = Announcements::new();
                let num = proposal_num(c, s.workflow_id, &proposal)?;
                let mut p = load(c, s.workflow_id, num)?;
                if let Some(a) = p.approval_id {
                    return Err(Error::conflict(format!(
                        "{} is the members' vote on approval {a} and closes with it; vote reject, \
                         or (the lead) decide the approval with approval_decide",
                        p.id()
                    )));
                }
                if !s.lead && !p.creator.eq_ignore_ascii_case(&s.me) {
                    return Err(Error::forbidden(format!(
                        "only {} (who created {}) or the lead can cancel it; vote against it instead",
                        p.creator,
                        p.id()
                    )));
                }
                if p.status != ProposalStatus::Open {
                    return Err(Error::conflict(format!(
                        "{} is already {}; only an open proposal can be cancelled",
                        p.id(),
                        p.status
                    )));
                }
                p.check_deadline(now)?;
                p.close(c, (ProposalStatus::Cancelled, now), None, &s.me)?;
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
                posted.push((s.workflow_id, post_system(c, s.workflow_id, &s.workflow, text, now)?));
                Ok((p.view(&s.workflow, &agents), posted))
            })
            .await?;
        self.announce_all(&posted);
        Ok(Cancelled { proposal: view })
    }
}

/// A proposal as asked, checked: each field's error names the field and the fix.
struct Checked {
    kind: String,
    title: String,
    description: Option<String>,
    resolution: Resolution,
    tie: TieBreaker,
    timeout: Duration,
    binding: bool,
    /// The contract it installs, if it drafts one: its sentence and its spec.
    draft: Option<(String, String)>,
}

fn checked(new: &NewProposal) -> Result<Checked> {
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
    let draft = match &new.contract {
        None => None,
        Some(v) => Some(drafts::check(&kind, binding, v)?),
    };
    let description = match (&draft, description) {
        (Some((says, _)), d) => Some(format!(
            "{}Installs the contract: {says} (the lead's approve installs it)",
            d.map(|d| format!("{d}\n")).unwrap_or_default()
        )),
        (None, d) => d,
    };
    Ok(Checked {
        kind,
        title,
        description,
        resolution,
        tie,
        timeout,
        binding,
        draft,
    })
}

/// The channel post that opens a proposal: who is asked, the terms, the options,
/// how to vote and until when.
fn announcement(
    p: &Stored,
    asked: &[String],
    me: &str,
    kind: &str,
    resolution: Resolution,
    binding: bool,
    quorum: usize,
) -> String {
    format!(
        "{}{} proposes {} \"{}\" ({kind}; {}, quorum {quorum}, {}).{}\nOptions: {}.\n\
         Vote with team_vote(proposal: \"{}\", choice: <option id>, reason: ...) before {}.",
        mention_list(asked),
        me,
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
    )
}

/// The option a voter's `choice` names: its id, any case, or its label.
fn chosen(p: &Stored, choice: &str) -> Result<String> {
    let Some(option) = p
        .options
        .iter()
        .find(|o| o.id == choice)
        .or_else(|| p.options.iter().find(|o| o.id.eq_ignore_ascii_case(choice)))
        .or_else(|| {
            p.options
                .iter()
                .find(|o| o.label.eq_ignore_ascii_case(choice))
        })
    else {
        return Err(Error::invalid(format!(
            "{choice:?} is not an option of {}; choose one of: {}",
            p.id(),
            p.option_ids().join(", ")
        )));
    };
    Ok(option.id.clone())
}

/// Who must act after a vote, and why, when the proposal is stuck (a tie the
/// creator breaks, no majority or unanimity yet); nobody otherwise.
fn who_must_act(p: &Stored, outcome: &Outcome, me: &str) -> (Vec<String>, String) {
    let (must_act, stuck): (Vec<String>, String) = match outcome {
        Outcome::CreatorMustDecide(tied) => (
            vec![p.creator.clone()],
            format!(
                " Tie between {}: {} decides by voting for one of them.",
                tied.iter()
                    .map(|t| quote(t))
                    .collect::<Vec<_>>()
                    .join(" and "),
                p.creator
            ),
        ),
        Outcome::NoMajority | Outcome::NotUnanimous => (
            p.votes
                .iter()
                .map(|(c, _, _)| c.voter.clone())
                .filter(|v| !v.eq_ignore_ascii_case(me))
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
    let must_act = must_act
        .into_iter()
        .filter(|m| !m.eq_ignore_ascii_case(me))
        .collect();
    (must_act, stuck)
}

/// Closes a proposal that has a winner, and tells those involved.
fn resolve(
    c: &store::sql::Connection,
    p: &mut Stored,
    (w, agents, s): (String, &[String], &Scope),
    now: i64,
) -> Result<Posted> {
    p.close(c, (ProposalStatus::Resolved, now), Some(w), "quorum")?;
    let tell: Vec<String> = p
        .involved(agents)
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
    post_system(c, s.workflow_id, &s.workflow, text, now)
}

/// Writes `s.me`'s vote at `now` (a revote replaces it).
fn record_vote(
    c: &store::sql::Connection,
    s: &Scope,
    (num, option, reason): (i64, &str, Option<&str>),
    now: i64,
) -> Result<()> {
    c.execute(
        "INSERT INTO votes (workflow_id, num, voter, choice, reason, voted_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (workflow_id, num, voter) DO UPDATE SET choice = excluded.choice,
           reason = excluded.reason, voted_at = excluded.voted_at",
        sql::params![s.workflow_id, num, s.me, option, reason, now],
    )?;
    Ok(())
}

impl Voted {
    /// What a voter is told: the proposal as it stands, and whether this vote
    /// resolved it.
    fn of(p: &Stored, s: &Scope, agents: &[String], resolved: bool) -> Self {
        let view = p.view(&s.workflow, agents);
        Voted {
            resolved,
            closed_approval: None,
            winner: view.winner.clone(),
            proposal: view,
        }
    }
}
