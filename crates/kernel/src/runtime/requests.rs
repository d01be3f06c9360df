//! A worker run's tool request, asked before the tool runs (`permission_request`:
//! the sdk backend's local tools, Claude Code's permission prompt tool). Approvals
//! are in [`super::approvals`], spending and run ends in [`super::spending`].
//!
//! A tool request is answered in this order: the agent's permission profile
//! (contracts never widen it), then the contracts in force (see `domain::contracts`
//! for precedence). An approval holds the asking call: the run is kept alive (its
//! silence is not idleness) until an approver decides or the deadline passes; if
//! the run ends first, the approval is `lost`, never granted by default.

use super::runs::Denial;
use super::voting::{contract_list, open_approval_tx};
use crate::AgentIdentity;
use crate::events::Event;
use crate::governance::approvals::{Ended, NewApproval};
use crate::governance::contracts::{Decision, in_force, record_tx};
use crate::governance::rates;
use crate::messaging::{Posted, post_system_to, preview};
use crate::runtime::approvals::Approvals;
use crate::runtime::base::{Base, Pause};
use crate::runtime::running::Running;
use crate::runtime::workers::Workers;
use domain::contracts::{self, Contract, Event as Ev, Reached};
use domain::error::{Error, Result};
use domain::permissions::{Kind, Profile, Request, request_of};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// The answer to a tool request, in the shape Claude Code's permission prompt tool
/// expects (`behavior` allow or deny, `message` the reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Allow,
    Deny(String),
}

/// Where a read or edit would land: the path the file system reaches (symlinks
/// followed), relative to the agent's folder when inside it (`inside`), else absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reach {
    path: String,
    inside: bool,
}

/// Components of a path resolved at most (a longer one is matched as given).
const MAX_COMPONENTS: usize = 256;

/// The path a write or read of `given` reaches: its longest existing part
/// canonicalized (as the file system follows its symlinks), then the rest; None
/// when that cannot be known beforehand (a `..` in the rest, too many parts).
/// Blocking (file system): call off the async threads.
fn reach(given: &str, cwd: &Path) -> Option<Reach> {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_owned());
    let p = Path::new(given);
    let full = if p.is_absolute() {
        p.to_owned()
    } else {
        cwd.join(p)
    };
    let parts: Vec<Component> = full.components().collect();
    if parts.len() > MAX_COMPONENTS {
        return None;
    }
    let (real, rest) = (1..=parts.len()).rev().find_map(|k| {
        let prefix: PathBuf = parts[..k].iter().collect();
        prefix.canonicalize().ok().map(|r| (r, &parts[k..]))
    })?;
    let mut out = real;
    for c in rest {
        match c {
            Component::Normal(x) => out.push(x),
            // Past a folder that does not exist yet, where `..` lands depends on
            // what the tool makes of it (a folder made first, then a symlink
            // beside it followed): not known beforehand.
            Component::ParentDir => return None,
            _ => {}
        }
    }
    Some(match out.strip_prefix(&cwd) {
        Ok(rel) => Reach {
            path: match rel.to_string_lossy().into_owned() {
                r if r.is_empty() => ".".into(),
                r => r,
            },
            inside: true,
        },
        Err(_) => Reach {
            path: out.to_string_lossy().into_owned(),
            inside: false,
        },
    })
}

/// [`reach`] for a read or edit, off the async threads.
async fn reach_of(req: &Request, cwd: &Path) -> Option<Reach> {
    let (Request::Read { path } | Request::Edit { path }) = req else {
        return None;
    };
    let (path, cwd) = (path.clone(), cwd.to_owned());
    tokio::task::spawn_blocking(move || reach(&path, &cwd))
        .await
        .ok()
        .flatten()
}

/// What the agent's permission profile alone says of a request: its own denials,
/// and files outside the agent's folder (unless the profile is `full`).
fn profile_refusal(
    perms: &domain::permissions::Permissions,
    req: &Request,
    reached: Option<&Reach>,
    cwd: &Path,
) -> Option<String> {
    if let domain::permissions::Decision::Deny(why) = perms.decide(req) {
        return Some(why);
    }
    let outside = matches!(req, Request::Read { .. } | Request::Edit { .. })
        && !reached.is_some_and(|r| r.inside)
        && perms.profile != Profile::Full;
    outside.then(|| {
        format!(
            "refused: {:?} is outside this agent's folder ({}), or leads outside it through a \
             symlink; the {} profile keeps files inside it",
            preview(req.detail()),
            cwd.display(),
            perms.profile.as_str()
        )
    })
}

/// A run's tool requests: its profile first, then the contracts in force, and
/// the approval a contract may ask for (the run waits on it).
pub struct Requests {
    base: Arc<Base>,
    running: Arc<Running>,
    workers: Arc<Workers>,
    approvals: Arc<Approvals>,
}

