//! The registry: workflow instances and the agents registered in them.
//!
//! An agent is identified by (name, workflow instance); names are unique ignoring
//! case within an instance so that a mention is never ambiguous. Deleting an agent
//! revokes its tokens and drops its open deliveries; the channel and its messages stay.

pub mod config;
mod delegated;
pub(crate) use delegated::{hand_spending_up_tx, is_sub_agent_tx, sub_agents};
pub use domain::guards;
pub mod orgs;
#[cfg(test)]
mod orgs_tests;
pub(crate) mod revoke;
#[cfg(test)]
mod tests;
pub mod tokens;
#[cfg(test)]
mod tokens_tests;

use crate::timing::Clock;
use crate::{Caller, Scope};
use domain::clock::fmt_ms;
use domain::error::{Error, Result};
use domain::names::LEAD;
use domain::names::{AgentRef, WorkflowRef, check_agent_name};
use schemars::JsonSchema;
use serde::Serialize;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Mutex;
use store::Store;
use store::sql;
use store::sql::{Connection, OptionalExtension, Row};

pub use domain::backends::{BACKENDS, Backend, EXTERNAL, HUMAN, has_no_worker};
pub use domain::guards::{MAX_ENV_VARS, MAX_STEPS, MAX_SYSTEM_PROMPT};

/// What `agent_new` asks for, already typed.
#[derive(Debug, Clone, Default)]
pub struct NewAgent {
    pub name: String,
    pub backend: String,
    pub model: Option<String>,
    pub system: Option<String>,
    pub workflow: Option<String>,
    pub cwd: Option<String>,
    pub env: BTreeMap<String, String>,
    /// What the worker needs beyond the columns (mock rules, step cap, budget).
    pub config: config::AgentConfig,
    /// A schedule to set with it, and its prompt.
    pub schedule: Option<(domain::trigger::Trigger, Option<String>)>,
    /// The node to run it on, by name or by labels (default: the least loaded
    /// live node).
    pub node: Option<domain::placement::Placement>,
    /// The agent that makes it (delegation), with the most sub-agents it may keep
    /// alive: counted in the transaction that registers it.
    pub parent: Option<(i64, u32)>,
}

/// An agent as tools show it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AgentView {
    /// The agent's name (unique in its workflow instance, ignoring case).
    pub name: String,
    /// Its full target, e.g. `alice` or `alice@review:pr-1`.
    pub target: String,
    /// The workflow instance, e.g. `@global:main`.
    pub workflow: String,
    pub backend: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Environment variable names given to its worker (values are not shown).
    pub env: Vec<String>,
    /// Lifecycle state: idle, running, paused or failed.
    pub state: domain::states::AgentState,
    /// Why it is paused or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When an automatic pause (auth, billing) ends by itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<String>,
    /// Its guards, if it has its own (see agent_new).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<guards::Budget>,
    /// The mock backend's rules, if it has any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mock: Vec<domain::protocol::MockRule>,
    /// Model turns per run at most.
    pub max_steps: u32,
    /// What it may do on the machine.
    pub permissions: domain::permissions::PermissionsView,
    /// Its own MCP servers (env and header values are not shown).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, domain::protocol::McpServerView>,
    /// Where its runs work, when not in its cwd: a git worktree of its own (the
    /// repository, base, branch and base commit, as made).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<domain::workspace::Workspace>,
    /// Its skills' folders (each holds a SKILL.md).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
    /// The node (kernel) that runs it; absent for an agent without a worker (the
    /// lead's `agent-worker://nodes` resource lists the nodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The labels a node needs to run it (`node: {labels}`); it runs only on
    /// nodes with all of them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// What it may delegate: make and ask agents of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delegate: Option<domain::delegate::Delegate>,
    /// The agent that made it (it belongs to it: paused and deleted with it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    pub created_at: String,
}

const AGENT_COLUMNS: &str = "a.id, a.name, w.name, w.tag, a.backend, a.model, a.system, a.cwd, a.env, a.state, a.created_at, a.config, a.state_reason, a.resume_at, a.node, a.labels, (SELECT p.name FROM agents p WHERE p.id = a.parent_id)";

