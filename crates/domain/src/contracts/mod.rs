//! Contracts: rules a person can read, that the kernel applies to what agents do
//! (pure: parsing with errors that name the field, matching, precedence, the plain
//! English sentence each contract reads as).
//!
//! A contract is `{name, description?, workflow?, when, then}`. `when` names an
//! event and filters it; `then` names an action:
//!
//! | event | filters | actions |
//! |---|---|---|
//! | `tool_request` | `tool` (read, edit, shell, web, mcp), `match` (glob on the command, path, URL or `server:tool`), `agent` | allow, deny, require_approval, require_votes, notify, pause |
//! | `message` | `from`, `to` (name globs), `text` (regex), `urgent` (only urgent ones; an allow lets `from` send them) | allow, deny, notify, route |
//! | `spend` | `usd` or `tokens` (a threshold), `per` (agent or workflow), `agent` | require_approval, notify, pause |
//! | `run_end` | `status` (succeeded, failed, ...), `agent` | notify, pause |
//! | `doc_write` | `file` (glob on the document path), `agent` | allow, deny, notify |
//! | `task` | `state` (the state a task moves to: open, done, failed, cancelled), `title` (glob), `agent` (who moves it) | allow, deny, require_approval, require_votes, notify |
//! | `hook` | `hook` (glob on the hook's name), `kind` (glob on the sender's event type, e.g. `pull_request`) | allow, deny, require_approval, notify |
//! | `step` | `on` (the events of [`crate::steps::On`], all of them) | run |
//!
//! `step` and `run` are a step workflow's steps (its `steps:` compile to them);
//! nobody sets them with contract_set.
//!
//! A rate: `message` and `tool_request` also take `more_than` (a count) and
//! `within` (a duration): the contract then acts only on an agent's events past the
//! first `more_than` within the sliding window (`deny`, `pause`,
//! `require_approval` and `require_votes` for tool requests, `deny` for messages,
//! `notify` for both).
//! What counts is what the contract let through: a message that was sent, a tool
//! request it did not act on (even if another contract refused it).
//!
//! Precedence for one event (see [`decide`]): the agent's permission profile is
//! asked first and contracts never widen it. Then, among the contracts that match
//! (oldest first): the first `deny` (or `pause`) wins over everything; else an `allow`
//! exempts the event from approvals and routing; else every `require_approval`
//! combines into one approval (all approvers together, the largest count, the
//! shortest timeout, deny on timeout if any says so) and every `route` applies;
//! `notify` fires whatever the outcome.

mod english;
mod fields;
mod matching;
mod parse;
mod verdict;

pub use english::sentence;
pub use matching::matches;
pub use parse::{parse, parse_list, renamed_field};
pub use verdict::{Approval, Verdict, decide, decide_rated, rated};

use crate::permissions::{Kind, Request, glob, shell};
use std::time::Duration;

pub const MAX_CONTRACTS: usize = 200;
pub const MAX_REASON_CHARS: usize = 1000;
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(600);
pub const MAX_APPROVAL_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// The longest window a rate may count over.
pub const MAX_RATE_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);
/// The largest count a rate may allow.
pub const MAX_RATE_COUNT: u32 = 100_000;

/// A contract's rate: it acts on an agent's events past the first `more_than`
/// within `within`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub more_than: u32,
    pub within: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Contract {
    pub name: String,
    pub description: Option<String>,
    /// The workflow instance it applies to (`review:pr-1`), or every instance of a
    /// workflow (`review`); None: everywhere.
    pub workflow: Option<String>,
    /// The organisation it is bound to (in force in every instance run within
    /// it); a lead contract has this or `workflow`, not both.
    pub org: Option<String>,
    pub when: When,
    /// Counted events: the contract acts only past the rate (message and
    /// tool_request).
    pub rate: Option<Rate>,
    pub then: Then,
}

/// The tool classes a `tool_request` can name (team tools are never asked about).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolClass {
    Read,
    Edit,
    Shell,
    Web,
    Mcp,
}

