//! The agents' branches as the team sees them: branch_diff reads one (the lead
//! any agent's, an agent its teammates'), branch_merge (the lead) brings an
//! agent's branch into another branch, or another branch into an agent's (a
//! sync). Contracts on `merge` decide before git writes anything; an approval
//! they ask for holds the merge, pinned to the commit asked about, until it is
//! decided.

use super::Worktrees;
use super::diff::{self, BranchDiff, DiffAsk};
use super::git::{At, git};
use super::merge::{self, MergeOut, Mode, Status, Target};
use super::{author, commit_all, verify};
use crate::Scope;
use crate::events::Event;
use crate::governance::approvals;
use crate::governance::contracts::in_force;
use crate::messaging::post_system_to;
use crate::runtime::approvals::{Approvals, MergeClosed};
use crate::runtime::base::Base;
use crate::runtime::verdict::VerdictOf;
use domain::contracts::{self, Event as Ev};
use domain::error::{Error, Result};
use domain::names::{LEAD, WorkflowRef};
use domain::workspace::{Workspace, Worktree};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A worktree agent and its branch.
#[derive(Clone)]
pub(super) struct Branch {
    id: i64,
    workflow_id: i64,
    wf: WorkflowRef,
    name: String,
    w: Worktree,
    top: PathBuf,
    branch: String,
}

impl Branch {
    /// The target of a teammate named `@name` (or `name`).
    fn sibling(&self, name: &str) -> String {
        let name = name.trim_start_matches('@');
        format!("{name}@{}:{}", self.wf.name, self.wf.tag)
    }
}

/// What branch_diff reads.
pub struct DiffArgs<'a> {
    pub agent: &'a str,
    pub against: Option<&'a str>,
    pub file: Option<&'a str>,
    pub content: bool,
    pub max_bytes: Option<usize>,
}

/// What branch_merge is asked; kept with the approval that holds it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MergeAsk {
    /// The agent whose branch is merged (or, with `from`, merged into).
    pub agent: String,
    /// A branch, or `@agent` (default: the branch the agent's was made from).
    pub into: Option<String>,
    /// A sync: this branch, ref or `@agent` merged into the agent's branch.
    pub from: Option<String>,
    pub mode: String,
    pub message: Option<String>,
}

/// A merge worked out, before anything is written.
struct Plan {
    /// What comes in: its name and its commit.
    incoming: (String, String),
    /// The branch it goes into.
    into: String,
    /// The agent whose worktree has `into` checked out, if any (a sync: the agent).
    into_agent: Option<Branch>,
}

/// A merge held by an approval: what was asked, and the commit it was asked about.
#[derive(Serialize, Deserialize)]
struct HeldMerge {
    ask: MergeAsk,
    pinned: String,
}

/// branch_diff and branch_merge: the agents' branches as the team sees them,
/// with the merge contracts and the approvals they ask for.
pub struct Branches {
    base: Arc<Base>,
    worktrees: Arc<Worktrees>,
    approvals: Arc<Approvals>,
}

impl Branches {
    pub(crate) fn new(
        base: Arc<Base>,
        worktrees: Arc<Worktrees>,
        approvals: Arc<Approvals>,
    ) -> Self {
        Self {
            base,
            worktrees,
            approvals,
        }
    }

    /// The branch of the worktree agent `target`.
    pub(super) async fn branch_of(&self, target: &str) -> Result<Branch> {
        let rec = self.base.registry.agent_get(target).await?;
        let wf = WorkflowRef::parse(&rec.view.workflow)?;
        let name = rec.view.name.clone();
        let Some(Workspace::Worktree(w)) = rec.view.workspace else {
            return Err(Error::invalid(format!(
                "{name} has no worktree (its workspace is shared), so no branch of its own: give it \
                 workspace: worktree (agent_update)"
            )));
        };
        let (Some(top), Some(branch)) = (w.repo.clone(), w.branch.clone()) else {
            return Err(Error::invalid(format!("{name}'s worktree is not made yet")));
        };
        Ok(Branch {
            id: rec.id,
            workflow_id: rec.workflow_id,
            wf,
            name,
            w,
            top,
            branch,
        })
    }

    /// branch_diff: an agent's branch against its base, a ref or a teammate's branch.
    pub async fn branch_diff(&self, scope: &Scope, a: DiffArgs<'_>) -> Result<BranchDiff> {
        let max_bytes = a.max_bytes.unwrap_or(diff::DEFAULT_BYTES);
        if max_bytes == 0 || max_bytes > diff::MAX_BYTES {
            return Err(Error::invalid(format!(
                "max_bytes: 1..={} (default {})",
                diff::MAX_BYTES,
                diff::DEFAULT_BYTES
            )));
        }
        let b = self.branch_of(&team_target(scope, a.agent)?).await?;
        let against = match a.against {
            Some(r) if r.starts_with('@') => {
                let other = self.branch_of(&b.sibling(r)).await?;
                same_repository(&b, &other)?;
                other.branch
            }
            Some(r) => r.to_owned(),
            None => base_of(&b)?,
        };
        let ask = DiffAsk {
            against: &against,
            file: a.file,
            content: a.content,
            max_bytes,
        };
        diff::diff(&b.top, &b.branch, &ask)
            .await
            .map_err(Error::invalid)
    }