fn agent_row(r: &Row) -> sql::Result<(i64, AgentView)> {
    let name: String = r.get(1)?;
    let workflow = WorkflowRef {
        name: r.get(2)?,
        tag: r.get(3)?,
    };
    let env: String = r.get(8)?;
    let env: BTreeMap<String, String> = serde_json::from_str(&env).unwrap_or_default();
    let config: String = r.get(11)?;
    let config: config::AgentConfig = serde_json::from_str(&config).unwrap_or_default();
    let target = AgentRef {
        name: name.clone(),
        workflow: workflow.clone(),
    }
    .to_string();
    Ok((
        r.get(0)?,
        AgentView {
            name,
            target,
            workflow: workflow.to_string(),
            backend: r.get(4)?,
            model: r.get(5)?,
            system: r.get(6)?,
            cwd: r.get(7)?,
            env: env.into_keys().collect(),
            state: r.parse(9)?,
            reason: r.get(12)?,
            resume_at: r.get::<Option<i64>>(13)?.map(fmt_ms),
            budget: config.budget,
            created_at: fmt_ms(r.get(10)?),
            node: r.get(14)?,
            labels: domain::placement::from_text(&r.get::<String>(15)?),
            parent: r.get(16)?,
            delegate: config.delegate.clone(),
            mock: config.mock,
            max_steps: config.max_steps.unwrap_or(config::DEFAULT_MAX_STEPS),
            permissions: (&config.permissions).into(),
            mcp_servers: config
                .mcp_servers
                .iter()
                .map(|(k, v)| (k.clone(), v.into()))
                .collect(),
            workspace: config.workspace.is_worktree().then_some(config.workspace),
            skills: config
                .skills
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
        },
    ))
}

/// Finds a workflow instance id inside a write transaction, creating it (stamped
/// `create_at`) when asked and missing.
pub(crate) fn workflow_id_tx(
    c: &Connection,
    wf: &WorkflowRef,
    create_at: Option<i64>,
) -> Result<Option<i64>> {
    let id: Option<i64> = c
        .prepare_cached("SELECT id FROM workflows WHERE name = ?1 AND tag = ?2")?
        .query_row((&wf.name, &wf.tag), |r| r.get(0))
        .optional()?;
    let Some(now) = create_at.filter(|_| id.is_none()) else {
        return Ok(id);
    };
    let id = c.query_row(
        "INSERT INTO workflows (name, tag, state, created_at, updated_at) VALUES (?1, ?2, 'active', ?3, ?3)
         RETURNING id",
        (&wf.name, &wf.tag, now),
        |r| r.get(0),
    )?;
    Ok(Some(id))
}

/// The id of the agent named `name` in instance `workflow_id`, if there is one.
pub(crate) fn agent_id_tx(c: &Connection, workflow_id: i64, name: &str) -> Result<Option<i64>> {
    Ok(
        c.prepare_cached("SELECT id FROM agents WHERE workflow_id = ?1 AND name = ?2")?
            .query_row(sql::params![workflow_id, name], |r| r.get(0))
            .optional()?,
    )
}

/// The agent names of a workflow instance, in their canonical spelling.
pub(crate) fn agent_names(c: &Connection, workflow_id: i64) -> Result<Vec<String>> {
    let mut st =
        c.prepare_cached("SELECT name FROM agents WHERE workflow_id = ?1 ORDER BY name")?;
    let names = st
        .query_map([workflow_id], |r| r.get(0))?
        .collect::<sql::Result<Vec<String>>>()?;
    Ok(names)
}

