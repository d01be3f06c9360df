//! Contracts at work in the runtime: a worker run's tool request (asked before
//! the tool runs), approvals (deciding, waiting, their deadlines), spending
//! (checked before a run starts) and the end of a run.
//!
//! A tool request is answered in this order: the agent's permission profile
//! (contracts never widen it), then the contracts in force (see `crate::contracts`
//! for precedence). An approval holds the asking call: the run is kept alive (its
//! silence is not idleness) until an approver decides or the deadline passes; if
//! the run ends first, the approval is `lost`, never granted by default.

use super::runs::Denial;
use super::scheduler::Wake;
use crate::contracts::{self, Event as Ev, When};
use crate::error::{Error, Result};
use crate::kernel::clock::now_ms;
use crate::kernel::events::Event;
use crate::kernel::governance::approvals::{self, ApprovalView, Ended, NewApproval};
use crate::kernel::governance::contracts::{Decision, in_force, record_tx};
use crate::kernel::messaging::{self, Posted};
use crate::kernel::{AgentIdentity, Caller, Kernel};
use crate::names::{LEAD, WorkflowRef};
use crate::permissions::{Kind, Profile, Request, request_of};
use rusqlite::Connection;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The answer to a tool request, in the shape Claude Code's permission prompt tool
/// expects (`behavior` allow or deny, `message` the reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Allow,
    Deny(String),
}

/// Keeps a run alive while it waits, and forgets the wait however it ends.
struct Waiting<'a> {
    kernel: &'a Kernel,
    id: i64,
    agent_id: i64,
    held_file: Option<PathBuf>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.kernel.approval_waits.lock().unwrap().remove(&self.id);
        if let Some(a) = self
            .kernel
            .workers
            .active
            .lock()
            .unwrap()
            .get(&self.agent_id)
        {
            a.held.store(false, Ordering::Relaxed);
        }
        if let Some(f) = &self.held_file {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// The path of a read or edit relative to the agent's folder, when it is inside.
fn relative(req: &Request, cwd: &Path) -> Option<String> {
    let (Request::Read { path } | Request::Edit { path }) = req else {
        return None;
    };
    let p = Path::new(path);
    let rel = if p.is_absolute() {
        p.strip_prefix(cwd).ok()?
    } else {
        p
    };
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(x) => parts.push(x.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    })
}

