//! Agents as things that run: making one (with its schedule), changing it,
//! deleting it (its worker stopped first), and what it did (agent_info). The rows
//! themselves are the registry's; this is where they meet the runtime.
//!
//! agent_update: only the fields given change; the result is checked as a whole,
//! exactly as agent_new checks a new agent (a profile its backend cannot express, a server
//! of the wrong shape, a folder that does not exist: refused, nothing changed). A
//! run in progress keeps what it started with; the next run gets the new
//! configuration. A new folder starts a new CLI conversation (a CLI's session
//! belongs to its folder); the sdk backend starts afresh by itself when its model,
//! system prompt or folder changed.

mod info;

pub use info::{AgentInfo, InboxCounts};

use crate::events::Event;
use crate::registry::config::AgentConfig;
use crate::registry::{AgentView, NewAgent, insert_agent_tx, validate};
use crate::runtime::base::Base;
use crate::runtime::nodes::Nodes;
use crate::runtime::nodes::placing::{move_tx, stays_with_worktree};
use crate::runtime::running::Running;
use crate::runtime::scheduler::Scheduler;
use crate::runtime::schedules;
use crate::runtime::skills::Skills;
use crate::runtime::workers::Workers;
use crate::runtime::worktrees::Worktrees;
use domain::error::{Error, Result};
use domain::guards::Budget;
use domain::names::WorkflowRef;
use domain::permissions::Permissions;
use domain::placement::Placement;
use domain::protocol::McpServer;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use store::sql;
use store::sql::OptionalExtension;

/// What to change. `Some("")` clears model, system or cwd (back to the default).
#[derive(Debug, Clone, Default)]
pub struct AgentUpdate {
    pub permissions: Option<Permissions>,
    pub model: Option<String>,
    pub system: Option<String>,
    pub cwd: Option<String>,
    /// Replaces the whole env.
    pub env: Option<BTreeMap<String, String>>,
    pub budget: Option<Budget>,
    /// Replaces the whole set.
    pub mcp_servers: Option<BTreeMap<String, McpServer>>,
    pub max_steps: Option<u32>,
    /// A new workspace: a worktree is made, or removed with its branch kept.
    pub workspace: Option<domain::workspace::Workspace>,
    /// Replaces the whole set (empty: none).
    pub skills: Option<Vec<std::path::PathBuf>>,
    /// The live node to run it from now on, or the labels it needs (see
    /// [`Agents::move_agent`]).
    pub node: Option<domain::placement::Placement>,
    /// What it may delegate from now on (`Some(None)`: nothing; its sub-agents stay).
    pub delegate: Option<Option<domain::delegate::Delegate>>,
}

impl AgentUpdate {
    pub fn is_empty(&self) -> bool {
        self.permissions.is_none()
            && self.model.is_none()
            && self.system.is_none()
            && self.cwd.is_none()
            && self.env.is_none()
            && self.budget.is_none()
            && self.mcp_servers.is_none()
            && self.max_steps.is_none()
            && self.workspace.is_none()
            && self.node.is_none()
            && self.skills.is_none()
            && self.delegate.is_none()
    }
}

impl AgentUpdate {
    /// The changes made to the stored configuration as they are (checked after).
    fn apply_to(&mut self, config: &mut AgentConfig) {
        if let Some(p) = self.permissions.take() {
            config.permissions = p;
        }
        if let Some(s) = self.mcp_servers.take() {
            config.mcp_servers = s;
        }
        if let Some(b) = self.budget.take() {
            config.budget = Some(b);
        }
        if let Some(n) = self.max_steps {
            config.max_steps = Some(n);
        }
        if let Some(d) = self.delegate.clone() {
            config.delegate = d;
        }
    }
}

fn cleared(v: Option<String>, current: Option<String>) -> Option<String> {
    match v {
        None => current,
        Some(s) if s.trim().is_empty() => None,
        Some(s) => Some(s.trim().to_owned()),
    }
}