pub(crate) fn validate(a: &NewAgent) -> Result<()> {
    check_agent_name(&a.name)?;
    let Ok(backend) = a.backend.parse::<Backend>() else {
        return Err(Error::invalid(format!(
            "unknown backend {:?}: use one of {}",
            a.backend,
            BACKENDS.join(", ")
        )));
    };
    if let Some(m) = &a.model
        && (m.trim().is_empty() || m.len() > 200)
    {
        return Err(Error::invalid(
            "model must be 1..=200 characters, e.g. \"sonnet\" or \"gpt-5.5\"; leave it out for the backend's default",
        ));
    }
    if let Some(s) = &a.system
        && s.len() > MAX_SYSTEM_PROMPT
    {
        return Err(Error::invalid(format!(
            "system prompt is {} bytes; the limit is {MAX_SYSTEM_PROMPT}. Put long instructions in a document and point to it.",
            s.len()
        )));
    }
    if let Some(cwd) = &a.cwd {
        let p = std::path::Path::new(cwd);
        if !p.is_absolute() {
            return Err(Error::invalid(format!(
                "cwd {cwd:?} must be an absolute path"
            )));
        }
        if !p.is_dir() {
            return Err(Error::invalid(format!(
                "cwd {cwd:?} is not an existing directory; create it first"
            )));
        }
    }
    if !a.config.mock.is_empty() && backend != Backend::Mock {
        return Err(Error::invalid(format!(
            "mock rules are for the mock backend; this agent's backend is {:?}",
            a.backend
        )));
    }
    domain::protocol::MockRule::validate_all(&a.config.mock).map_err(Error::invalid)?;
    domain::definition::check_mock(&a.config.mock).map_err(Error::invalid)?;
    validate_powers(&a.backend, &a.config)?;
    if let Some(b) = &a.config.budget {
        b.validate().map_err(Error::invalid)?;
    }
    if let Some(n) = a.config.max_steps
        && !(1..=MAX_STEPS).contains(&n)
    {
        return Err(Error::invalid(format!(
            "max_steps must be between 1 and {MAX_STEPS} (default {})",
            config::DEFAULT_MAX_STEPS
        )));
    }
    domain::definition::check_env(&a.env).map_err(Error::invalid)?;
    if let Some(d) = &a.config.delegate {
        d.check().map_err(Error::invalid)?;
        d.check_within(a.config.budget.as_ref())
            .map_err(Error::invalid)?;
    }
    Ok(())
}

/// Checks what an agent may do and use: its permissions must be expressible on
/// its backend exactly, and its MCP servers well formed (and usable by it).
pub(crate) fn validate_powers(backend: &str, config: &config::AgentConfig) -> Result<()> {
    // An external agent is served its skills through the Skills extension.
    if !config.skills.is_empty() && backend.parse() == Ok(domain::backends::Backend::Human) {
        return Err(Error::invalid(
            "skills: a human member is given no skills; leave skills out",
        ));
    }
    if config.workspace.is_worktree() && has_no_worker(backend) {
        return Err(Error::invalid(format!(
            "workspace: a {backend} agent has no runs to work in a worktree; leave workspace out"
        )));
    }
    domain::definition::check_servers(&config.mcp_servers).map_err(Error::invalid)?;
    for (name, s) in &config.mcp_servers {
        domain::protocol::McpServer::validate(name, s).map_err(Error::invalid)?;
    }
    let names: Vec<&str> = config.mcp_servers.keys().map(String::as_str).collect();
    domain::permissions::backends::check_agent(backend, &config.permissions, &names)
        .map_err(Error::invalid)
}

/// Registers an agent at `now` inside a write transaction (its instance created if
/// new), leased to `node` (None for an agent without a worker). Returns the
/// instance id, the agent's id and its view.
pub(crate) fn insert_agent_tx(
    c: &Connection,
    a: &NewAgent,
    wf: &WorkflowRef,
    node: Option<&str>,
    now: i64,
) -> Result<(i64, i64, AgentView)> {
    let wid = workflow_id_tx(c, wf, Some(now))?.expect("created");
    let existing: Option<String> = c
        .query_row(
            "SELECT name FROM agents WHERE workflow_id = ?1 AND name = ?2",
            (wid, &a.name),
            |r| r.get(0),
        )
        .optional()?;
    if let Some(existing) = existing {
        return Err(Error::conflict(format!(
            "an agent named {existing:?} already exists in {wf}; pick another name, or agent_delete it first"
        )));
    }
    if let Some((parent, most)) = a.parent {
        delegated::room_tx(c, parent, most)?;
    }
    let env = serde_json::to_string(&a.env).map_err(|e| Error::internal(e.to_string()))?;
    let config = serde_json::to_string(&a.config).map_err(|e| Error::internal(e.to_string()))?;
    let labels = match &a.node {
        Some(domain::placement::Placement::Labels(l)) => domain::placement::to_text(l),
        _ => String::new(),
    };
    let id: i64 = c.query_row(
        "INSERT INTO agents (workflow_id, name, backend, model, system, cwd, env, config, created_at, node, labels, parent_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) RETURNING id",
        sql::params![wid, a.name, a.backend, a.model, a.system, a.cwd, env, config, now, node, labels, a.parent.map(|p| p.0)],
        |r| r.get(0),
    )?;
    let (_, view) = c.query_row(
        &format!("SELECT {AGENT_COLUMNS} FROM agents a JOIN workflows w ON w.id = a.workflow_id WHERE a.id = ?1"),
        [id],
        agent_row,
    )?;
    Ok((wid, id, view))
}