impl ToolClass {
    pub fn kind(self) -> Kind {
        match self {
            ToolClass::Read => Kind::Read,
            ToolClass::Edit => Kind::Edit,
            ToolClass::Shell => Kind::Shell,
            ToolClass::Web => Kind::Web,
            ToolClass::Mcp => Kind::Mcp,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    Agent,
    Workflow,
}

/// A message contract's `text`: the regular expression as written, compiled once
/// when the contract is parsed, so a send never compiles one and an invalid one is
/// refused where it is set (naming the field), never silently matching nothing.
#[derive(Debug, Clone)]
pub struct TextPattern {
    source: String,
    re: regex::Regex,
}

impl TextPattern {
    /// The most memory one compiled pattern may take.
    const SIZE_LIMIT: usize = 1 << 20;

    pub fn new(source: &str) -> Result<Self, String> {
        let re = regex::RegexBuilder::new(source)
            .size_limit(Self::SIZE_LIMIT)
            .build()
            .map_err(|e| format!("text: not a regular expression ({e})"))?;
        Ok(Self {
            source: source.to_owned(),
            re,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.re.is_match(text)
    }
}

impl PartialEq for TextPattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl std::fmt::Display for TextPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.source)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum When {
    ToolRequest {
        tool: Option<ToolClass>,
        matches: Option<String>,
        agent: Option<String>,
    },
    Message {
        from: Option<String>,
        to: Option<String>,
        /// Compiled once, when the contract is parsed (set, or loaded).
        text: Option<TextPattern>,
        /// Only urgent messages (`urgent: true`, which stop the addressee's
        /// turn): an `allow` of them lets its senders send one.
        urgent: bool,
    },
    Spend {
        usd: Option<f64>,
        tokens: Option<u64>,
        per: Per,
        agent: Option<String>,
    },
    RunEnd {
        status: Option<String>,
        agent: Option<String>,
    },
    DocWrite {
        file: Option<String>,
        agent: Option<String>,
    },
    /// A task of a board moved by an agent (`agent`) to `state`, its title
    /// matching `title` (a glob).
    Task {
        state: Option<String>,
        title: Option<String>,
        agent: Option<String>,
    },
    /// A step of a step workflow: its events (all of them) have happened. Only a
    /// workflow's `steps:` make these.
    Step { on: Vec<crate::steps::On> },
    /// A merge of an agent's branch (`agent`) into a branch (`into`, a glob).
    Merge {
        agent: Option<String>,
        into: Option<String>,
        mode: Option<String>,
    },
    /// An agent making an agent of its own (delegation): `by` the maker (a glob),
    /// `backend` the new agent's.
    AgentNew {
        by: Option<String>,
        backend: Option<String>,
    },
    /// A delivery to a hook (`hook`, a glob) of the sender's event type (`kind`,
    /// a glob: GitHub's `X-GitHub-Event`).
    Hook {
        hook: Option<String>,
        kind: Option<String>,
    },
}

impl When {
    pub fn event(&self) -> &'static str {
        match self {
            When::ToolRequest { .. } => "tool_request",
            When::Message { .. } => "message",
            When::Spend { .. } => "spend",
            When::RunEnd { .. } => "run_end",
            When::DocWrite { .. } => "doc_write",
            When::Merge { .. } => "merge",
            When::Step { .. } => "step",
            When::AgentNew { .. } => "agent_new",
            When::Task { .. } => "task",
            When::Hook { .. } => "hook",
        }
    }

    /// The agent filter of events that are about one agent.
    fn agent(&self) -> Option<&str> {
        match self {
            When::ToolRequest { agent, .. }
            | When::Spend { agent, .. }
            | When::RunEnd { agent, .. }
            | When::DocWrite { agent, .. }
            | When::Merge { agent, .. }
            | When::Task { agent, .. } => agent.as_deref(),
            When::Message { from, .. } => from.as_deref(),
            When::AgentNew { by, .. } => by.as_deref(),
            When::Step { .. } | When::Hook { .. } => None,
        }
    }
}

/// How many of the members must vote for an event: a count, or a share such as
/// two thirds (rounded up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Votes {
    Count(usize),
    Share { num: u32, den: u32 },
}

impl Votes {
    /// The votes needed among `members` (at least one).
    pub fn needed(self, members: usize) -> usize {
        match self {
            Votes::Count(n) => n.max(1),
            Votes::Share { num, den } => (members * num as usize)
                .div_ceil(den.max(1) as usize)
                .max(1),
        }
    }
}

impl std::fmt::Display for Votes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Votes::Count(n) => write!(f, "{n}"),
            Votes::Share { num, den } => write!(f, "{num}/{den}"),
        }
    }
}

impl std::str::FromStr for Votes {
    type Err = String;

