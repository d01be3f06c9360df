//! workflow_run: from a YAML file (or text) to a running instance.
//!
//! Order, chosen so that a mistake costs nothing: parse and validate, bind the
//! params, run the setup steps, interpolate the system prompts and the kickoff —
//! any failure so far is an error and nothing is created. Then one transaction
//! registers the instance and its agents and schedules, the document settings are
//! applied, and the kickoff is posted as `user`; the scheduler takes it from there.

use crate::context::documents::settings::ContextChange;
use crate::messaging::Outgoing;
use crate::registry::config::AgentConfig;
use crate::registry::{has_no_worker, workflow_id_tx};
use crate::workflows::Workflows;
use crate::{Caller, runtime::schedules};
use domain::backends::Backend;
use domain::error::{Error, Result};
use domain::names::{WorkflowRef, check_name};
use domain::placement::Placement;
use domain::protocol::MockRule;
use domain::states::WorkflowState;
use domain::trigger::Trigger;
use domain::workflow_yaml::{self, Vars, Workflow};
use domain::workspace::Workspace;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use store::sql;
use store::sql::OptionalExtension;

/// The instance a start makes: the workflow's name and `tag` (default main), never
/// an organisation's.
pub fn instance_of(wf: &Workflow, tag: Option<&str>) -> Result<WorkflowRef> {
    let tag = tag
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or("main");
    check_name("tag", tag)?;
    let wref = WorkflowRef {
        name: wf.name.clone(),
        tag: tag.to_owned(),
    };
    if wref
        .name
        .to_ascii_lowercase()
        .starts_with(domain::names::ORG_PREFIX)
    {
        return Err(Error::invalid(format!(
            "{wref} is an organisation's instance; give the workflow another name. Nothing was started."
        )));
    }
    Ok(wref)
}

/// Where the YAML comes from.
pub enum Source {
    File(PathBuf),
    Text(String),
}

/// A started instance: its id, its reference and what its caller should know
/// (agents that took the defaults).
pub struct Started {
    pub id: i64,
    pub workflow: WorkflowRef,
    pub warnings: Vec<String>,
    /// Its `hooks:`, secrets filled in: the hooks room declares them.
    pub hooks: Vec<workflow_yaml::HookDecl>,
}

/// An agent as it will be registered (prompt interpolated).
struct Registered {
    name: String,
    backend: String,
    model: Option<String>,
    system: Option<String>,
    cwd: Option<String>,
    env: BTreeMap<String, String>,
    config: AgentConfig,
    wakeup: Option<(Trigger, Option<String>)>,
    /// The node asked for (`node:`), by name or labels, if any.
    node: Option<Placement>,
}

