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

use crate::events::Event;
use crate::registry::config::AgentConfig;
use crate::registry::{AgentView, NewAgent, insert_agent_tx, validate};
use crate::runtime::Runtime;
use crate::runtime::schedules;
use domain::clock::now_ms;
use domain::error::{Error, Result};
use domain::guards::Budget;
use domain::names::WorkflowRef;
use domain::permissions::Permissions;
use domain::placement::Placement;
use domain::protocol::McpServer;
use domain::states::DeliveryState;
use schemars::JsonSchema;
use serde::Serialize;
use std::collections::BTreeMap;
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
    /// [`Runtime::move_agent`]).
    pub node: Option<domain::placement::Placement>,
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
    }
}

fn cleared(v: Option<String>, current: Option<String>) -> Option<String> {
    match v {
        None => current,
        Some(s) if s.trim().is_empty() => None,
        Some(s) => Some(s.trim().to_owned()),
    }
}

impl Runtime {
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
            Placement::Node(n) => n == &self.node,
            Placement::Labels(l) => {
                domain::placement::satisfies(&self.labels, &domain::placement::to_text(l))
            }
        };
        if here {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "node: a worktree agent runs on the node that makes its worktree (its data dir \
             holds it), {}, which is not the node asked for; leave node out, or ask the kernel \
             of a node that fits",
            self.node
        )))
    }

    pub async fn agent_new(&self, a: NewAgent) -> Result<AgentView> {
        validate(&a)?;
        self.read_skills(&a.config.skills).await?;
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
        let (me, now) = (self.node.clone(), self.clock.now_ms());
        let (mut config, wf_of) = (a.config.clone(), wf.clone());
        let (workflow_id, id, mut view, next) = self
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
                let (wid, id, view) = insert_agent_tx(c, &a, &wf, node.as_deref())?;
                let next = match &a.schedule {
                    Some((t, prompt)) => Some(schedules::set_tx(c, id, t, prompt.as_deref(), now)?),
                    None => None,
                };
                Ok((wid, id, view, next))
            })
            .await?;
        if config.workspace.is_worktree() {
            let cwd = view.cwd.clone();
            self.make_worktree_of_new(id, &wf_of, &view.name, cwd.as_deref(), &mut config)
                .await?;
            view.workspace = Some(config.workspace);
        }
        if next.is_some() {
            self.arm_schedule(id, next);
        }
        self.events.publish(Event::AgentChanged {
            workflow_id,
            name: view.name.clone(),
        });
        Ok(view)
    }

    /// Deletes an agent: revokes its tokens and drops its open deliveries. The channel,
    /// its messages and documents stay; if it owned the documents, nobody does now.
    pub async fn agent_delete(
        self: &std::sync::Arc<Self>,
        target: &str,
        discard: bool,
    ) -> Result<(AgentView, Option<String>)> {
        let rec = self.registry.agent_get(target).await?;
        let (id, wid) = (rec.id, rec.workflow_id);
        let name = rec.view.name.clone();
        let (_, config) = self.stored_env_and_config(id).await?;
        if discard && !config.workspace.is_worktree() {
            return Err(Error::invalid(format!(
                "discard: {name} has no worktree (its workspace is shared); leave discard out"
            )));
        }
        // Its worker goes first, so no run writes after the agent is gone.
        self.set_paused(id, true).await?;
        self.workers.forget(id);
        // Then its worktree: what is in it committed, the branch kept unless discarded.
        let worktree = match WorkflowRef::parse(&rec.view.workflow) {
            Ok(wf) => {
                self.remove_worktree_of(&wf, &name, &config, discard)
                    .await?
            }
            Err(_) => None,
        };
        // Then its own folder, while the name is still taken (a new agent of the
        // name cannot claim it in between). Nothing of it may reach a later agent
        // of the name; one on another node empties what is left there at its
        // first run (own_folder::claim).
        if let Ok(w) = domain::names::WorkflowRef::parse(&rec.view.workflow) {
            let (name, dir) = (&rec.view.name, self.workspace_dir(&w, &rec.view.name));
            let removed = tokio::task::spawn_blocking(move || super::own_folder::remove(&dir))
                .await
                .map_err(std::io::Error::other);
            if let Err(e) | Ok(Err(e)) = removed {
                tracing::warn!(agent = %name, "its folder could not be removed: {e}");
            }
        }

        self.store
            .write(move |c| {
                c.execute(
                    "UPDATE tokens SET revoked_at = ?2 WHERE agent_id = ?1 AND revoked_at IS NULL",
                    (id, now_ms()),
                )?;
                for table in ["deliveries", "deliveries_done"] {
                    c.execute(
                        &format!("DELETE FROM {table} WHERE workflow_id = ?1 AND recipient = ?2"),
                        (wid, &name),
                    )?;
                }
                c.execute(
                    "DELETE FROM member_status WHERE workflow_id = ?1 AND member = ?2",
                    (wid, &name),
                )?;
                c.execute(
                    "DELETE FROM read_cursors WHERE workflow_id = ?1 AND reader = ?2",
                    (wid, &name),
                )?;
                c.execute("DELETE FROM schedules WHERE agent_id = ?1", [id])?;
                c.execute("DELETE FROM agents WHERE id = ?1", [id])?;
                // An owner that no longer exists would lock everyone but the lead out.
                c.execute(
                    "UPDATE workflows SET document_owner = NULL WHERE id = ?1 AND document_owner = ?2 COLLATE NOCASE",
                    (wid, &name),
                )?;
                Ok(())
            })
            .await?;
        self.registry.tokens.forget_agent(id);
        self.events.publish(Event::AgentChanged {
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
        let id = self.registry.agent_get(target).await?.id;
        let (env, config) = self.stored_env_and_config(id).await?;
        Ok((env, config.permissions))
    }

    /// The agent row's env and config as stored (the view hides secrets).
    async fn stored_env_and_config(
        &self,
        id: i64,
    ) -> Result<(BTreeMap<String, String>, AgentConfig)> {
        let (env, config): (String, String) = self
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
                 mcp_servers, max_steps, workspace, skills, node",
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
            return Ok(self.registry.agent_get(target).await?.view);
        }
        let rec = self.registry.agent_get(target).await?;
        let id = rec.id;
        let _changing = self.changing(id).await;
        // The stored config (the view hides secrets, so read the row itself).
        let (mut env, mut config) = self.stored_env_and_config(id).await?;
        if let Some(p) = u.permissions {
            config.permissions = p;
        }
        if let Some(s) = u.mcp_servers {
            config.mcp_servers = s;
        }
        if let Some(b) = u.budget {
            config.budget = Some(b);
        }
        if let Some(n) = u.max_steps {
            config.max_steps = Some(n);
        }
        if let Some(s) = u.skills {
            self.read_skills(&s).await?;
            config.skills = s;
        }
        if let Some(e) = u.env {
            env = e;
        }
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
        };
        crate::registry::validate(&merged)?;
        let mut merged = merged;
        let old_workspace = merged.config.workspace.clone();
        if let Some(ws) = u.workspace {
            let wf = WorkflowRef::parse(&v.workflow)?;
            let cwd = merged.cwd.clone();
            merged.config.workspace = self
                .change_workspace((id, &wf, &v.name), &old_workspace, ws, cwd.as_deref())
                .await?;
        }
        let moved = merged.cwd != v.cwd || merged.config.workspace != old_workspace;
        let (env, config) = (
            serde_json::to_string(&merged.env).map_err(|e| Error::internal(e.to_string()))?,
            serde_json::to_string(&merged.config).map_err(|e| Error::internal(e.to_string()))?,
        );
        let (model, system, cwd) = (merged.model, merged.system, merged.cwd);
        self.store
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
        self.events.publish(Event::AgentChanged {
            workflow_id: rec.workflow_id,
            name: rec.view.name.clone(),
        });
        Ok(self.registry.agent_get(target).await?.view)
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InboxCounts {
    /// Delivered, not yet read.
    pub pending: i64,
    /// Read, not yet acknowledged.
    pub seen: i64,
    /// Put off until later.
    pub deferred: i64,
    pub acked: i64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AgentInfo {
    pub agent: AgentView,
    /// What the agent last reported with my_status_set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<crate::messaging::team::Status>,
    pub inbox: InboxCounts,
    /// Tokens that currently let something act as this agent (agent_join, runs).
    pub active_tokens: i64,
    /// The run in progress, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<String>,
    /// The most recent runs, newest first (at most 10).
    pub runs: Vec<crate::runtime::runs::RunView>,
    /// Totals over all its runs: how many, how many failed, tokens and cost.
    pub usage: crate::runtime::runs::RunTotals,
    /// Its schedule, if it has one, with the next fire time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<crate::runtime::schedules::ScheduleView>,
    /// Its worktree (workspace: worktree): folder, branch, base and head commits,
    /// commits since the base.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<crate::runtime::worktrees::WorktreeInfo>,
}

impl Runtime {
    pub async fn agent_info(&self, target: &str) -> Result<AgentInfo> {
        let rec = self.registry.agent_get(target).await?;
        let (id, wid, name) = (rec.id, rec.workflow_id, rec.view.name.clone());
        // Before the database: a run leaves the active map only after its end is
        // committed, so "not running" here means the read below sees that end.
        let running = self.active_run(id).map(|h| h.run_id);
        let (status, inbox, active_tokens, runs, usage, schedule) = self
            .store
            .read(move |c| {
                let status = crate::messaging::team::read_status(c, wid, &name)?;
                let mut inbox = InboxCounts { pending: 0, seen: 0, deferred: 0, acked: 0 };
                let mut st = c.prepare(
                    "SELECT state, count(*) FROM deliveries WHERE workflow_id = ?1 AND recipient = ?2 GROUP BY state",
                )?;
                for row in st.query_map((wid, &name), |r| Ok((r.parse::<DeliveryState>(0)?, r.get::<i64>(1)?)))? {
                    let (state, n) = row?;
                    match state {
                        DeliveryState::Pending => inbox.pending = n,
                        DeliveryState::Seen => inbox.seen = n,
                        DeliveryState::Deferred | DeliveryState::Acked => inbox.deferred = n,
                    }
                }
                // Broadcasts not yet written as its rows are pending too.
                inbox.pending += crate::messaging::broadcast::unwritten(c, wid, &name)?;
                inbox.acked = c.query_row(
                    "SELECT count(*) FROM deliveries_done WHERE workflow_id = ?1 AND recipient = ?2",
                    (wid, &name),
                    |r| r.get(0),
                )?;
                let tokens: i64 = c.query_row(
                    "SELECT count(*) FROM tokens WHERE agent_id = ?1 AND revoked_at IS NULL AND expires_at > ?2",
                    (id, now_ms()),
                    |r| r.get(0),
                )?;
                let runs = crate::runtime::runs::recent_runs(c, id, crate::runtime::runs::RECENT_RUNS)?;
                let usage = crate::runtime::runs::totals(c, id)?;
                let schedule = crate::runtime::schedules::get(c, id)?;
                Ok((status, inbox, tokens, runs, usage, schedule))
            })
            .await?;
        let target = rec.view.target.clone();
        let worktree = match (&rec.view.workspace, WorkflowRef::parse(&rec.view.workflow)) {
            (Some(domain::workspace::Workspace::Worktree(w)), Ok(wf)) => {
                Some(self.worktrees.info(&wf, &rec.view.name, w).await)
            }
            _ => None,
        };
        Ok(AgentInfo {
            worktree,
            running,
            agent: rec.view,
            status,
            inbox,
            active_tokens,
            runs,
            usage,
            schedule: schedule.map(|row| crate::runtime::schedules::view(target, row)),
        })
    }
}

impl Runtime {
    /// The agent's change lock, held until the guard is dropped.
    pub(super) async fn changing(&self, id: i64) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut m = self.changing.lock().unwrap();
            // Locks nobody holds any more go, so the map stays as small as the work.
            m.retain(|_, l| std::sync::Arc::strong_count(l) > 1);
            m.entry(id).or_default().clone()
        };
        lock.lock_owned().await
    }
}