    /// "2" or "2/3".
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?}: a number of members (2) or a share of them (2/3)");
        match s.trim().split_once('/') {
            None => match s.trim().parse::<usize>() {
                Ok(n) if (1..=1000).contains(&n) => Ok(Votes::Count(n)),
                _ => Err(bad()),
            },
            Some((a, b)) => match (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
                (Ok(num), Ok(den)) if num >= 1 && num <= den && den <= 1000 => {
                    Ok(Votes::Share { num, den })
                }
                _ => Err(bad()),
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnTimeout {
    Deny,
    Allow,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Then {
    Allow,
    Deny {
        reason: Option<String>,
    },
    RequireApproval {
        /// Member names; `user` is the lead.
        approvers: Vec<String>,
        count: usize,
        timeout: Duration,
        on_timeout: OnTimeout,
    },
    /// A vote of the instance's members (all its agents but the asker), held
    /// through a proposal they vote on with team_vote.
    RequireVotes {
        votes: Votes,
        timeout: Duration,
        on_timeout: OnTimeout,
    },
    Notify {
        to: Vec<String>,
    },
    Pause {
        reason: Option<String>,
    },
    /// Members in order: a message goes to the first, what one forwards to the
    /// next (see [`next_hop`]).
    Route {
        to: Vec<String>,
    },
    /// A step of a step workflow: `agent` runs with `prompt` (posted to it by the
    /// kernel).
    Run {
        step: String,
        agent: String,
        prompt: String,
        /// The result the step asks its agent for, if any.
        result: Option<crate::result_schema::ResultSchema>,
    },
}

/// Who a route with members `to` hands a message from `from` to: the first
/// member, or, when the sender is one of them, the one after it. What the last
/// member sends passes as sent (None), so `route(@reviewer, @coder)` is a chain.
pub fn next_hop<'a>(to: &'a [String], from: &str) -> Option<&'a String> {
    match to.iter().position(|m| m.eq_ignore_ascii_case(from)) {
        None => to.first(),
        Some(i) => to.get(i + 1),
    }
}

impl Then {
    pub fn action(&self) -> &'static str {
        match self {
            Then::Allow => "allow",
            Then::Deny { .. } => "deny",
            Then::RequireApproval { .. } => "require_approval",
            Then::RequireVotes { .. } => "require_votes",
            Then::Notify { .. } => "notify",
            Then::Pause { .. } => "pause",
            Then::Route { .. } => "route",
            Then::Run { .. } => "run",
        }
    }
}

impl Contract {
    /// Whether the contract applies in this workflow instance (`name`, `tag`).
    pub fn in_scope(&self, name: &str, tag: &str) -> bool {
        match &self.workflow {
            None => true,
            Some(w) => match w.split_once(':') {
                Some((n, t)) => n == name && t == tag,
                None => w == name,
            },
        }
    }

    fn agent_matches(&self, agent: &str) -> bool {
        self.when
            .agent()
            .is_none_or(|g| glob(&g.to_ascii_lowercase(), &agent.to_ascii_lowercase()))
    }
}

/// Where a read or edit would land, as the kernel found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reached<'a> {
    /// Not looked up: the path as given is all there is to match.
    AsGiven,
    /// The path the file system reaches (symlinks followed): relative to the
    /// agent's folder when inside it, else absolute.
    At(&'a str),
    /// Where it lands cannot be known before it happens (a `..` after a folder
    /// that does not exist yet, a path too long to resolve): every rule but an
    /// allow matches it, as a command line that does not show what it runs.
    Unknown,
}

/// One thing an agent is about to do or did, as contracts see it.
#[derive(Debug, Clone)]
pub enum Event<'a> {
    Tool {
        agent: &'a str,
        request: &'a Request,
        /// For a read or edit, where it would land.
        reached: Reached<'a>,
    },
    Message {
        from: &'a str,
        to: &'a [String],
        text: &'a str,
        /// Sent `urgent`: it stops its addressee's turn.
        urgent: bool,
    },
    Spend {
        agent: &'a str,
        /// What the agent has spent, and its workflow instance.
        agent_usd: f64,
        agent_tokens: u64,
        workflow_usd: f64,
        workflow_tokens: u64,
    },
    RunEnd {
        agent: &'a str,
        status: &'a str,
    },
    DocWrite {
        agent: &'a str,
        file: &'a str,
    },
    /// `agent`'s branch merged into the branch `into`, in `mode` (auto, ff, merge,
    /// squash), or the branch `into` merged into `agent`'s (a sync: `into` is then
    /// the agent's branch).
    Merge {
        agent: &'a str,
        into: &'a str,
        mode: &'a str,
    },
    /// `by` makes an agent of its own named `name` with `backend`.
    AgentNew {
        by: &'a str,
        name: &'a str,
        backend: &'a str,
    },
    /// `agent` moves a task titled `title` to `state`.
    Task {
        agent: &'a str,
        state: &'a str,
        title: &'a str,
    },
    /// A signed delivery to hook `hook`, its sender's event type `kind` ("" if
    /// none was said).
    Hook {
        hook: &'a str,
        kind: &'a str,
    },
}