/// A resolved agent: its row id, workflow id and view.
pub struct AgentRecord {
    pub id: i64,
    pub workflow_id: i64,
    pub view: AgentView,
}

/// The registry as a service: it owns the cache of instance ids and the tokens,
/// and answers who is who from the store.
pub struct Registry {
    store: Store,
    /// The kernel's clock: what the room stamps and when a token expires.
    clock: Clock,
    pub(crate) tokens: tokens::Tokens,
    /// (name, tag) -> id. Workflow instances are never renamed, so caching is safe;
    /// entries are dropped when an instance is deleted.
    workflow_ids: Mutex<HashMap<WorkflowRef, i64>>,
}

impl Registry {
    pub fn new(store: Store, clock: Clock, admin_token: String) -> Self {
        Self {
            store,
            clock,
            tokens: tokens::Tokens::new(admin_token),
            workflow_ids: Mutex::new(HashMap::new()),
        }
    }

    /// Remembers a new instance's id (it was just created in a transaction of the caller's).
    pub(crate) fn remember_workflow(&self, wf: WorkflowRef, id: i64) {
        self.workflow_ids.lock().unwrap().insert(wf, id);
    }

    /// The instance with this id (None once it is gone).
    pub async fn workflow_ref(&self, id: i64) -> Result<Option<WorkflowRef>> {
        self.store
            .read(move |c| {
                Ok(
                    c.query_row("SELECT name, tag FROM workflows WHERE id = ?1", [id], |r| {
                        Ok(WorkflowRef {
                            name: r.get(0)?,
                            tag: r.get(1)?,
                        })
                    })
                    .optional()?,
                )
            })
            .await
    }

    /// Resolves an existing workflow instance or explains which ones exist.
    pub async fn workflow_id(&self, wf: &WorkflowRef) -> Result<i64> {
        if let Some(id) = self.workflow_ids.lock().unwrap().get(wf) {
            return Ok(*id);
        }
        let key = wf.clone();
        let found = self
            .store
            .read(move |c| {
                let id: Option<i64> = c
                    .query_row(
                        "SELECT id FROM workflows WHERE name = ?1 AND tag = ?2",
                        (&key.name, &key.tag),
                        |r| r.get(0),
                    )
                    .optional()?;
                match id {
                    Some(id) => Ok(Ok(id)),
                    None => {
                        let mut st = c.prepare(
                            "SELECT name, tag FROM workflows ORDER BY name, tag LIMIT 20",
                        )?;
                        let known = st
                            .query_map((), |r| {
                                Ok(format!("@{}:{}", r.get::<String>(0)?, r.get::<String>(1)?))
                            })?
                            .collect::<sql::Result<Vec<_>>>()?;
                        Ok(Err(known))
                    }
                }
            })
            .await?;
        match found {
            Ok(id) => {
                self.workflow_ids.lock().unwrap().insert(wf.clone(), id);
                Ok(id)
            }
            Err(known) => Err(Error::not_found(format!(
                "no workflow instance {wf}; known: {}. Create one by registering an agent in it \
                 (agent_new with workflow) or by running a workflow.",
                known.join(", ")
            ))),
        }
    }