impl Workflows {
    /// Parses, sets up and starts a workflow instance (params from `outside` or not).
    pub(super) async fn start(
        self: &Arc<Self>,
        (source, tag): (Source, Option<&str>),
        params: &serde_json::Map<String, serde_json::Value>,
        (org, outside): (Option<&str>, bool),
    ) -> Result<Started> {
        // Reading and parsing are blocking (a file, libyaml): off the async threads.
        let data_dir = self.data_dir.as_path().to_owned();
        let wf = tokio::task::spawn_blocking(move || match source {
            Source::File(p) => {
                let p = if p.is_absolute() {
                    p
                } else {
                    std::env::current_dir().unwrap_or_default().join(p)
                };
                workflow_yaml::load(&p)
            }
            Source::Text(t) => {
                let base = std::env::current_dir().unwrap_or(data_dir);
                workflow_yaml::parse(&t, None, &base)
            }
        })
        .await
        .map_err(|e| Error::internal(format!("reading the workflow failed: {e}")))?
        .map_err(|e| Error::invalid(e.to_string()))?;
        let wref = instance_of(&wf, tag)?;
        let _starting = self.starting(&wref)?;
        self.refuse_if_running(&wref).await?;
        let org = self.org_of(org, &wf).await?;
        let bound = workflow_yaml::bind_params(&wf.params, params).map_err(|e| {
            Error::invalid(format!(
                "{e}. Pass params as an object, e.g. {{\"pr\": 123}}"
            ))
        })?;
        let mut vars =
            Vars::new(&wref.name, &wref.tag, &wf.source_dir, bound.clone()).from_outside(outside);
        super::setup::run_setup(&wf.setup, &mut vars, &wf.source_dir)
            .await
            .map_err(|e| Error::invalid(format!("{wref}: {e}. Nothing was started.")))?;
        create_agent_folders(&wf, &vars).await?;
        let mut agents = registered(&wf, &vars)?;
        self.make_worktrees(&wref, &mut agents).await?;
        let kickoff = wf
            .kickoff
            .as_deref()
            .map(|k| workflow_yaml::interpolate(k, &vars))
            .transpose()
            .map_err(|e| Error::invalid(format!("kickoff: {e}")))?;
        let hooks = wf
            .hooks
            .iter()
            .map(|h| h.with_secret(&vars))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::invalid(format!("{e}. Nothing was started.")))?;
        let flow = super::steps::start::Flow::of(&wf, &vars)?;
        let wid = self
            .register(&wf, &wref, &bound, agents, (&flow, org))
            .await?;
        self.apply_context(&wf, &wref, wid).await?;
        self.runtime.watch_workflow(wid, true);
        self.steps.advance(wid).await?;
        if let Some(k) = kickoff.filter(|k| !k.trim().is_empty()) {
            self.post_kickoff(&wref, k).await?;
        }
        tracing::info!(workflow = %wref, "workflow started");
        Ok(Started {
            id: wid,
            workflow: wref,
            warnings: wf.warnings,
            hooks,
        })
    }

    /// The organisation it runs within: the caller's, else the YAML's (it must exist).
    async fn org_of(&self, given: Option<&str>, wf: &Workflow) -> Result<Option<String>> {
        match given.or(wf.org.as_deref()) {
            Some(g) => self
                .registry
                .org_checked(g)
                .await
                .map_err(|e| Error::invalid(format!("org: {e}. Nothing was started."))),
            None => Ok(None),
        }
    }

    /// The kickoff, posted as the lead.
    async fn post_kickoff(&self, wref: &WorkflowRef, message: String) -> Result<()> {
        let scope = self
            .registry
            .scope(&Caller::Lead, Some(&wref.to_string()))
            .await?;
        let out = Outgoing {
            message,
            to: None,
            force: true,
            urgent: false,
        };
        self.messaging.channel_send(&scope, out).await?;
        Ok(())
    }

    /// The worktrees of the workflow's worktree agents (theirs again when run with
    /// the same settings). If one cannot be made, those made by this start are
    /// discarded (they hold nothing yet) and the start is refused.
    async fn make_worktrees(&self, wref: &WorkflowRef, agents: &mut [Registered]) -> Result<()> {
        let mut made = Vec::new();
        for a in agents.iter_mut() {
            let Workspace::Worktree(asked) = &a.config.workspace else {
                continue;
            };
            match self
                .runtime
                .worktree_for(wref, &a.name, asked, a.cwd.as_deref())
                .await
            {
                Ok((w, new)) => {
                    if new {
                        made.push((a.name.clone(), w.clone()));
                    }
                    a.config.workspace = Workspace::Worktree(w);
                }
                Err(e) => {
                    for (name, w) in &made {
                        self.runtime.discard_worktree(wref, name, w).await;
                    }
                    return Err(Error::invalid(format!(
                        "agents.{}.{e}. Nothing was started.",
                        a.name
                    )));
                }
            }
        }
        Ok(())
    }

    async fn refuse_if_running(&self, wref: &WorkflowRef) -> Result<()> {
        let w = wref.clone();
        let state: Option<WorkflowState> = self
            .store
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT state FROM workflows WHERE name = ?1 AND tag = ?2",
                    (&w.name, &w.tag),
                    |r| r.parse(0),
                )
                .optional()?)
            })
            .await?;
        if matches!(state, Some(WorkflowState::Running | WorkflowState::Blocked)) {
            return Err(Error::conflict(format!(
                "{wref} is already running; wait for it (workflow_status), stop it (workflow_stop), or run \
                 another instance with a different tag"
            )));
        }
        Ok(())
    }

    /// One transaction: the instance (new, or a finished one run again), its agents
    /// (created or updated; agents added by hand stay) and their schedules.
    async fn register(
        &self,
        wf: &Workflow,
        wref: &WorkflowRef,
        params: &BTreeMap<String, String>,
        agents: Vec<Registered>,
        (flow, org): (&super::steps::start::Flow, Option<String>),
    ) -> Result<i64> {
        let flow = flow.clone();
        let w = wref.clone();
        let params = serde_json::to_string(params).map_err(|e| Error::internal(e.to_string()))?;
        let budget = serde_json::to_string(&wf.budget.clone().unwrap_or_default())
            .map_err(|e| Error::internal(e.to_string()))?;
        let source = wf
            .file
            .as_ref()
            .map(|f| f.display().to_string())
            .unwrap_or_else(|| "<inline>".into());
        let mocks: Vec<String> = agents
            .iter()
            .filter(|a| a.backend.parse() == Ok(Backend::Mock))
            .map(|a| a.name.clone())
            .collect();
        let contracts = wf.contracts.clone();
        // Placement: this node runs the workflow's agents, unless one names another.
        let node = self.runtime.node().to_owned();
        // The kernel's clock: the instance's stamps, and where its schedules count from.
        let now = self.clock.now_ms();
        let (wid, armed, elsewhere) = self
            .store
            .write(move |c| {
                let wid = workflow_id_tx(c, &w, Some(now))?.expect("created");
                // The instance's own contracts are those of the file it runs now.
                crate::governance::replace_own_contracts_tx(c, wid, "yaml", &contracts, now)?;
                flow.register_tx(c, wid, now)?;
                crate::registry::orgs::set_org_tx(c, wid, org.as_deref())?;
                crate::messaging::reset_hops_tx(c, wid)?;
                c.execute(
                    "UPDATE workflows SET state = 'running', reason = NULL, params = ?2, budget = ?3, source = ?4,
                       started_at = ?5, ended_at = NULL, updated_at = ?5 WHERE id = ?1",
                    sql::params![wid, params, budget, source, now],
                )?;
                let (mut armed, mut elsewhere) = (Vec::new(), Vec::new());
                for a in &agents {
                    let placed = placement_tx(c, a, &node)?;
                    if placed.as_ref().is_some_and(|n| *n != node) {
                        elsewhere.push(a.name.clone());
                    }
                    let id = upsert_agent_tx(c, wid, a, placed, now)?;
                    armed.push((id, schedule_tx(c, id, a, now)?));
                }
                Ok((wid, armed, elsewhere))
            })
            .await?;
        self.registry.remember_workflow(wref.clone(), wid);
        self.contracts.changed().await?;
        // A run starts mock scripts afresh: their `times` counters live in the agent's
        // own folder.
        for name in mocks {
            forget_mock_counters(self.runtime.workspace_dir(wref, &name)).await;
        }
        for (id, next) in armed {
            self.runtime.scheduler_forget(id);
            self.runtime.arm_schedule(id, next);
        }
        // An agent placed on another node: that node arms its schedule and serves it.
        for name in elsewhere {
            self.events.publish(crate::events::Event::AgentChanged {
                workflow_id: wid,
                name,
            });
        }
        Ok(wid)
    }

    /// The YAML's `context:` through the same path as workflow_context_set. A
    /// failure marks the run failed (the instance exists by now) and is the error.
    async fn apply_context(
        self: &Arc<Self>,
        wf: &Workflow,
        wref: &WorkflowRef,
        wid: i64,
    ) -> Result<()> {
        let c = &wf.context;
        if c.documents.is_none() && c.dir.is_none() && c.document_owner.is_none() {
            return Ok(());
        }
        let dir = c.dir.as_ref().map(|d| {
            d.display()
                .to_string()
                .replace("${{ workflow.name }}", &wref.name)
                .replace("${{ workflow.tag }}", &wref.tag)
        });
        if let Some(d) = &dir
            && let Err(e) = tokio::fs::create_dir_all(d).await
        {
            let reason = format!("context.dir {d}: cannot create it: {e}");
            self.workflow_fail(wid, &reason).await?;
            return Err(Error::invalid(reason));
        }
        let change = ContextChange {
            documents: c.documents.clone(),
            dir,
            owner: c.document_owner.clone(),
        };
        if let Err(e) = self
            .context
            .workflow_context_set(&wref.to_string(), change)
            .await
        {
            let reason = format!("context: {e}");
            self.workflow_fail(wid, &reason).await?;
            return Err(Error::invalid(reason));
        }
        Ok(())
    }
}