/// The tool classes whose requests `agent` must bring to the kernel: those a
/// `tool_request` contract in force could act on (an `allow` alone needs nothing).
pub fn governed_kinds<'c>(
    contracts: impl IntoIterator<Item = &'c Contract>,
    agent: &str,
) -> Vec<Kind> {
    let mut out = Vec::new();
    for c in contracts {
        let When::ToolRequest { tool, .. } = &c.when else {
            continue;
        };
        if matches!(c.then, Then::Allow) || !c.agent_matches(agent) {
            continue;
        }
        let kinds = match tool {
            Some(t) => vec![t.kind()],
            None => vec![Kind::Read, Kind::Edit, Kind::Shell, Kind::Web, Kind::Mcp],
        };
        for k in kinds {
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    out
}

/// Backends that bring tool requests to the kernel before the tool runs: the sdk
/// backend's local tools ask directly, Claude Code through its permission prompt
/// tool. Codex, Gemini CLI, OpenCode and Cursor offer no such hook in headless runs.
pub const ASKING_BACKENDS: &[&str] = &["sdk", "claude"];

/// For a backend without a hook, what `tool_request` contracts that refuse, pause
/// or need an approval become in the agent's profile: `deny` classes, so the CLI
/// itself refuses them (fail closed: with nobody to ask, an approval is a refusal).
/// A `match` the profile cannot hold (a path glob) refuses the whole class;
/// `notify` and `allow` have no effect there. `servers` are the agent's own.
pub fn profile_denials<'c>(
    contracts: impl IntoIterator<Item = &'c Contract>,
    agent: &str,
    servers: &[&str],
) -> Vec<crate::permissions::Class> {
    use crate::permissions::Class;
    let mut out: Vec<Class> = Vec::new();
    for c in contracts {
        let When::ToolRequest { tool, matches, .. } = &c.when else {
            continue;
        };
        if matches!(c.then, Then::Allow | Then::Notify { .. }) || !c.agent_matches(agent) {
            continue;
        }
        let mcp = |m: Option<&String>| -> Vec<Class> {
            match m.and_then(|m| m.split_once(':')) {
                Some((s, t)) if servers.contains(&s) && !t.contains('*') => vec![Class::Mcp {
                    server: s.into(),
                    tool: Some(t.into()),
                }],
                _ => servers
                    .iter()
                    .map(|s| Class::Mcp {
                        server: (*s).into(),
                        tool: None,
                    })
                    .collect(),
            }
        };
        let classes = match tool {
            Some(ToolClass::Shell) => vec![Class::Shell(matches.clone())],
            Some(ToolClass::Edit) => vec![Class::Edit],
            Some(ToolClass::Read) => vec![Class::Read],
            Some(ToolClass::Web) => vec![Class::Web],
            Some(ToolClass::Mcp) => mcp(matches.as_ref()),
            None => {
                let mut all = vec![Class::Read, Class::Edit, Class::Shell(None), Class::Web];
                all.extend(mcp(None));
                all
            }
        };
        for k in classes {
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    out
}

/// The path globs of the `tool_request` contracts that refuse `agent`'s edits:
/// what its OS sandbox holds read-only too (a deny beats an allow, so nothing
/// an allow exempts is held; an approval may let the edit through, so it holds
/// nothing; a rule without a tool holds nothing either).
pub fn edit_path_denials<'c>(
    contracts: impl IntoIterator<Item = &'c Contract>,
    agent: &str,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in contracts {
        let When::ToolRequest { tool, matches, .. } = &c.when else {
            continue;
        };
        // A rule for every tool matches shell commands' text too: not a path glob.
        let edits = matches!(tool, Some(ToolClass::Edit));
        if !edits || !matches!(c.then, Then::Deny { .. }) || !c.agent_matches(agent) {
            continue;
        }
        if let Some(m) = matches.as_ref().filter(|m| !out.contains(m)) {
            out.push(m.clone());
        }
    }
    out
}

#[cfg(test)]
mod task_tests;
#[cfg(test)]
mod tests;