fn clip(s: &str) -> String {
    let mut out: String = s.chars().take(300).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// The kernel's own message about a contract, to the members it names.
fn tell(c: &Connection, wid: i64, wf: &WorkflowRef, to: &[String], text: String) -> Result<Posted> {
    let who: String = to.iter().map(|m| format!("@{m} ")).collect();
    messaging::post_system(c, wid, wf, format!("{who}{text}"))
}

impl Kernel {
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
        let spec = self.spec(who.agent_id).await?;
        let cwd = spec.cwd.as_ref().map_or_else(
            || self.workspace_dir(&spec.workflow, &spec.name),
            PathBuf::from,
        );
        let rel = relative(&req, &cwd);
        let perms = &spec.config.permissions;
        if let crate::permissions::Decision::Deny(why) = perms.decide(&req) {
            return Ok(self.refuse(who, tool_name, req.detail(), why));
        }
        if matches!(req, Request::Read { .. } | Request::Edit { .. })
            && rel.is_none()
            && perms.profile != Profile::Full
        {
            let why = format!(
                "refused: {:?} is outside this agent's folder ({}); the {} profile keeps files inside it",
                clip(req.detail()),
                cwd.display(),
                perms.profile.as_str()
            );
            return Ok(self.refuse(who, tool_name, req.detail(), why));
        }
        let all = self.contracts.all();
        let verdict = contracts::decide(
            in_force(&all, spec.workflow_id, &spec.workflow),
            &Ev::Tool {
                agent: &spec.name,
                request: &req,
                relative: rel.as_deref(),
            },
        );
        if !verdict.any() {
            return Ok(Answer::Allow);
        }
        let what = format!(
            "{tool_name} ({}): {}",
            req.kind().as_str(),
            clip(req.detail())
        );
        let (wid, wf, name) = (spec.workflow_id, spec.workflow.clone(), spec.name.clone());
        let v2 = verdict.clone();
        let w2 = what.clone();
        let rid = run_id.clone();
        let agent_id = who.agent_id;
        let (posted, approval) = self
            .store
            .write(move |c| {
                let mut posted = Vec::new();
                for (contract, to) in &v2.notify {
                    posted.push(tell(c, wid, &wf, to, format!(
                        "contract \"{contract}\": {name} asks to use {w2}."
                    ))?);
                }
                let Some(a) = &v2.approval else {
                    record_tx(c, &Decision::of(wid, &name, "tool_request", &w2, &v2))?;
                    return Ok((posted, None));
                };
                let id = approvals::insert_tx(c, &NewApproval {
                    workflow_id: wid,
                    agent_id,
                    agent: name.clone(),
                    run_id: Some(rid),
                    event: "tool_request".into(),
                    detail: w2.clone(),
                    approval: a.clone(),
                })?;
                posted.push(tell(c, wid, &wf, &a.approvers, format!(
                    "approval {id}: {name} asks to use {w2} (contract {}). Decide with approval_decide {{\"id\": {id}, \
                     \"decision\": \"approve\"}} or \"deny\" within {}; until then {name} waits.",
                    a.contracts.iter().map(|x| format!("\"{x}\"")).collect::<Vec<_>>().join(", "),
                    humantime::format_duration(a.timeout)
                ))?);
                Ok((posted, Some((id, a.timeout))))
            })
            .await?;
        for p in &posted {
            self.announce(spec.workflow_id, p);
        }
        if let Some((contract, why, pause)) = &verdict.deny {
            self.note_denial(who.agent_id, tool_name, req.detail(), why);
            if *pause {
                self.pause_with_reason(
                    who.agent_id,
                    &spec.workflow,
                    spec.workflow_id,
                    &spec.name,
                    &format!("contract \"{contract}\" paused it: {why}"),
                    None,
                )
                .await?;
            }
            return Ok(Answer::Deny(why.clone()));
        }
        let Some((id, timeout)) = approval else {
            return Ok(Answer::Allow);
        };
        self.events.publish(Event::ApprovalAsked {
            workflow_id: spec.workflow_id,
            id,
        });
        self.arm_approval(id, timeout);
        let r = match self.wait_approval(id, who.agent_id, &run_id).await? {
            Ended::Allowed(_) => return Ok(Answer::Allow),
            Ended::Refused(r) => r,
            Ended::Pending => "no decision".into(),
        };
        let why = format!("refused: approval {id} was not given ({r}); nothing was done");
        self.note_denial(who.agent_id, tool_name, req.detail(), &why);
        Ok(Answer::Deny(why))
    }

    /// A refusal by the profile (or an unknown tool): kept with the run.
    fn refuse(&self, who: &AgentIdentity, tool: &str, detail: &str, why: String) -> Answer {
        self.note_denial(who.agent_id, tool, detail, &why);
        Answer::Deny(why)
    }

    /// Keeps a refusal the kernel made with the run, as agent_info's `denials`.
    fn note_denial(&self, agent_id: i64, tool: &str, detail: &str, why: &str) {
        if let Some(a) = self.workers.active.lock().unwrap().get(&agent_id) {
            let mut d = a.denials.lock().unwrap();
            if d.len() < super::runs::MAX_DENIALS {
                d.push(Denial {
                    tool: tool.to_owned(),
                    detail: clip(detail),
                    reason: why.to_owned(),
                });
            }
        }
    }

    /// Waits until approval `id` is decided or its deadline passes, keeping the run
    /// alive meanwhile.
    async fn wait_approval(&self, id: i64, agent_id: i64, run_id: &str) -> Result<Ended> {
        let notify = Arc::new(tokio::sync::Notify::new());
        self.approval_waits
            .lock()
            .unwrap()
            .insert(id, notify.clone());
        let held_file = {
            let dir = crate::worker::protocol::scratch_dir(&std::env::temp_dir(), run_id);
            let f = dir.join(crate::worker::protocol::HELD_FILE);
            dir.is_dir()
                .then(|| std::fs::write(&f, b"").ok().map(|_| f))
                .flatten()
        };
        if let Some(a) = self.workers.active.lock().unwrap().get(&agent_id) {
            a.held.store(true, Ordering::Relaxed);
        }
        let _waiting = Waiting {
            kernel: self,
            id,
            agent_id,
            held_file,
        };
        loop {
            let woken = notify.notified();
            let row = self.store.read(move |c| approvals::get(c, id)).await?;
            let Some(row) = row else {
                return Ok(Ended::Refused("it is gone".into()));
            };
            match approvals::ended(&row) {
                Ended::Pending => {}
                done => return Ok(done),
            }
            // The timer closes it at the deadline and wakes us; re-read now and then
            // in case a wake was missed.
            let _ = tokio::time::timeout(Duration::from_secs(5), woken).await;
        }
    }

    /// Closes approval `id` when its deadline passes (if nobody decided first).
    fn arm_approval(self: &Arc<Self>, id: i64, after: Duration) {
        let k = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(after + Duration::from_millis(20)).await;
            if let Some(k) = k.upgrade()
                && let Err(e) = k.expire_approval(id).await
            {
                tracing::warn!(id, "could not close an approval at its deadline: {e}");
            }
        });
    }

    async fn expire_approval(self: &Arc<Self>, id: i64) -> Result<()> {
        let row = self
            .store
            .write(move |c| {
                let Some(r) = approvals::get(c, id)? else {
                    return Ok(None);
                };
                if !approvals::expire_tx(c, &r)? {
                    return Ok(None);
                }
                approvals::get(c, id)
            })
            .await?;
        if let Some(r) = row {
            self.approval_closed(&r).await?;
        }
        Ok(())
    }

    /// At start: approvals of runs that did not survive the restart are lost; the
    /// others (spending) get their deadline timers again.
    pub(crate) async fn recover_approvals(self: &Arc<Self>) -> Result<()> {
        let (lost, open) = self
            .store
            .write(|c| {
                let lost = approvals::lose_orphans_tx(c)?;
                let mut st =
                    c.prepare("SELECT id, deadline FROM approvals WHERE state = 'pending'")?;
                let open: Vec<(i64, i64)> = st
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<rusqlite::Result<_>>()?;
                Ok((lost, open))
            })
            .await?;
        if lost > 0 {
            tracing::warn!(
                lost,
                "approvals asked by runs that ended with the previous kernel are lost"
            );
        }
        let now = now_ms();
        for (id, deadline) in open {
            self.arm_approval(id, Duration::from_millis((deadline - now).max(0) as u64));
        }
        Ok(())
    }

    /// A run ended: approvals it still waited for can no longer be granted.
    pub(super) async fn lose_approvals_of(&self, run_id: &str) {
        let rid = run_id.to_owned();
        match self
            .store
            .write(move |c| approvals::lose_run_tx(c, &rid))
            .await
        {
            Ok(ids) => {
                let waits = self.approval_waits.lock().unwrap();
                for id in ids {
                    if let Some(n) = waits.get(&id) {
                        n.notify_waiters();
                    }
                }
            }
            Err(e) => tracing::warn!(run = run_id, "could not close the run's approvals: {e}"),
        }
    }

    /// approval_decide: one approver's decision (the lead may decide any).
    pub async fn approval_decide(
        self: &Arc<Self>,
        caller: &Caller,
        id: i64,
        approve: bool,
        reason: Option<String>,
    ) -> Result<ApprovalView> {
        if reason
            .as_ref()
            .is_some_and(|r| r.chars().count() > contracts::MAX_REASON_CHARS)
        {
            return Err(Error::invalid(format!(
                "reason is at most {} characters",
                contracts::MAX_REASON_CHARS
            )));
        }
        let (who, only) = match caller {
            Caller::Lead => (LEAD.to_owned(), None),
            Caller::Agent(a) => (a.name.clone(), Some(a.workflow_id)),
        };
        let row = self
            .store
            .write(move |c| {
                if let Some(wid) = only
                    && approvals::get(c, id)?.is_some_and(|r| r.workflow_id != wid)
                {
                    return Err(Error::not_found(format!(
                        "no approval {id} in your workflow"
                    )));
                }
                let r = approvals::decide_tx(c, id, &who, approve, reason.as_deref())?;
                let posted = if r.view.state != "pending" {
                    Some(messaging::post_system(
                        c,
                        r.workflow_id,
                        &r.workflow,
                        format!(
                            "approval {id} ({} asked to use {}) is {}: {}.",
                            r.view.agent,
                            r.view.what,
                            r.view.state,
                            r.view.reason.clone().unwrap_or_default()
                        ),
                    )?)
                } else {
                    None
                };
                Ok((r, posted))
            })
            .await?;
        let (r, posted) = row;
        if let Some(p) = &posted {
            self.announce(r.workflow_id, p);
        }
        if r.view.state != "pending" {
            self.approval_closed(&r).await?;
        }
        Ok(r.view)
    }

    /// approval_list: pending and recent approvals (an agent sees those it asked
    /// for or may decide, in its own instance).
    pub async fn approval_list(
        &self,
        caller: &Caller,
        workflow: Option<&WorkflowRef>,
    ) -> Result<Vec<ApprovalView>> {
        let (wid, member) = match (caller, workflow) {
            (Caller::Agent(a), _) => (Some(a.workflow_id), Some(a.name.clone())),
            (Caller::Lead, Some(wf)) => (Some(self.workflow_id(wf).await?), None),
            (Caller::Lead, None) => (None, None),
        };
        self.store
            .read(move |c| approvals::list(c, wid, member.as_deref()))
            .await
    }

    /// What follows a closed approval: its waiter wakes; a spending approval lets
    /// the held agent run, or pauses it when refused.
    async fn approval_closed(self: &Arc<Self>, r: &approvals::Row) -> Result<()> {
        if let Some(n) = self.approval_waits.lock().unwrap().get(&r.view.id) {
            n.notify_waiters();
        }
        self.events.publish(Event::ApprovalClosed {
            workflow_id: r.workflow_id,
            id: r.view.id,
        });
        if r.view.event != "spend" {
            return Ok(());
        }
        match approvals::ended(r) {
            Ended::Allowed(_) => {
                let wid = r.workflow_id;
                let agents: Vec<i64> = self
                    .store
                    .read(move |c| {
                        let mut st = c.prepare("SELECT id FROM agents WHERE workflow_id = ?1")?;
                        Ok(st
                            .query_map([wid], |r| r.get(0))?
                            .collect::<rusqlite::Result<_>>()?)
                    })
                    .await?;
                for a in agents {
                    self.admit(a, Wake::Resume, None).await;
                }
            }
            _ => {
                self.pause_with_reason(
                    r.agent_id,
                    &r.workflow,
                    r.workflow_id,
                    &r.view.agent,
                    &format!(
                        "approval {} to go on spending was not given ({})",
                        r.view.id,
                        r.view.reason.clone().unwrap_or_default()
                    ),
                    None,
                )
                .await?;
            }
        }
        Ok(())
    }

    /// Before a run starts: what spend contracts say. Returns true when the run
    /// must wait (an approval is open or was just asked for, or the agent paused).
    pub(super) async fn spend_holds(
        self: &Arc<Self>,
        agent_id: i64,
        name: &str,
        workflow: &WorkflowRef,
        workflow_id: i64,
    ) -> Result<bool> {
        let all = self.contracts.all();
        let spend: Vec<contracts::Contract> = in_force(&all, workflow_id, workflow)
            .filter(|c| matches!(c.when, When::Spend { .. }))
            .cloned()
            .collect();
        if spend.is_empty() {
            return Ok(false);
        }
        let (wf, n) = (workflow.clone(), name.to_owned());
        let out = self
            .store
            .write(move |c| {
                let sum = |col: &str, id: i64| -> Result<(u64, f64)> {
                    Ok(c.query_row(
                        &format!("SELECT coalesce(sum(input_tokens + output_tokens), 0), coalesce(sum(cost_usd), 0) FROM runs WHERE {col} = ?1"),
                        [id],
                        |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, f64>(1)?)),
                    )?)
                };
                let (at, au) = sum("agent_id", agent_id)?;
                let (wt, wu) = sum("workflow_id", workflow_id)?;
                let v = contracts::decide(&spend, &Ev::Spend {
                    agent: &n,
                    agent_usd: au,
                    agent_tokens: at,
                    workflow_usd: wu,
                    workflow_tokens: wt,
                });
                let what = format!("spent ${au:.4} and {at} tokens (the workflow ${wu:.4} and {wt} tokens)");
                let once = |contract: &str, outcome: &str| -> Result<bool> {
                    Ok(!c.query_row(
                        "SELECT EXISTS (SELECT 1 FROM contract_decisions WHERE workflow_id = ?1 AND agent = ?2
                           AND event = 'spend' AND outcome = ?3 AND contracts = ?4)",
                        (workflow_id, &n, outcome, serde_json::to_string(&[contract]).unwrap_or_default()),
                        |r| r.get::<_, bool>(0),
                    )?)
                };
                let mut posted = Vec::new();
                for (contract, to) in &v.notify {
                    if once(contract, "notified")? {
                        let mut d = Decision::of(workflow_id, &n, "spend", &what, &contracts::Verdict::default());
                        (d.contracts, d.outcome) = (vec![contract.clone()], "notified".into());
                        record_tx(c, &d)?;
                        posted.push(tell(c, workflow_id, &wf, to, format!("contract \"{contract}\": {n} has {what}."))?);
                    }
                }
                let mut pause = None;
                for (contract, why) in &v.pause {
                    if once(contract, "paused")? {
                        let mut d = Decision::of(workflow_id, &n, "spend", &what, &contracts::Verdict::default());
                        (d.contracts, d.outcome, d.reason) = (vec![contract.clone()], "paused".into(), Some(why.clone()));
                        record_tx(c, &d)?;
                        pause = Some(format!("contract \"{contract}\": {n} has {what}"));
                        break;
                    }
                }
                let mut hold = pause.is_some();
                if let Some(a) = &v.approval {
                    let per_agent = a.contracts.iter().all(|x| {
                        spend.iter().any(|s| s.name == *x && matches!(s.when, When::Spend { per: contracts::Per::Agent, .. }))
                    });
                    let (granted, open) =
                        approvals::spend_state(c, workflow_id, per_agent.then_some(agent_id), &a.contracts)?;
                    if !granted {
                        hold = true;
                        if !open {
                            let id = approvals::insert_tx(c, &NewApproval {
                                workflow_id,
                                agent_id,
                                agent: n.clone(),
                                run_id: None,
                                event: "spend".into(),
                                detail: what.clone(),
                                approval: a.clone(),
                            })?;
                            posted.push(tell(c, workflow_id, &wf, &a.approvers, format!(
                                "approval {id}: {n} has {what} (contract {}); its next run waits until you decide with \
                                 approval_decide {{\"id\": {id}, \"decision\": \"approve\"}} or \"deny\" (within {}).",
                                a.contracts.iter().map(|x| format!("\"{x}\"")).collect::<Vec<_>>().join(", "),
                                humantime::format_duration(a.timeout)
                            ))?);
                            return Ok((posted, pause, hold, Some((id, a.timeout))));
                        }
                    }
                }
                Ok((posted, pause, hold, None))
            })
            .await?;
        let (posted, pause, hold, asked) = out;
        for p in &posted {
            self.announce(workflow_id, p);
        }
        if let Some((id, timeout)) = asked {
            self.events
                .publish(Event::ApprovalAsked { workflow_id, id });
            self.arm_approval(id, timeout);
        }
        if let Some(why) = pause {
            self.pause_with_reason(agent_id, workflow, workflow_id, name, &why, None)
                .await?;
        }
        Ok(hold)
    }

    /// After a run: what run_end contracts say (tell someone, pause the agent).
    pub(super) async fn run_end_contracts(
        self: &Arc<Self>,
        agent_id: i64,
        name: &str,
        workflow: &WorkflowRef,
        workflow_id: i64,
        status: &str,
    ) -> Result<()> {
        let all = self.contracts.all();
        let v = contracts::decide(
            in_force(&all, workflow_id, workflow),
            &Ev::RunEnd {
                agent: name,
                status,
            },
        );
        if !v.any() {
            return Ok(());
        }
        let (wf, n, st, v2) = (
            workflow.clone(),
            name.to_owned(),
            status.to_owned(),
            v.clone(),
        );
        let posted = self
            .store
            .write(move |c| {
                record_tx(
                    c,
                    &Decision::of(workflow_id, &n, "run_end", &format!("a run {st}"), &v2),
                )?;
                let mut posted = Vec::new();
                for (contract, to) in &v2.notify {
                    posted.push(tell(
                        c,
                        workflow_id,
                        &wf,
                        to,
                        format!("contract \"{contract}\": a run of {n} ended {st}."),
                    )?);
                }
                Ok(posted)
            })
            .await?;
        for p in &posted {
            self.announce(workflow_id, p);
        }
        if let Some((contract, why)) = v.pause.first() {
            self.pause_with_reason(
                agent_id,
                workflow,
                workflow_id,
                name,
                &format!("contract \"{contract}\": {why}"),
                None,
            )
            .await?;
        }
        Ok(())
    }
}