/// The agents as they will be stored: prompts interpolated, schedules read.
fn registered(wf: &Workflow, vars: &Vars) -> Result<Vec<Registered>> {
    wf.agents
        .iter()
        .map(|a| {
            let system = a
                .system_prompt
                .as_deref()
                .map(|s| workflow_yaml::interpolate(s, vars))
                .transpose()
                .map_err(|e| Error::invalid(format!("agents.{}.system_prompt: {e}", a.name)))?;
            let wakeup = a
                .wakeup
                .as_deref()
                .map(Trigger::wakeup)
                .transpose()
                .map_err(|e| Error::invalid(format!("agents.{}.wakeup: {e}", a.name)))?
                .map(|t| (t, a.wakeup_prompt.clone()));
            let mock = interpolate_mock(&a.mock, vars)
                .map_err(|e| Error::invalid(format!("agents.{}.mock: {e}", a.name)))?;
            let r = Registered {
                node: a.node.clone(),
                name: a.name.clone(),
                backend: a.backend.clone(),
                model: a.model.clone(),
                system,
                // CLI agents work where the workflow file is, unless told otherwise;
                // inline YAML has no folder of its own, so those get one in the data dir.
                cwd: match &a.cwd {
                    Some(c) => Some(path_string(&agent_cwd(c, vars, &wf.source_dir)?)),
                    None => wf.file.as_ref().map(|_| path_string(&wf.source_dir)),
                },
                env: a.env.clone(),
                config: AgentConfig {
                    mock,
                    max_steps: a.max_steps,
                    budget: a.budget.clone(),
                    timeout_ms: a.timeout.map(|t| t.as_millis() as u64),
                    permissions: a.permissions.clone(),
                    mcp_servers: a.mcp_servers.clone(),
                    workspace: a.workspace.clone(),
                    skills: a.skills.clone(),
                    delegate: a.delegate.clone(),
                },
                wakeup,
            };
            // The same rules as agent_new (prompt size, env, mock rules, powers…), so
            // a YAML agent can be nothing agent_new would refuse.
            crate::registry::validate(&crate::registry::NewAgent {
                name: r.name.clone(),
                backend: r.backend.clone(),
                model: r.model.clone(),
                system: r.system.clone(),
                workflow: None,
                cwd: r.cwd.clone(),
                env: r.env.clone(),
                config: r.config.clone(),
                schedule: None,
                node: None,
                parent: None,
            })
            .map_err(|e| Error::invalid(format!("agents.{}: {e}", r.name)))?;
            Ok(r)
        })
        .collect()
}