    /// branch_merge, as the lead asks it: contracts first, then the merge.
    pub async fn branch_merge(self: &Arc<Self>, ask: MergeAsk) -> Result<MergeOut> {
        let mode = Mode::parse(Some(&ask.mode)).map_err(Error::invalid)?;
        let b = self.branch_of(&ask.agent).await?;
        let plan = self.plan(&b, &ask).await?;
        if let Some(held) = self.merge_contracts(&b, &ask, mode, &plan).await? {
            return Ok(held);
        }
        self.merge_planned(&b, &ask, mode, plan).await
    }

    /// What a merge would bring where.
    async fn plan(&self, b: &Branch, ask: &MergeAsk) -> Result<Plan> {
        if ask.from.is_some() && ask.into.is_some() {
            return Err(Error::invalid(
                "give into (the agent's branch goes there) or from (that comes into the agent's \
                 branch), not both",
            ));
        }
        if let Some(from) = ask.from.as_deref() {
            let (name, rev) = if from.starts_with('@') {
                let other = self.branch_of(&b.sibling(from)).await?;
                same_repository(b, &other)?;
                (other.branch.clone(), format!("refs/heads/{}", other.branch))
            } else {
                (from.to_owned(), from.to_owned())
            };
            let commit = diff::commit_of(&b.top, &rev).await.map_err(|_| {
                Error::invalid(format!("from: {from:?} is not a branch, tag or commit"))
            })?;
            return Ok(Plan {
                incoming: (name, commit),
                into: b.branch.clone(),
                into_agent: Some(b.clone()),
            });
        }
        let (into, into_agent) = match ask.into.as_deref() {
            Some(i) if i.starts_with('@') => {
                let other = self.branch_of(&b.sibling(i)).await?;
                same_repository(b, &other)?;
                (other.branch.clone(), Some(other))
            }
            Some(i) => (i.to_owned(), None),
            None => (base_of(b)?, None),
        };
        if into == b.branch {
            return Err(Error::invalid(format!(
                "into: {into} is {}'s own branch",
                b.name
            )));
        }
        let head = diff::commit_of(&b.top, &format!("refs/heads/{}", b.branch))
            .await
            .map_err(|e| Error::conflict(format!("{}'s branch: {e}", b.name)))?;
        Ok(Plan {
            incoming: (b.branch.clone(), head),
            into,
            into_agent,
        })
    }

    /// What contracts on `merge` say: Err when one refuses, the held answer when
    /// an approval must come first, None to go on.
    async fn merge_contracts(
        self: &Arc<Self>,
        b: &Branch,
        ask: &MergeAsk,
        mode: Mode,
        plan: &Plan,
    ) -> Result<Option<MergeOut>> {
        let all = self.base.contracts.all();
        let v = contracts::decide(
            in_force(&all, b.workflow_id, &b.wf),
            &Ev::Merge {
                agent: &b.name,
                into: &plan.into,
                mode: mode.as_str(),
            },
        );
        if !v.any() {
            return Ok(None);
        }
        let detail = format!(
            "{}'s branch: {} @{} into {} ({})",
            b.name,
            plan.incoming.0,
            short(&plan.incoming.1),
            plan.into,
            mode.as_str()
        );
        let held = serde_json::to_string(&HeldMerge {
            ask: ask.clone(),
            pinned: plan.incoming.1.clone(),
        })
        .map_err(|e| Error::internal(e.to_string()))?;
        let verdict = VerdictOf {
            workflow_id: b.workflow_id,
            workflow: b.wf.clone(),
            agent_id: b.id,
            agent: b.name.clone(),
            run_id: None,
            event: "merge",
            title: format!("merge {detail}"),
            detail,
            held: Some(held),
            refuses: Some("this merge"),
            done_when_approved: true,
        };
        let now = self.base.clock.now_ms();
        let (posted, outcome) = self
            .base
            .store
            .write(move |c| verdict.record_tx(c, &v, now))
            .await?;
        for p in &posted {
            self.base.messaging.announce(b.workflow_id, p);
        }
        let (id, asked) = match outcome.map_err(Error::forbidden)? {
            None => return Ok(None),
            Some(x) => x,
        };
        if let Some(timeout) = asked {
            self.base.events.publish(Event::ApprovalAsked {
                workflow_id: b.workflow_id,
                id,
            });
            self.approvals.arm(id, timeout);
        }
        let mut out = MergeOut::new(&plan.incoming.0, &plan.into);
        out.status = Status::Held;
        out.approval = Some(id);
        out.note = Some(format!(
            "a contract asks for approval {id} first; the merge of {} is done when it is \
             approved, and its outcome is posted to you",
            short(&plan.incoming.1)
        ));
        Ok(Some(out))
    }

