//! agent_update: changing an agent's configuration after it was made.
//!
//! Only the fields given change; the result is checked as a whole, exactly as
//! agent_new checks a new agent (a profile its backend cannot express, a server
//! of the wrong shape, a folder that does not exist: refused, nothing changed). A
//! run in progress keeps what it started with; the next run gets the new
//! configuration. A new folder starts a new CLI conversation (a CLI's session
//! belongs to its folder); the sdk backend starts afresh by itself when its model,
//! system prompt or folder changed.

use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::kernel::events::Event;
use crate::kernel::registry::{AgentView, NewAgent};
use crate::kernel::runtime::guards::Budget;
use crate::kernel::runtime::workers::AgentConfig;
use crate::permissions::Permissions;
use crate::worker::protocol::McpServer;
use rusqlite::OptionalExtension;
use std::collections::BTreeMap;

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
    }
}

fn cleared(v: Option<String>, current: Option<String>) -> Option<String> {
    match v {
        None => current,
        Some(s) if s.trim().is_empty() => None,
        Some(s) => Some(s.trim().to_owned()),
    }
}

impl Kernel {
    pub async fn agent_update(&self, target: &str, u: AgentUpdate) -> Result<AgentView> {
        if u.is_empty() {
            return Err(Error::invalid(
                "nothing to change: give at least one of permissions, model, system, cwd, env, budget, \
                 mcp_servers, max_steps",
            ));
        }
        let rec = self.agent_get(target).await?;
        let id = rec.id;
        // The stored config (the view hides secrets, so read the row itself).
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
        let mut config: AgentConfig = serde_json::from_str(&config).unwrap_or_default();
        let mut env: BTreeMap<String, String> = serde_json::from_str(&env).unwrap_or_default();
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
        };
        crate::kernel::registry::validate(&merged)?;
        let moved = merged.cwd != v.cwd;
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
                    rusqlite::params![id, model, system, cwd, env, config, moved],
                )?;
                Ok(())
            })
            .await?;
        self.events.publish(Event::AgentChanged {
            workflow_id: rec.workflow_id,
            name: rec.view.name.clone(),
        });
        Ok(self.agent_get(target).await?.view)
    }
}