impl Requests {
    pub(crate) fn new(
        base: Arc<Base>,
        running: Arc<Running>,
        workers: Arc<Workers>,
        approvals: Arc<Approvals>,
    ) -> Self {
        Self {
            base,
            running,
            workers,
            approvals,
        }
    }

    /// permission_request: decides one tool request of a worker run.
    pub async fn tool_request(
        self: &Arc<Self>,
        who: &AgentIdentity,
        tool_name: &str,
        input: &serde_json::Value,
    ) -> Result<Answer> {
        let Some(run_id) = who.run_id.clone() else {
            return Err(Error::forbidden(
                "permission_request is how a worker run asks before a tool runs; a joined client has no run",
            ));
        };
        let Some(req) = request_of(tool_name, input) else {
            return Ok(self.refuse(who, tool_name, "", format!(
                "refused: {tool_name} is not a tool agent-worker can judge, so it is not allowed"
            )));
        };
        if req.kind() == Kind::Team {
            return Ok(Answer::Allow);
        }
        let spec = self.workers.spec(who.agent_id).await?;
        let state_dir = self.base.workspace_dir(&spec.workflow, &spec.name);
        let cwd = self.workers.work_folder(&spec, &state_dir).await;
        let reached = reach_of(&req, &cwd).await;
        if let Some(why) = profile_refusal(&spec.config.permissions, &req, reached.as_ref(), &cwd) {
            return Ok(self.refuse(who, tool_name, req.detail(), why));
        }
        let verdict = self
            .tool_verdict(&spec, &req, reached.map(|r| r.path))
            .await?;
        if !verdict.any() {
            return Ok(Answer::Allow);
        }
        let what = format!(
            "{tool_name} ({}): {}",
            req.kind().as_str(),
            preview(req.detail())
        );
        let (posted, approval) = self
            .record_tool_verdict(&spec, &verdict, &what, &run_id, who.agent_id)
            .await?;
        for p in &posted {
            self.base.messaging.announce(spec.workflow_id, p);
        }
        if let Some((contract, why, pause)) = &verdict.deny {
            self.note_denial(who.agent_id, tool_name, req.detail(), why);
            if *pause {
                self.base
                    .pause(Pause {
                        agent_id: who.agent_id,
                        workflow: &spec.workflow,
                        workflow_id: spec.workflow_id,
                        name: &spec.name,
                        reason: &format!("contract \"{contract}\" paused it: {why}"),
                        auto_from: None,
                    })
                    .await?;
            }
            return Ok(Answer::Deny(why.clone()));
        }
        match approval {
            None => Ok(Answer::Allow),
            Some(asked) => {
                self.approval_answer(
                    who,
                    &run_id,
                    spec.workflow_id,
                    asked,
                    (tool_name, req.detail()),
                )
                .await
            }
        }
    }

    /// Waits for the approval a contract asked of a tool request (`asked`: its id
    /// and timeout) and answers the worker: allowed, or refused and kept with the
    /// run's denials (`what`: the tool and its detail).
    async fn approval_answer(
        self: &Arc<Self>,
        who: &AgentIdentity,
        run_id: &str,
        workflow_id: i64,
        (id, timeout): (i64, std::time::Duration),
        (tool_name, detail): (&str, &str),
    ) -> Result<Answer> {
        self.base
            .events
            .publish(Event::ApprovalAsked { workflow_id, id });
        self.approvals.arm(id, timeout);
        let why = match self.approvals.wait(id, who.agent_id, run_id).await? {
            Ended::Allowed(_) => return Ok(Answer::Allow),
            Ended::Refused(r) => r,
            Ended::Pending => "no decision".into(),
        };
        let why = format!("refused: approval {id} was not given ({why}); nothing was done");
        self.note_denial(who.agent_id, tool_name, detail, &why);
        Ok(Answer::Deny(why))
    }

    /// A refusal by the profile (or an unknown tool): kept with the run.
    fn refuse(&self, who: &AgentIdentity, tool: &str, detail: &str, why: String) -> Answer {
        self.note_denial(who.agent_id, tool, detail, &why);
        Answer::Deny(why)
    }

    /// The contracts' verdict on a tool request (`at`: where a read or edit lands).
    /// Contracts with a rate that match count it first, in a write of their own.
    async fn tool_verdict(
        &self,
        spec: &super::workers::Spec,
        req: &Request,
        at: Option<String>,
    ) -> Result<contracts::Verdict> {
        let all = self.base.contracts.all();
        let force: Vec<&Contract> = in_force(&all, spec.workflow_id, &spec.workflow).collect();
        let event = tool_event(&spec.name, req, at.as_deref());
        let rated: Vec<Contract> = contracts::rated(force.iter().copied(), &event)
            .into_iter()
            .cloned()
            .collect();
        let past = if rated.is_empty() {
            Vec::new()
        } else {
            let (wid, name, req, at) =
                (spec.workflow_id, spec.name.clone(), req.clone(), at.clone());
            let now = self.base.clock.now_ms();
            self.base
                .store
                .write(move |c| {
                    let event = tool_event(&name, &req, at.as_deref());
                    rates::count_tx(c, wid, &name, &rated, &event, now)
                })
                .await?
        };
        Ok(contracts::decide_rated(force, &event, |k| {
            past.contains(&k.name)
        }))
    }