/// `${{ }}` in a mock script's texts (what it sends, appends, proposes), so a
/// scripted agent can use the params like a real one's prompt does.
fn interpolate_mock(rules: &[MockRule], vars: &Vars) -> std::result::Result<Vec<MockRule>, String> {
    fn walk(v: &mut serde_json::Value, vars: &Vars) -> std::result::Result<(), String> {
        match v {
            serde_json::Value::String(s) => *s = workflow_yaml::interpolate(s, vars)?,
            serde_json::Value::Array(a) => a.iter_mut().try_for_each(|x| walk(x, vars))?,
            serde_json::Value::Object(o) => o.values_mut().try_for_each(|x| walk(x, vars))?,
            _ => {}
        }
        Ok(())
    }
    let mut v = serde_json::to_value(rules).map_err(|e| e.to_string())?;
    walk(&mut v, vars)?;
    serde_json::from_value(v).map_err(|e| e.to_string())
}

fn path_string(p: &Path) -> String {
    p.display().to_string()
}

/// Creates the folders the agents name as their `cwd` (before `registered` checks
/// them as agent_new does), with what `${{ }}` names in them filled in.
async fn create_agent_folders(wf: &Workflow, vars: &Vars) -> Result<()> {
    for a in &wf.agents {
        if let Some(cwd) = &a.cwd {
            let cwd = agent_cwd(cwd, vars, &wf.source_dir)?;
            tokio::fs::create_dir_all(&cwd).await.map_err(|e| {
                Error::invalid(format!(
                    "agents.{}.cwd {}: cannot create it: {e}",
                    a.name,
                    cwd.display()
                ))
            })?;
        }
    }
    Ok(())
}

/// Removes the `times` counters a mock agent's rules keep in its own folder.
async fn forget_mock_counters(dir: std::path::PathBuf) {
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
        return;
    };
    while let Ok(Some(e)) = entries.next_entry().await {
        if e.file_name().to_string_lossy().starts_with(".mock-rule-") {
            let _ = tokio::fs::remove_file(e.path()).await;
        }
    }
}

/// Where an agent of the workflow runs: the node it names (which must be alive),
/// the least loaded live node with the labels it asks, else `node` (the one
/// running the workflow); none for agents without a worker.
fn placement_tx(c: &sql::Connection, a: &Registered, node: &str) -> Result<Option<String>> {
    let named = |e: Error| Error::invalid(format!("agents.{}.{e}", a.name));
    let placed = placed_tx(c, a, node).map_err(named)?;
    if a.config.workspace.is_worktree() && placed.as_deref().is_some_and(|p| p != node) {
        return Err(Error::invalid(format!(
            "agents.{}.node: a worktree agent runs on the node that runs the workflow ({node}, \
             whose data dir holds its worktree), and that node is not the one asked for (or \
             lacks its labels); leave node out, or run the workflow on a node that fits",
            a.name
        )));
    }
    Ok(placed)
}