/// Agents' lifecycle as things that run: created, changed (one change of an
/// agent at a time: the per-agent locks only its methods take), paused, moved,
/// deleted, and what they did.
pub struct Agents {
    base: Arc<Base>,
    running: Arc<Running>,
    workers: Arc<Workers>,
    scheduler: Arc<Scheduler>,
    nodes: Arc<Nodes>,
    worktrees: Arc<Worktrees>,
    skills: Arc<Skills>,
    /// One lock per agent for changes that read its configuration, change it and
    /// write it back (agent_update): two at once never lose one another's change.
    changing: Mutex<HashMap<i64, Arc<tokio::sync::Mutex<()>>>>,
}

/// The services [`Agents`] acts through.
pub(crate) struct Services {
    pub running: Arc<Running>,
    pub workers: Arc<Workers>,
    pub scheduler: Arc<Scheduler>,
    pub nodes: Arc<Nodes>,
    pub worktrees: Arc<Worktrees>,
    pub skills: Arc<Skills>,
}

impl Agents {
    pub(crate) fn new(base: Arc<Base>, s: Services) -> Self {
        Self {
            base,
            running: s.running,
            workers: s.workers,
            scheduler: s.scheduler,
            nodes: s.nodes,
            worktrees: s.worktrees,
            skills: s.skills,
            changing: Mutex::default(),
        }
    }