    /// The scope a context tool acts in. The lead may name any existing workflow
    /// instance (default `@global:main`); an agent is fixed to its own.
    pub async fn scope(&self, caller: &Caller, workflow: Option<&str>) -> Result<Scope> {
        let requested = workflow
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(WorkflowRef::parse)
            .transpose()?;
        match caller {
            Caller::Lead => {
                let wf = requested.unwrap_or_else(WorkflowRef::global);
                let workflow_id = self.workflow_id(&wf).await?;
                Ok(Scope {
                    workflow: wf,
                    workflow_id,
                    me: LEAD.into(),
                    lead: true,
                    run_id: None,
                })
            }
            Caller::Agent(a) => {
                if let Some(wf) = &requested
                    && wf.name.starts_with(domain::names::ORG_PREFIX)
                    && *wf != a.workflow
                {
                    return self.org_scope(a, wf).await;
                }
                if let Some(wf) = requested
                    && wf != a.workflow
                {
                    return Err(Error::forbidden(format!(
                        "you are {} and act only in {}; leave out `workflow` (it is for the lead)",
                        a.name, a.workflow
                    )));
                }
                Ok(Scope {
                    workflow: a.workflow.clone(),
                    workflow_id: a.workflow_id,
                    me: a.name.clone(),
                    lead: false,
                    run_id: a.run_id.clone(),
                })
            }
        }
    }

    /// Agents of one workflow instance, or of all when `workflow` is None.
    pub async fn agent_list(&self, workflow: Option<&str>) -> Result<Vec<AgentView>> {
        let filter = match workflow.map(str::trim).filter(|s| !s.is_empty()) {
            Some(w) => {
                let wf = WorkflowRef::parse(w)?;
                Some(self.workflow_id(&wf).await?)
            }
            None => None,
        };
        self.store
            .read(move |c| {
                let sql = format!(
                    "SELECT {AGENT_COLUMNS} FROM agents a JOIN workflows w ON w.id = a.workflow_id
                     WHERE (a.workflow_id = ?1 OR ?1 IS NULL) ORDER BY w.name, w.tag, a.name"
                );
                let mut st = c.prepare(&sql)?;
                let rows = st
                    .query_map([filter], agent_row)?
                    .collect::<sql::Result<Vec<_>>>()?;
                Ok(rows.into_iter().map(|(_, v)| v).collect())
            })
            .await
    }

    /// Resolves a target such as `alice@review:pr-1` to an existing agent.
    pub async fn agent_get(&self, target: &str) -> Result<AgentRecord> {
        let t = AgentRef::parse(target)?;
        let wid = self.workflow_id(&t.workflow).await?;
        let name = t.name.clone();
        let found = self
            .store
            .read(move |c| {
                let row = c
                    .query_row(
                        &format!(
                            "SELECT {AGENT_COLUMNS} FROM agents a JOIN workflows w ON w.id = a.workflow_id
                             WHERE a.workflow_id = ?1 AND a.name = ?2"
                        ),
                        (wid, &name),
                        agent_row,
                    )
                    .optional()?;
                Ok(match row {
                    Some(r) => Ok(r),
                    None => Err(agent_names(c, wid)?),
                })
            })
            .await?;
        match found {
            Ok((id, view)) => Ok(AgentRecord {
                id,
                workflow_id: wid,
                view,
            }),
            Err(names) => Err(Error::not_found(format!(
                "no agent {:?} in {}; agents there: {}",
                t.name,
                t.workflow,
                if names.is_empty() {
                    "(none)".to_owned()
                } else {
                    names.join(", ")
                }
            ))),
        }
    }

    /// The identity an agent token stands for.
    pub(crate) async fn agent_caller(
        &self,
        agent_id: i64,
        run_id: Option<String>,
    ) -> Result<Caller> {
        self.store
            .read(move |c| {
                c.query_row(
                    "SELECT a.id, a.name, w.name, w.tag, w.id, a.config, a.parent_id IS NOT NULL FROM agents a JOIN workflows w ON w.id = a.workflow_id WHERE a.id = ?1",
                    [agent_id],
                    |r| {
                        let config: String = r.get(5)?;
                        let config: config::AgentConfig =
                            serde_json::from_str(&config).unwrap_or_default();
                        Ok(Caller::Agent(crate::AgentIdentity {
                            delegates: config.delegate.is_some(),
                            sub_agent: r.get(6)?,
                            agent_id: r.get(0)?,
                            name: r.get(1)?,
                            workflow: WorkflowRef { name: r.get(2)?, tag: r.get(3)? },
                            workflow_id: r.get(4)?,
                            run_id: run_id.clone(),
                        }))
                    },
                )
                .optional()?
                .ok_or_else(|| Error::not_found("the agent of this token was deleted"))
            })
            .await
    }
}