fn placed_tx(c: &sql::Connection, a: &Registered, node: &str) -> Result<Option<String>> {
    Ok(match (&a.node, has_no_worker(&a.backend)) {
        (_, true) => None,
        (Some(Placement::Node(n)), false) => {
            crate::runtime::nodes::require_live_tx(
                c,
                n,
                "or leave node out to run it on the node that runs the workflow",
            )?;
            Some(n.clone())
        }
        // A worktree agent's labels must be those of the node running the workflow.
        (Some(Placement::Labels(l)), false) if a.config.workspace.is_worktree() => {
            let here = crate::runtime::nodes::labels_of_tx(c, node)?;
            let fits = domain::placement::satisfies(&here, &domain::placement::to_text(l));
            Some(if fits { node } else { "" }.to_owned())
        }
        (Some(p), false) => Some(crate::runtime::nodes::place_tx(c, node, Some(p))?),
        (None, false) => Some(node.to_owned()),
    })
}

/// Creates or updates the workflow's agent `a` (a conversation is kept only for the
/// same CLI in the same folder; a lease moves only when no run holds it): its id.
fn upsert_agent_tx(
    c: &sql::Connection,
    wid: i64,
    a: &Registered,
    placed: Option<String>,
    now: i64,
) -> Result<i64> {
    let env = serde_json::to_string(&a.env).map_err(|e| Error::internal(e.to_string()))?;
    let config = serde_json::to_string(&a.config).map_err(|e| Error::internal(e.to_string()))?;
    let labels = match &a.node {
        Some(Placement::Labels(l)) => domain::placement::to_text(l),
        _ => String::new(),
    };
    c.execute(
        "INSERT INTO agents (workflow_id, name, backend, model, system, cwd, env, config, created_at, node, labels)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         ON CONFLICT (workflow_id, name) DO UPDATE SET
           -- a conversation belongs to one CLI in one folder
           session_id = CASE WHEN agents.backend IS NOT DISTINCT FROM excluded.backend
                               AND agents.cwd IS NOT DISTINCT FROM excluded.cwd
                        THEN agents.session_id END,
           session_usage = CASE WHEN agents.backend IS NOT DISTINCT FROM excluded.backend
                                  AND agents.cwd IS NOT DISTINCT FROM excluded.cwd
                        THEN agents.session_usage END,
           backend = excluded.backend,
           model = excluded.model, system = excluded.system, cwd = excluded.cwd, env = excluded.env,
           config = excluded.config, labels = excluded.labels, state = 'idle', state_reason = NULL, resume_at = NULL, pauses = 0,
           -- a lease moves only when no run holds it
           node = CASE WHEN EXISTS (SELECT 1 FROM runs r WHERE r.agent_id = agents.id AND r.status = 'running')
                       THEN agents.node ELSE excluded.node END",
        sql::params![wid, a.name, a.backend, a.model, a.system, a.cwd, env, config, now, placed, labels],
    )?;
    crate::registry::agent_id_tx(c, wid, &a.name)?
        .ok_or_else(|| Error::internal(format!("agent {} was not written", a.name)))
}

/// The agent's `wakeup` as its schedule (its next fire), or no schedule.
fn schedule_tx(
    c: &sql::Connection,
    id: i64,
    a: &Registered,
    armed_from: i64,
) -> Result<Option<i64>> {
    match &a.wakeup {
        Some((t, prompt)) => Ok(Some(schedules::set_tx(
            c,
            id,
            t,
            prompt.as_deref(),
            armed_from,
        )?)),
        None => {
            schedules::clear_tx(c, id)?;
            Ok(None)
        }
    }
}

/// An agent's `cwd` as the YAML gave it, with `${{ }}` filled in (a param, a
/// setup step's output) and taken relative to the YAML's folder.
fn agent_cwd(cwd: &Path, vars: &Vars, source_dir: &Path) -> Result<PathBuf> {
    let raw = cwd.to_string_lossy();
    if !raw.contains("${{") {
        return Ok(cwd.to_owned());
    }
    let filled =
        workflow_yaml::interpolate(&raw, vars).map_err(|e| Error::invalid(format!("cwd: {e}")))?;
    let filled = filled.trim();
    vars.confined("cwd", filled).map_err(Error::invalid)?;
    if filled.is_empty() {
        return Err(Error::invalid(format!(
            "cwd: {raw} is empty once filled in"
        )));
    }
    Ok(source_dir.join(filled).components().collect())
}