    /// Checks where a new agent asks to run: a worktree agent runs here (labels it
    /// asks must be this node's); an agent without a worker runs nowhere.
    fn check_placement(&self, a: &NewAgent, n: &Placement) -> Result<()> {
        if crate::registry::has_no_worker(&a.backend) {
            return Err(Error::invalid(format!(
                "node: a {} agent has no worker, so it runs on no node; leave node out",
                a.backend
            )));
        }
        if !a.config.workspace.is_worktree() {
            return Ok(());
        }
        let here = match n {
            Placement::Node(n) => n == &self.base.node,
            Placement::Labels(l) => {
                domain::placement::satisfies(&self.base.labels, &domain::placement::to_text(l))
            }
        };
        if here {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "node: a worktree agent runs on the node that makes its worktree (its data dir \
             holds it), {}, which is not the node asked for; leave node out, or ask the kernel \
             of a node that fits",
            self.base.node
        )))
    }

    pub async fn agent_new(&self, a: NewAgent) -> Result<AgentView> {
        validate(&a)?;
        self.skills.read_dirs(&a.config.skills).await?;
        if let Some((_, Some(p))) = &a.schedule
            && p.chars().count() > schedules::MAX_PROMPT_CHARS
        {
            return Err(Error::invalid(format!(
                "the schedule's prompt is over {} characters; put long instructions in a document",
                schedules::MAX_PROMPT_CHARS
            )));
        }
        let wf = match &a.workflow {
            Some(w) if !w.trim().is_empty() => WorkflowRef::parse(w)?,
            _ => WorkflowRef::global(),
        };
        if wf
            .name
            .to_ascii_lowercase()
            .starts_with(domain::names::ORG_PREFIX)
        {
            return Err(Error::invalid(format!(
                "workflow: {wf} holds an organisation's channel and documents; its members are set with \
                 org_set (members), not agent_new"
            )));
        }
        if let Some(n) = &a.node {
            self.check_placement(&a, n)?;
        }
        let (me, now) = (self.base.node.clone(), self.base.clock.now_ms());
        let (mut config, wf_of) = (a.config.clone(), wf.clone());
        let (workflow_id, id, mut view, next) = self
            .base
            .store
            .write(move |c| {
                // A worktree agent stays on this node, whose data dir holds its worktree.
                let here = Placement::Node(me.clone());
                let asked = match a.config.workspace.is_worktree() {
                    true => Some(&here),
                    false => a.node.as_ref(),
                };
                let node = match crate::registry::has_no_worker(&a.backend) {
                    true => None,
                    false => Some(super::nodes::place_tx(c, &me, asked)?),
                };
                let (wid, id, view) = insert_agent_tx(c, &a, &wf, node.as_deref(), now)?;
                let next = match &a.schedule {
                    Some((t, prompt)) => Some(schedules::set_tx(c, id, t, prompt.as_deref(), now)?),
                    None => None,
                };
                Ok((wid, id, view, next))
            })
            .await?;
        if config.workspace.is_worktree() {
            let cwd = view.cwd.clone();
            self.worktrees
                .make_worktree_of_new(id, &wf_of, &view.name, cwd.as_deref(), &mut config)
                .await?;
            view.workspace = Some(config.workspace);
        }
        if next.is_some() {
            self.scheduler.arm_schedule(id, next);
        }
        self.base.events.publish(Event::AgentChanged {
            workflow_id,
            name: view.name.clone(),
        });
        Ok(view)
    }

    /// Deletes an agent: revokes its tokens and drops its open deliveries. The channel,
    /// its messages and documents stay; if it owned the documents, nobody does now.
    /// The agents it made (delegation) go first, deepest first, workers and all.
    pub async fn agent_delete(
        self: &std::sync::Arc<Self>,
        target: &str,
        discard: bool,
    ) -> Result<(AgentView, Option<String>)> {
        let rec = self.base.registry.agent_get(target).await?;
        let (id, wid) = (rec.id, rec.workflow_id);
        for sub in self.sub_agent_targets(id, &rec.view.workflow).await? {
            match Box::pin(self.agent_delete(&sub, false)).await {
                Ok(_) | Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let name = rec.view.name.clone();
        let (_, config) = self.stored_env_and_config(id).await?;
        if discard && !config.workspace.is_worktree() {
            return Err(Error::invalid(format!(
                "discard: {name} has no worktree (its workspace is shared); leave discard out"
            )));
        }
        // Its worker goes first, so no run writes after the agent is gone.
        self.set_paused(id, true).await?;
        self.running.forget(id);
        // Then its worktree: what is in it committed, the branch kept unless discarded.
        let worktree = match WorkflowRef::parse(&rec.view.workflow) {
            Ok(wf) => {
                self.worktrees
                    .remove_worktree_of(&wf, &name, &config, discard)
                    .await?
            }
            Err(_) => None,
        };
        // Then its own folder, while the name is still taken (a new agent of the
        // name cannot claim it in between). Nothing of it may reach a later agent
        // of the name; one on another node empties what is left there at its
        // first run (own_folder::claim).
        if let Ok(w) = domain::names::WorkflowRef::parse(&rec.view.workflow) {
            let (name, dir) = (&rec.view.name, self.base.workspace_dir(&w, &rec.view.name));
            // And its CLI's home, kept until now for its conversations.
            let home = super::workers::home::dir(&self.base.data_dir, id);
            let removed = tokio::task::spawn_blocking(move || {
                let folder = super::own_folder::remove(&dir);
                super::workers::home::remove(&home).and(folder)
            })
            .await
            .map_err(std::io::Error::other);
            if let Err(e) | Ok(Err(e)) = removed {
                tracing::warn!(agent = %name, "its folder could not be removed: {e}");
            }
        }

        let now = self.base.clock.now_ms();
        self.base
            .store
            .write(move |c| {
                crate::registry::revoke::agent_tx(c, id, now)?;
                crate::messaging::runs::forget_member_tx(c, wid, &name)?;
                crate::messaging::results::forget_agent_tx(c, wid, &name)?;
                schedules::clear_tx(c, id)?;
                crate::registry::hand_spending_up_tx(c, id)?;
                c.execute("DELETE FROM agents WHERE id = ?1", [id])?;
                // An owner that no longer exists would lock everyone but the lead out.
                crate::context::departed::forget_owner_tx(c, wid, &name)?;
                Ok(())
            })
            .await?;
        self.base.registry.tokens.forget_agent(id);
        self.base.events.publish(Event::AgentChanged {
            workflow_id: wid,
            name: rec.view.name.clone(),
        });
        Ok((rec.view, worktree))
    }

    /// An agent's stored env and permissions (the view hides env values).
    pub async fn agent_env_and_permissions(
        &self,
        target: &str,
    ) -> Result<(BTreeMap<String, String>, Permissions)> {
        let id = self.base.registry.agent_get(target).await?.id;
        let (env, config) = self.stored_env_and_config(id).await?;
        Ok((env, config.permissions))
    }

    /// The agent row's env and config as stored (the view hides secrets).
    async fn stored_env_and_config(
        &self,
        id: i64,
    ) -> Result<(BTreeMap<String, String>, AgentConfig)> {
        let (env, config): (String, String) = self
            .base
            .store
            .read(move |c| {
                c.query_row("SELECT env, config FROM agents WHERE id = ?1", [id], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()?
                .ok_or_else(|| Error::not_found("the agent was deleted"))
            })
            .await?;
        Ok((
            serde_json::from_str(&env).unwrap_or_default(),
            serde_json::from_str(&config).unwrap_or_default(),
        ))
    }

    pub async fn agent_update(
        self: &std::sync::Arc<Self>,
        target: &str,
        u: AgentUpdate,
    ) -> Result<AgentView> {
        if u.is_empty() {
            return Err(Error::invalid(
                "nothing to change: give at least one of permissions, model, system, cwd, env, budget, \
                 mcp_servers, max_steps, workspace, skills, node, delegate",
            ));
        }
        let mut u = u;
        if let Some(node) = u.node.take() {
            if !u.is_empty() {
                return Err(Error::invalid(
                    "node moves the agent and goes alone: make the other changes in another agent_update",
                ));
            }
            self.move_agent(target, &node).await?;
            return Ok(self.base.registry.agent_get(target).await?.view);
        }
        let rec = self.base.registry.agent_get(target).await?;
        let id = rec.id;
        let _changing = self.changing(id).await;
        // The stored config (the view hides secrets, so read the row itself).
        let (mut env, mut config) = self.stored_env_and_config(id).await?;
        u.apply_to(&mut config);
        if let Some(s) = u.skills.take() {
            self.skills.read_dirs(&s).await?;
            config.skills = s;
        }
        if let Some(e) = u.env {
            env = e;
        }
        let delegates = u.delegate.is_some();
        let v = &rec.view;
        let merged = NewAgent {
            name: v.name.clone(),
            backend: v.backend.clone(),
            model: cleared(u.model, v.model.clone()),
            system: cleared(u.system, v.system.clone()),
            workflow: Some(v.workflow.clone()),
            cwd: cleared(u.cwd, v.cwd.clone()),
            env,
            config,
            schedule: None,
            node: v.node.clone().map(domain::placement::Placement::Node),
            parent: None,
        };
        crate::registry::validate(&merged)?;
        let mut merged = merged;
        let old_workspace = merged.config.workspace.clone();
        if let Some(ws) = u.workspace {
            let wf = WorkflowRef::parse(&v.workflow)?;
            let cwd = merged.cwd.clone();
            merged.config.workspace = self
                .worktrees
                .change_workspace((id, &wf, &v.name), &old_workspace, ws, cwd.as_deref())
                .await?;
        }
        let moved = merged.cwd != v.cwd || merged.config.workspace != old_workspace;
        let (env, config) = (
            serde_json::to_string(&merged.env).map_err(|e| Error::internal(e.to_string()))?,
            serde_json::to_string(&merged.config).map_err(|e| Error::internal(e.to_string()))?,
        );
        let (model, system, cwd) = (merged.model, merged.system, merged.cwd);
        self.base
            .store
            .write(move |c| {
                c.execute(
                    "UPDATE agents SET model = ?2, system = ?3, cwd = ?4, env = ?5, config = ?6,
                       session_id = CASE WHEN ?7 THEN NULL ELSE session_id END,
                       session_usage = CASE WHEN ?7 THEN NULL ELSE session_usage END
                     WHERE id = ?1",
                    sql::params![id, model, system, cwd, env, config, moved],
                )?;
                Ok(())
            })
            .await?;
        if delegates {
            // Its identity says whether it is shown the delegation tools: read it again.
            self.base.registry.tokens.forget_agent(id);
        }
        self.base.events.publish(Event::AgentChanged {
            workflow_id: rec.workflow_id,
            name: rec.view.name.clone(),
        });
        Ok(self.base.registry.agent_get(target).await?.view)
    }
}

impl Agents {
    /// The agent's change lock, held until the guard is dropped.
    async fn changing(&self, id: i64) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut m = self.changing.lock().unwrap();
            // Locks nobody holds any more go, so the map stays as small as the work.
            m.retain(|_, l| std::sync::Arc::strong_count(l) > 1);
            m.entry(id).or_default().clone()
        };
        lock.lock_owned().await
    }

    /// The agents `id` made and theirs (delegation), deepest first, as targets in
    /// its instance (where they live).
    async fn sub_agent_targets(&self, id: i64, workflow: &str) -> Result<Vec<String>> {
        let wf = WorkflowRef::parse(workflow)?;
        let names: Vec<String> = self
            .base
            .store
            .read(move |c| {
                let mut out = Vec::new();
                for sub in crate::registry::sub_agents(c, id)? {
                    let n: Option<String> = c
                        .query_row("SELECT name FROM agents WHERE id = ?1", [sub], |r| r.get(0))
                        .optional()?;
                    out.extend(n);
                }
                Ok(out)
            })
            .await?;
        Ok(names
            .into_iter()
            .map(|name| {
                domain::names::AgentRef {
                    name,
                    workflow: wf.clone(),
                }
                .to_string()
            })
            .collect())
    }

    /// Sets an agent's lifecycle state to paused (stopping its run) or back to idle,
    /// and the agents it made (delegation) with it.
    pub async fn set_paused(self: &Arc<Self>, agent_id: i64, paused: bool) -> Result<()> {
        let subs = self
            .base
            .store
            .read(move |c| crate::registry::sub_agents(c, agent_id))
            .await?;
        self.set_paused_one(agent_id, paused).await?;
        for sub in subs {
            self.set_paused_one(sub, paused).await?;
        }
        Ok(())
    }

    async fn set_paused_one(self: &Arc<Self>, agent_id: i64, paused: bool) -> Result<()> {
        let sql = if paused {
            "UPDATE agents SET state = 'paused' WHERE id = ?1 RETURNING workflow_id, name"
        } else {
            "UPDATE agents SET state = 'idle' WHERE id = ?1 AND state = 'paused' RETURNING workflow_id, name"
        };
        let changed: Option<(i64, String)> = self
            .base
            .store
            .write(move |c| {
                Ok(c.query_row(sql, [agent_id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?)
            })
            .await?;
        // The node that runs it hears of it (a resume there serves its inbox).
        if let Some((workflow_id, name)) = changed {
            self.base
                .events
                .publish(crate::events::Event::AgentChanged { workflow_id, name });
        }
        if paused {
            self.scheduler.forget_agent(agent_id);
            self.nodes.stop_run_anywhere(agent_id).await?;
        } else {
            self.scheduler.resumed(agent_id).await?;
        }
        Ok(())
    }

    /// Moves an agent by hand to the live node `to` names, or gives it the labels
    /// `to` lists (moving it to the least loaded live node with them when its own
    /// lacks them): from then on that node runs it; the messages waiting in its inbox and its schedule follow it (they are in
    /// the store; the node it left forgets it, the new one serves what it is owed,
    /// each told by the bus or here).
    pub async fn move_agent(self: &Arc<Self>, target: &str, to: &Placement) -> Result<()> {
        let rec = self.base.registry.agent_get(target).await?;
        let worktree = matches!(
            &rec.view.workspace,
            Some(domain::workspace::Workspace::Worktree(_))
        );
        // Not while an agent_update of it (a workspace made in this data dir) runs.
        let _changing = self.changing(rec.id).await;
        let (id, name, to_) = (rec.id, rec.view.name.clone(), to.clone());
        let moved = self
            .base
            .store
            .write(move |c| {
                let from = move_tx(c, id, &name, &to_)?;
                if worktree && from.is_some() {
                    return Err(stays_with_worktree(&name, from.as_deref()));
                }
                Ok(from)
            })
            .await?;
        if let Some(from) = &moved {
            tracing::info!(agent = %rec.view.name, %from, ?to, "agent moved by hand");
            self.nodes
                .reconcile_agent(rec.workflow_id, &rec.view.name)
                .await?;
        }
        self.base
            .events
            .publish(crate::events::Event::AgentChanged {
                workflow_id: rec.workflow_id,
                name: rec.view.name,
            });
        Ok(())
    }

    /// An agent's skills as they are now; one that went missing is left out (its
    /// next run says why).
    pub async fn agent_skills(&self, target: &str) -> Result<Vec<domain::skills::Skill>> {
        let rec = self.base.registry.agent_get(target).await?;
        let dirs = rec
            .view
            .skills
            .iter()
            .map(std::path::PathBuf::from)
            .collect();
        self.skills.present(dirs).await
    }
}