    /// The merge itself, as planned (contracts have allowed it).
    async fn merge_planned(
        &self,
        b: &Branch,
        ask: &MergeAsk,
        mode: Mode,
        plan: Plan,
    ) -> Result<MergeOut> {
        let busy = |n: &str| {
            Error::conflict(format!(
                "{n} is running (its worktree is in use); merge when it is idle, or pause it \
                 (agent_pause)"
            ))
        };
        let (label, commit) = &plan.incoming;
        let default = match (&ask.from, mode) {
            (Some(_), _) => format!("Merge {label} into {}'s branch {}", b.name, plan.into),
            (None, Mode::Squash) => format!("{}'s work on {label}, squashed", b.name),
            (None, _) => format!("Merge {}'s branch {label} into {}", b.name, plan.into),
        };
        let message = ask.message.clone().unwrap_or(default);
        let out = match (&ask.from, &plan.into_agent) {
            (Some(_), Some(me)) => {
                let _held = self
                    .worktrees
                    .try_hold(&me.wf, &me.name)
                    .ok_or_else(|| busy(&me.name))?;
                let path = self.worktrees.path(&me.wf, &me.name);
                let at = verify(&path, &me.w).await.map_err(Error::conflict)?;
                let note = format!("{}: left uncommitted before a sync", me.name);
                commit_all(at, &author(&me.wf, &me.name), &note)
                    .await
                    .map_err(Error::conflict)?;
                merge::into_worktree(at, (label, commit), &me.branch, &message)
                    .await
                    .map_err(Error::conflict)?
            }
            (_, Some(to)) => {
                let _held = self
                    .worktrees
                    .try_hold(&to.wf, &to.name)
                    .ok_or_else(|| busy(&to.name))?;
                let path = self.worktrees.path(&to.wf, &to.name);
                let at = verify(&path, &to.w).await.map_err(Error::conflict)?;
                merge::into_branch(
                    &b.top,
                    ((label, commit), &plan.into),
                    mode,
                    &message,
                    Target::Checkout(at),
                )
                .await
                .map_err(Error::conflict)?
            }
            (_, None) => {
                let checkout = checked_out(&b.top, &plan.into).await?;
                let target = match &checkout {
                    Some(p) if self.worktrees.is_ours(p) => {
                        return Err(Error::invalid(format!(
                            "into: {} is an agent's branch (checked out in {}): give into as \
                             \"@agent\"",
                            plan.into,
                            p.display()
                        )));
                    }
                    Some(p) => Target::Checkout(At::Repo(p)),
                    None => Target::Ref,
                };
                merge::into_branch(
                    &b.top,
                    ((label, commit), &plan.into),
                    mode,
                    &message,
                    target,
                )
                .await
                .map_err(Error::conflict)?
            }
        };
        Ok(self.after_merge(b, ask, out).await)
    }

    /// After a merge: an agent's branch that moved is announced; a sync that
    /// conflicts wakes the agent to resolve it.
    async fn after_merge(&self, b: &Branch, ask: &MergeAsk, mut out: MergeOut) -> MergeOut {
        let into_agent = match &ask.into {
            Some(i) if i.starts_with('@') => Some(i.trim_start_matches('@').to_owned()),
            _ => ask.from.as_ref().map(|_| b.name.clone()),
        };
        if let (Some(agent), Status::Merged) = (into_agent, out.status) {
            self.base.events.publish(Event::BranchMoved {
                workflow_id: b.workflow_id,
                agent,
            });
        }
        if ask.from.is_none() || out.status != Status::Conflict {
            return out;
        }
        let files: Vec<&str> = out.conflicts.iter().map(|c| c.file.as_str()).collect();
        let text = format!(
            "merging {} into your branch conflicts in {}: the conflict markers are in your \
             folder. Resolve them (keep what both sides meant), and end your run; your run's \
             commit concludes the merge.",
            out.from,
            files.join(", ")
        );
        let (wid, wf, to) = (b.workflow_id, b.wf.clone(), vec![b.name.clone()]);
        let now = self.base.clock.now_ms();
        match self
            .base
            .store
            .write(move |c| post_system_to(c, wid, &wf, &to, &text, now))
            .await
        {
            Ok(p) => self.base.messaging.announce(b.workflow_id, &p),
            Err(e) => tracing::warn!(agent = %b.name, "cannot tell it of the conflict: {e}"),
        }
        out.note = Some(format!(
            "the markers are left in {}'s worktree and it was asked to resolve them; merge its \
             branch again after its run",
            b.name
        ));
        out
    }

