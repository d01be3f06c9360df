//! What the contracts in force say about one event: the precedence rules (the
//! module docs above), an approval combined from every contract that asks for one,
//! and the contracts with a rate the kernel counts.

use super::*;

/// What the contracts say about one event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// The first matching deny or pause: (contract, reason, pause the agent too).
    pub deny: Option<(String, String, bool)>,
    /// The contract that exempted the event, if an allow matched.
    pub allowed_by: Option<String>,
    /// The combined approval, when one is needed (and nothing denied or allowed).
    pub approval: Option<Approval>,
    /// (contract, member) routes, when no deny or allow matched.
    pub routes: Vec<(String, String)>,
    /// (contract, members) to tell, whatever the outcome.
    pub notify: Vec<(String, Vec<String>)>,
    /// (contract, reason): pause the agent (spend and run_end; not a refusal).
    pub pause: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub contracts: Vec<String>,
    pub approvers: Vec<String>,
    pub count: usize,
    /// Votes of the members asked besides: the kernel adds the members as
    /// approvers and raises `count` to the most any of these needs of them.
    pub votes: Vec<Votes>,
    pub timeout: Duration,
    pub on_timeout: OnTimeout,
}

impl Approval {
    /// The most votes the members' votes need of `members`, when any is asked.
    pub fn votes_needed(&self, members: usize) -> Option<usize> {
        self.votes.iter().map(|v| v.needed(members)).max()
    }

    /// The votes asked, as written: "2/3", or "3 and 1/2".
    pub fn votes_text(&self) -> Option<String> {
        (!self.votes.is_empty()).then(|| {
            let all: Vec<String> = self.votes.iter().map(ToString::to_string).collect();
            all.join(" and ")
        })
    }
}

impl Verdict {
    /// Whether any contract matched at all (worth recording).
    pub fn any(&self) -> bool {
        self.deny.is_some()
            || self.allowed_by.is_some()
            || self.approval.is_some()
            || !self.routes.is_empty()
            || !self.notify.is_empty()
            || !self.pause.is_empty()
    }
}

/// Applies the precedence rules (module docs) to the contracts that match `e`.
/// `contracts` are in the order they were made (oldest first). A contract with a
/// rate never matches here: events that can be counted go through [`decide_rated`].
pub fn decide<'c>(contracts: impl IntoIterator<Item = &'c Contract>, e: &Event<'_>) -> Verdict {
    decide_rated(contracts, e, |_| false)
}

/// [`decide`], where a contract with a rate matches only when `past_rate` says the
/// agent is past it (the kernel counts; see [`rated`]).
pub fn decide_rated<'c>(
    contracts: impl IntoIterator<Item = &'c Contract>,
    e: &Event<'_>,
    past_rate: impl Fn(&Contract) -> bool,
) -> Verdict {
    let after_fact = matches!(e, Event::Spend { .. } | Event::RunEnd { .. });
    let mut v = Verdict::default();
    let mut approvals: Vec<&Contract> = Vec::new();
    let mut routes = Vec::new();
    let applies = |c: &&Contract| matches(c, e) && (c.rate.is_none() || past_rate(c));
    for c in contracts.into_iter().filter(applies) {
        match &c.then {
            Then::Deny { reason } if v.deny.is_none() => {
                v.deny = Some((c.name.clone(), reason_or(reason, c), false));
            }
            Then::Pause { reason } if after_fact => {
                v.pause.push((c.name.clone(), reason_or(reason, c)));
            }
            Then::Pause { reason } if v.deny.is_none() => {
                v.deny = Some((c.name.clone(), reason_or(reason, c), true));
            }
            Then::Allow if v.allowed_by.is_none() => v.allowed_by = Some(c.name.clone()),
            Then::RequireApproval { .. } | Then::RequireVotes { .. } => approvals.push(c),
            Then::Route { to } => {
                let from = match e {
                    Event::Message { from, .. } => from,
                    _ => "",
                };
                if let Some(m) = super::next_hop(to, from) {
                    routes.push((c.name.clone(), m.clone()));
                }
            }
            Then::Notify { to } => v.notify.push((c.name.clone(), to.clone())),
            _ => {}
        }
    }
    if v.deny.is_some() || v.allowed_by.is_some() {
        return v;
    }
    v.routes = routes;
    for c in approvals {
        combine(&mut v.approval, c);
    }
    v
}

/// Adds one `require_approval` or `require_votes` contract to the combined approval.
fn combine(approval: &mut Option<Approval>, c: &Contract) {
    let (approvers, count, vote, timeout, on_timeout) = match &c.then {
        Then::RequireApproval {
            approvers,
            count,
            timeout,
            on_timeout,
        } => (&approvers[..], *count, None, *timeout, *on_timeout),
        Then::RequireVotes {
            votes,
            timeout,
            on_timeout,
        } => (&[][..], 0, Some(*votes), *timeout, *on_timeout),
        _ => return,
    };
    let a = approval.get_or_insert_with(|| Approval {
        contracts: Vec::new(),
        approvers: Vec::new(),
        count: 0,
        votes: Vec::new(),
        timeout,
        on_timeout,
    });
    a.contracts.push(c.name.clone());
    for m in approvers {
        if !a.approvers.iter().any(|x| x.eq_ignore_ascii_case(m)) {
            a.approvers.push(m.clone());
        }
    }
    a.count = a.count.max(count);
    if let Some(v) = vote
        && !a.votes.contains(&v)
    {
        a.votes.push(v);
    }
    a.timeout = a.timeout.min(timeout);
    if on_timeout == OnTimeout::Deny {
        a.on_timeout = OnTimeout::Deny;
    }
}

/// The contracts with a rate whose filters match `e`: the ones whose counts the
/// kernel reads (and adds `e` to, when they let it through).
pub fn rated<'c>(
    contracts: impl IntoIterator<Item = &'c Contract>,
    e: &Event<'_>,
) -> Vec<&'c Contract> {
    contracts
        .into_iter()
        .filter(|c| c.rate.is_some() && matches(c, e))
        .collect()
}

fn reason_or(reason: &Option<String>, c: &Contract) -> String {
    match reason {
        Some(r) => format!("refused by contract \"{}\": {r}", c.name),
        None => format!(
            "refused by contract \"{}\" ({}); do without it, or ask the lead",
            c.name,
            sentence(c)
        ),
    }
}