    /// Writes what a contract verdict on a tool request asks: its notices, and its
    /// approval (or, with none, the decision log's entry). The posts to announce,
    /// and the approval's id and timeout.
    async fn record_tool_verdict(
        &self,
        spec: &super::workers::Spec,
        verdict: &contracts::Verdict,
        what: &str,
        run_id: &str,
        agent_id: i64,
    ) -> Result<(Vec<Posted>, Option<(i64, std::time::Duration)>)> {
        let (wid, wf, name) = (spec.workflow_id, spec.workflow.clone(), spec.name.clone());
        let (v2, w2, rid) = (verdict.clone(), what.to_owned(), run_id.to_owned());
        let now = self.base.clock.now_ms();
        self.base.store
            .write(move |c| {
                let mut posted = Vec::new();
                for (contract, to) in &v2.notify {
                    posted.push(post_system_to(
                        c,
                        wid,
                        &wf,
                        to,
                        &format!("contract \"{contract}\": {name} asks to use {w2}."),
                        now,
                    )?);
                }
                let Some(a) = &v2.approval else {
                    record_tx(c, &Decision::of(wid, &name, "tool_request", &w2, &v2), now)?;
                    return Ok((posted, None));
                };
                let new = NewApproval {
                    workflow_id: wid,
                    agent_id,
                    agent: name.clone(),
                    run_id: Some(rid),
                    event: "tool_request".into(),
                    detail: w2.clone(),
                    approval: a.clone(),
                };
                let title = format!("{name} asks to use {w2}");
                let (id, post) = open_approval_tx(c, &wf, new, &title, now, |id, a, too_few| {
                    format!(
                        "approval {id}: {name} asks to use {w2} (contract {}{too_few}). Decide with \
                         approval_decide {{\"id\": {id}, \"decision\": \"approve\"}} or \"deny\" within {}; \
                         until then {name} waits.",
                        contract_list(a),
                        humantime::format_duration(a.timeout)
                    )
                })?;
                posted.push(post);
                Ok((posted, Some((id, a.timeout))))
            })
            .await
    }

    /// Keeps a refusal the kernel made with the run, as agent_info's `denials`.
    fn note_denial(&self, agent_id: i64, tool: &str, detail: &str, why: &str) {
        self.running.note_denial(
            agent_id,
            Denial {
                tool: tool.to_owned(),
                detail: preview(detail),
                reason: why.to_owned(),
            },
        );
    }
}

/// A tool request as contracts see it; `at` is where a read or edit lands (None:
/// it cannot be known beforehand).
fn tool_event<'a>(agent: &'a str, request: &'a Request, at: Option<&'a str>) -> Ev<'a> {
    Ev::Tool {
        agent,
        request,
        reached: match (request, at) {
            (Request::Read { .. } | Request::Edit { .. }, Some(p)) => Reached::At(p),
            (Request::Read { .. } | Request::Edit { .. }, None) => Reached::Unknown,
            _ => Reached::AsGiven,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_matched_where_it_lands() {
        let dir = tempfile::tempdir().unwrap();
        let outer = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        std::fs::create_dir(cwd.join("secrets")).unwrap();
        std::os::unix::fs::symlink(cwd.join("secrets"), cwd.join("alias")).unwrap();
        std::os::unix::fs::symlink(outer.path(), cwd.join("out")).unwrap();
        let r = |p: &str| reach(p, cwd).unwrap();
        assert_eq!(r("alias/e.txt").path, "secrets/e.txt");
        assert_eq!(r("alias/new/deeper.txt").path, "secrets/new/deeper.txt");
        assert_eq!(r("./docs/a.md").path, "docs/a.md");
        assert_eq!(r(".").path, ".");
        let abs = cwd.join("alias/x").display().to_string();
        assert_eq!(r(&abs).path, "secrets/x");
        let o = r("out/x");
        assert!(!o.inside && o.path.ends_with("/x"), "{o:?}");
        // Past a folder that does not exist yet, `..` could land anywhere (here
        // through `out` or `alias`): unknown, not "inside".
        assert_eq!(reach("new/../out/.bashrc", cwd), None);
        assert_eq!(reach("x/../alias/k", cwd), None);
        // A `..` the file system resolves (the folder exists) is followed.
        assert_eq!(r("secrets/../docs.md").path, "docs.md");
    }
}