    /// An approval that held a merge was decided: the merge is done (as pinned)
    /// when it was approved; either way the lead is told.
    pub(crate) async fn held_merge_closed(self: &Arc<Self>, r: MergeClosed) -> Result<()> {
        let (id, allowed) = (r.id, r.allowed);
        let held = self
            .base
            .store
            .read(move |c| approvals::held_of(c, id))
            .await?;
        let Some(held) = held.and_then(|h| serde_json::from_str::<HeldMerge>(&h).ok()) else {
            tracing::warn!(approval = id, "a merge approval holds no merge it can read");
            return Ok(());
        };
        let text = if allowed {
            match self.merge_pinned(&held).await {
                Ok(out) => format!("approval {id}: {}", summary(&out)),
                Err(e) => format!("approval {id}: the merge could not be done: {e}"),
            }
        } else {
            format!(
                "approval {id}: the merge was not approved ({}); nothing was merged",
                r.reason.clone().unwrap_or_default()
            )
        };
        let (wid, wf) = (r.workflow_id, r.workflow.clone());
        let now = self.base.clock.now_ms();
        let posted = self
            .base
            .store
            .write(move |c| post_system_to(c, wid, &wf, &[LEAD.to_owned()], &text, now))
            .await?;
        self.base.messaging.announce(r.workflow_id, &posted);
        Ok(())
    }

    /// The merge an approval held, of the commit it was asked about.
    async fn merge_pinned(&self, held: &HeldMerge) -> Result<MergeOut> {
        let mode = Mode::parse(Some(&held.ask.mode)).map_err(Error::invalid)?;
        let b = self.branch_of(&held.ask.agent).await?;
        let mut plan = self.plan(&b, &held.ask).await?;
        plan.incoming.1 = held.pinned.clone();
        self.merge_planned(&b, &held.ask, mode, plan).await
    }
}

/// One line on a merge's outcome.
pub fn summary(out: &MergeOut) -> String {
    match out.status {
        Status::Merged => format!(
            "{} was merged into {} ({}, now at {})",
            out.from,
            out.into,
            out.how.as_deref().unwrap_or("merged"),
            out.commit.as_deref().map(short).unwrap_or_default()
        ),
        Status::UpToDate => format!("{} already has all of {}", out.into, out.from),
        Status::Conflict => format!(
            "merging {} into {} conflicts in {}; {}",
            out.from,
            out.into,
            out.conflicts
                .iter()
                .map(|c| c.file.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            out.note.as_deref().unwrap_or("nothing was written")
        ),
        Status::Held => format!(
            "the merge waits for approval {}",
            out.approval.map(|a| a.to_string()).unwrap_or_default()
        ),
    }
}

/// The target of `agent` as the caller names it: the lead any agent (a bare name
/// in the instance it acts in), an agent only a teammate.
fn team_target(scope: &Scope, agent: &str) -> Result<String> {
    let agent = agent.trim().trim_start_matches('@');
    if agent.contains('@') {
        if scope.lead {
            return Ok(agent.to_owned());
        }
        return Err(Error::forbidden(
            "agent: name a member of your own team (\"bob\"); other teams' branches are theirs",
        ));
    }
    Ok(format!(
        "{agent}@{}:{}",
        scope.workflow.name, scope.workflow.tag
    ))
}

/// The branch an agent's was made from (its commit, when that was no branch).
fn base_of(b: &Branch) -> Result<String> {
    b.w.base_branch
        .clone()
        .or_else(|| b.w.base_commit.clone())
        .ok_or_else(|| Error::invalid(format!("{}'s worktree has no recorded base", b.name)))
}

fn same_repository(a: &Branch, b: &Branch) -> Result<()> {
    if a.top == b.top {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "{} works in {} and {} in {}: branches of different repositories",
        a.name,
        a.top.display(),
        b.name,
        b.top.display()
    )))
}

/// The folder where `branch` is checked out, if any.
async fn checked_out(top: &Path, branch: &str) -> Result<Option<PathBuf>> {
    let list = git(At::Repo(top), &["worktree", "list", "--porcelain"])
        .await
        .map_err(Error::conflict)?;
    let want = format!("branch refs/heads/{branch}");
    let mut at = None;
    for line in list.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            at = Some(PathBuf::from(p));
        } else if line == want {
            return Ok(at);
        }
    }
    Ok(None)
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(10)]
}
