//! The process manager: one worker subprocess per run, at most one run per agent.
//!
//! A run is: a `runs` row and a per-run agent token (one transaction), the worker
//! spawned under [`os::process::supervise`] with its config on stdin, its
//! stdout reports folded into the run, and [`runs::finish_tx`] when it ends, which
//! revokes the token and settles the deliveries the run read. A wake that arrives
//! while the agent runs is remembered and starts one more run when this one ends.
//!
//! The worker is this same binary in its internal worker mode; the kernel never
//! builds prompts (the worker does, from what it reads over MCP).

use crate::registry::config::DEFAULT_MAX_STEPS;
use crate::registry::tokens;
use crate::runtime::Runtime;
use crate::runtime::runs::{self, NewRun, RunView};
use domain::backends::Backend;
use domain::error::{Error, Result};
use domain::names::WorkflowRef;
use domain::protocol::{self, RunConfig};
use domain::states::{AgentState, Wake};
use os::process;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use store::sql;
use store::sql::OptionalExtension;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

/// The internal command-line mode that makes this binary a worker.
pub const WORKER_MODE: &str = "__worker";
/// Environment variables a worker must never inherit from the kernel: the admin
/// token would make any agent the lead, and the store's URL carries the database's
/// password (an agent with it could rewrite any inbox).
pub(crate) const SCRUBBED_ENV: &[&str] = &[
    "AGENT_WORKER_TOKEN",
    "AGENT_WORKER_HOME",
    store::STORE_ENV,
    protocol::RUN_ENV,
    // A run's context is its own (set below), never one the kernel was started in.
    telemetry::TRACEPARENT_ENV,
    telemetry::TRACESTATE_ENV,
    telemetry::WORKER_ENV,
];

use super::running::{Active, Claim};
pub use super::running::{RunHandle, Workers};
pub(crate) use super::spec::Spec;
use domain::workspace::Workspace;

impl Runtime {
    /// The run in progress for an agent, if any.
    pub fn active_run(&self, agent_id: i64) -> Option<RunHandle> {
        self.workers.handle(agent_id)
    }

    /// If the agent is running, remembers a wake for when the run ends and returns
    /// the run. A remembered prompt (a schedule's) is kept over a prompt-less wake.
    pub(crate) fn remember_wake(
        &self,
        agent_id: i64,
        wake: Wake,
        prompt: Option<&str>,
    ) -> Option<RunHandle> {
        self.workers.remember_wake(agent_id, wake, prompt)
    }

    /// Like [`Self::remember_wake`] for a message posted as `message_id`, except that a
    /// run started after it is returned without remembering anything: that run reads
    /// the message (its worker reads the inbox after the message was committed), so
    /// one more run would read nothing, or read a failing message a second time.
    ///
    /// One lock for the look and the remembering, so a run claimed in between cannot
    /// be mistaken for one that started before the message.
    pub(crate) fn remember_wake_before(
        &self,
        agent_id: i64,
        wake: Wake,
        message_id: &str,
    ) -> Option<RunHandle> {
        self.workers
            .remember_wake_before(agent_id, wake, message_id)
    }

    /// How many runs are in progress (the scheduler's concurrency limit counts them).
    pub(crate) fn runs_in_progress(&self) -> usize {
        self.workers.count()
    }

    /// Whether any of these agents is running or has a wake remembered.
    pub(crate) fn any_active(&self, agent_ids: &[i64]) -> bool {
        self.workers.any(agent_ids)
    }

    /// Starts a run of an agent that is not running. Refused for a paused agent.
    pub async fn start_run(
        self: &Arc<Self>,
        agent_id: i64,
        wake: Wake,
        prompt: Option<String>,
    ) -> Result<RunHandle> {
        match self
            .start_run_unless_served(agent_id, wake, prompt, None)
            .await?
        {
            Ok(h) => Ok(h),
            Err(_) => unreachable!("a claim without a message is never served"),
        }
    }

    /// [`Self::start_run`], unless a run that started after the message `after`
    /// has already come and gone (it read it): then that run's id.
    pub(crate) async fn start_run_unless_served(
        self: &Arc<Self>,
        agent_id: i64,
        wake: Wake,
        prompt: Option<String>,
        after: Option<&str>,
    ) -> Result<std::result::Result<RunHandle, String>> {
        let mut spec = self.spec(agent_id).await?;
        self.may_start(&spec)?;
        let url = self
            .url()
            .ok_or_else(|| Error::internal("the kernel has no HTTP endpoint for workers"))?
            .to_owned();
        let state_dir = self.workspace_dir(&spec.workflow, &spec.name);
        let cwd = match self.run_folder(&spec, &state_dir).await {
            Ok(cwd) => cwd,
            Err(e) => return Err(self.start_refused(&spec, e).await),
        };
        let skills = match self.read_skills(&spec.config.skills).await {
            Ok(s) => s.into_iter().map(skill_ref).collect(),
            Err(e) => return Err(self.start_refused(&spec, e).await),
        };
        let run_id = uuid::Uuid::now_v7().to_string();
        let stop = CancellationToken::new();
        let (done_tx, done_rx) = watch::channel(false);
        let (progress, _) = broadcast::channel(256);
        // Claim the agent before any await, so two starts cannot both spawn.
        let claimed = self.workers.claim_unless_served(
            agent_id,
            Active {
                run_id: run_id.clone(),
                stop: stop.clone(),
                done: done_rx,
                progress: progress.clone(),
                wake_again: None,
                held: spec.held.clone(),
                held_file: spec.scratch_dir(&run_id).join(protocol::HELD_FILE),
                denials: spec.denials.clone(),
                _worktree: None,
            },
            after,
        );
        let handle = match claimed {
            Claim::Claimed(h) => h,
            Claim::Served(run) => return Ok(Err(run)),
            Claim::Busy => {
                return Err(Error::conflict(format!("{} is already running", spec.name)));
            }
        };
        self.hold_worktree(&spec).await;
        let woken_by = self.events.take_trace(spec.workflow_id, &spec.name);
        spec.traced(&run_id, wake, woken_by);
        match self
            .prepare(&spec, (&run_id, &cwd, skills), wake, prompt, url)
            .await
        {
            Ok(cmd) => {
                self.workers.started(agent_id, &run_id);
                let k = self.clone();
                tokio::spawn(async move {
                    k.supervise_run(spec, run_id, cmd, stop, progress, done_tx)
                        .await
                });
                Ok(Ok(handle))
            }
            Err(e) => {
                self.workers.finish(agent_id);
                if let Some(span) = &spec.trace {
                    span.set("agent_worker.outcome", "refused");
                    span.fail(domain::redact::shown(&e.to_string()));
                    span.end();
                }
                Err(e)
            }
        }
    }

    /// Why the agent cannot run now, if it cannot: paused, no worker, another
    /// node's, or its workflow ended.
    fn may_start(&self, spec: &Spec) -> Result<()> {
        if spec.state == AgentState::Paused {
            return Err(Error::conflict(format!(
                "{} is paused; agent_pause {{resume: true}} it first",
                spec.name
            )));
        }
        if spec.backend.has_no_worker() {
            return Err(Error::invalid(format!(
                "{} has no worker (backend {}): the client connected with agent_join acts as it and \
                 reads its inbox itself",
                spec.name, spec.backend
            )));
        }
        if spec.node.as_deref() != Some(self.node()) {
            return Err(Error::conflict(format!(
                "{} runs on node {}, not on {}",
                spec.name,
                spec.node.as_deref().unwrap_or("(none)"),
                self.node()
            )));
        }
        if spec.workflow_state.is_ended() {
            return Err(Error::conflict(format!(
                "{} is {}; run it again with workflow_run to wake its agents",
                spec.workflow, spec.workflow_state
            )));
        }
        Ok(())
    }

    /// The folder a run works in: its worktree, its cwd, or its own folder.
    pub(super) async fn run_folder(
        &self,
        spec: &Spec,
        state_dir: &std::path::Path,
    ) -> Result<PathBuf> {
        let cwd = spec.cwd.as_deref().map(std::path::Path::new);
        match &spec.config.workspace {
            Workspace::Worktree(w) => {
                self.worktrees
                    .run_folder(&spec.workflow, &spec.name, w, cwd)
                    .await
            }
            Workspace::Shared => Ok(cwd.map_or_else(|| state_dir.to_owned(), PathBuf::from)),
        }
    }

    /// [`Self::run_folder`] as a path only, for what a run asks while it runs
    /// (its start checked the worktree; a tool request runs no git).
    pub(super) async fn work_folder(&self, spec: &Spec, state_dir: &std::path::Path) -> PathBuf {
        let cwd = spec.cwd.as_deref().map(std::path::Path::new);
        match &spec.config.workspace {
            Workspace::Worktree(w) => {
                self.worktrees
                    .folder(&spec.workflow, &spec.name, w, cwd)
                    .await
            }
            Workspace::Shared => cwd.map_or_else(|| state_dir.to_owned(), PathBuf::from),
        }
    }

    /// Writes the run row and its token, makes the working directory and builds
    /// the worker's command.
    async fn prepare(
        &self,
        spec: &Spec,
        (run_id, cwd, skills): (&str, &std::path::Path, Vec<protocol::SkillRef>),
        wake: Wake,
        prompt: Option<String>,
        url: String,
    ) -> Result<process::Launch> {
        let state_dir = self.workspace_dir(&spec.workflow, &spec.name);
        let cwd = cwd.to_owned();
        // A worktree is checked (by start_run), never made here.
        let made = (!spec.config.workspace.is_worktree()).then(|| cwd.clone());
        let (dir, id) = (state_dir.clone(), spec.agent_id);
        tokio::task::spawn_blocking(move || {
            super::own_folder::claim(&dir, id)?;
            made.map_or(Ok(()), std::fs::create_dir_all)
        })
        .await
        .map_err(|e| Error::internal(e.to_string()))?
        .map_err(|e| {
            Error::internal(format!(
                "cannot create the working directory {}: {e}",
                cwd.display()
            ))
        })?;
        let ttl = self.workers.limits.total + Duration::from_secs(300);
        let (id, agent_id, wid) = (run_id.to_owned(), spec.agent_id, spec.workflow_id);
        let (name, backend) = (spec.name.clone(), spec.backend);
        let asked = prompt.clone();
        let node = self.node().to_owned();
        let trace_id = spec.trace.as_ref().map(telemetry::Span::trace_id);
        let token = self
            .store
            .write(move |c| {
                runs::insert_tx(
                    c,
                    &NewRun {
                        id: &id,
                        agent_id,
                        workflow_id: wid,
                        agent: &name,
                        backend: backend.as_str(),
                        trigger: wake.as_str(),
                        prompt: asked.as_deref(),
                        node: &node,
                        trace_id: trace_id.as_deref(),
                    },
                )?;
                let (secret, _) = tokens::mint_tx(c, agent_id, ttl, "run", Some(&id))?;
                Ok(secret)
            })
            .await?;
        let (governed, permissions) = self.governed_run(spec);
        let config = RunConfig {
            run_id: run_id.to_owned(),
            agent: spec.name.clone(),
            workflow: spec.workflow.to_string(),
            backend: spec.backend.to_string(),
            model: spec.model.clone(),
            system: spec.system.clone(),
            cwd: cwd.clone(),
            state_dir,
            idle_ms: self.idle_limit(spec).as_millis() as u64,
            url,
            token,
            session_id: spec.session_id.clone(),
            session_usage: spec.session_usage,
            trigger: wake,
            prompt,
            mock: spec.config.mock.clone(),
            max_steps: spec.config.max_steps.unwrap_or(DEFAULT_MAX_STEPS),
            permissions,
            mcp_servers: spec.config.mcp_servers.clone(),
            skills,
            governed,
        };
        let mut cmd = self.worker_command(spec, &cwd);
        // On stdin, not in the environment: the agent's mock rules, system prompt and
        // servers may pass the 128 KiB one variable may hold, and the run's token
        // stays out of what the worker's children inherit.
        let input = serde_json::to_vec(&config).map_err(|e| Error::internal(e.to_string()))?;
        cmd.env(protocol::RUN_ENV, protocol::RUN_ON_STDIN);
        Ok(process::Launch {
            cmd,
            input: Some(input),
        })
    }

    /// The worker's command: this binary in worker mode in `cwd`, with the agent's
    /// environment (less what is scrubbed) and, when traces are exported, the run's
    /// trace context and where to export.
    fn worker_command(&self, spec: &Spec, cwd: &std::path::Path) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.workers.exe);
        cmd.arg(WORKER_MODE).current_dir(cwd);
        for k in SCRUBBED_ENV {
            cmd.env_remove(k);
        }
        // The agent's OTEL_* are for its CLI: held from the worker's own exporter.
        cmd.envs(telemetry::agent_env::for_worker(&spec.env));
        if let Some(span) = &spec.trace {
            cmd.envs(
                span.carrier()
                    .into_iter()
                    .map(|(k, v)| (k.to_ascii_uppercase(), v)),
            );
            if let Some(url) = telemetry::traces_url() {
                // The worker exports where this kernel does; a CLI that exports
                // reads the base URL (unless the agent or the kernel set one).
                cmd.env(telemetry::WORKER_ENV, url);
                let set = spec.env.contains_key(telemetry::ENDPOINT_ENV)
                    || std::env::var_os(telemetry::ENDPOINT_ENV).is_some();
                if let (false, Some(base)) = (set, url.strip_suffix("/v1/traces")) {
                    cmd.env(telemetry::ENDPOINT_ENV, base);
                }
            }
        }
        cmd
    }

    /// What the contracts in force change for this run: the tool classes a CLI with
    /// a permission hook brings to the kernel, and, on a backend without one, the
    /// profile with the contracts' refusals as deny rules it can hold.
    fn governed_run(&self, spec: &Spec) -> (Vec<String>, domain::permissions::Permissions) {
        use domain::contracts::{ASKING_BACKENDS, governed_kinds, profile_denials};
        let all = self.contracts.all();
        let in_force: Vec<&domain::contracts::Contract> =
            crate::governance::contracts::in_force(&all, spec.workflow_id, &spec.workflow)
                .collect();
        let governed = governed_kinds(in_force.iter().copied(), &spec.name)
            .into_iter()
            .map(|k| k.as_str().to_owned())
            .collect();
        let p = &spec.config.permissions;
        let asks = ASKING_BACKENDS.contains(&spec.backend.as_str())
            || spec.backend.has_no_worker()
            || spec.backend == Backend::Mock;
        if asks {
            return (governed, p.clone());
        }
        let servers: Vec<&str> = spec.config.mcp_servers.keys().map(String::as_str).collect();
        let denials = profile_denials(in_force.iter().copied(), &spec.name, &servers);
        let held = domain::permissions::governed::with_denials(
            spec.backend.as_str(),
            p,
            denials,
            &servers,
        );
        (governed, held)
    }

    /// Where an agent without a configured `cwd` works.
    /// How long a run's worker may print nothing: the agent's `timeout`, or the default.
    pub(super) fn idle_limit(&self, spec: &Spec) -> Duration {
        spec.config
            .timeout_ms
            .map_or(self.workers.limits.idle, Duration::from_millis)
    }

    pub fn workspace_dir(&self, wf: &WorkflowRef, agent: &str) -> PathBuf {
        self.data_dir
            .as_path()
            .join("workspaces")
            .join(&wf.name)
            .join(&wf.tag)
            .join(agent)
    }

    /// Stops an agent's run, if one is in progress, and waits until it is recorded.
    pub async fn stop_run(&self, agent_id: i64) -> Option<String> {
        let (run_id, mut done) = self.workers.stop(agent_id)?;
        let _ = done.wait_for(|d| *d).await;
        Some(run_id)
    }

    /// Stops every run (kernel shutdown).
    pub async fn stop_all_runs(&self) {
        let ids = self.workers.agent_ids();
        futures::future::join_all(ids.into_iter().map(|id| self.stop_run(id))).await;
    }

    /// At start: runs a previous kernel left `running` are closed as lost, and any of
    /// their processes still alive are killed by group.
    pub(crate) async fn recover_runs(&self) -> Result<usize> {
        let node = self.node().to_owned();
        let orphans = self.store.read(move |c| runs::orphans(c, &node)).await?;
        if orphans.is_empty() {
            return Ok(0);
        }
        for o in &orphans {
            if let Some(pid) = o.pid
                && process::kill_stale_group(pid, o.pid_start)
            {
                tracing::warn!(run = %o.id, pid, "killed a worker left by the previous kernel");
            }
        }
        let ids: Vec<String> = orphans.iter().map(|o| o.id.clone()).collect();
        let n = ids.len();
        self.store
            .write(move |c| runs::close_lost_tx(c, &ids))
            .await?;
        Ok(n)
    }

    pub async fn run_view(&self, run_id: &str) -> Result<RunView> {
        let id = run_id.to_owned();
        self.store
            .read(move |c| runs::get_run(c, &id))
            .await?
            .ok_or_else(|| Error::not_found(format!("no run {run_id}")))
    }

    /// The latest `per_agent` runs of each agent of a workflow instance (one read).
    pub async fn recent_runs(
        &self,
        workflow_id: i64,
        per_agent: i64,
    ) -> Result<Vec<(String, RunView)>> {
        self.store
            .read(move |c| runs::recent_of_workflow(c, workflow_id, per_agent))
            .await
    }

    /// Messages an agent sent to the lead after `after` (an ask's message id): DMs
    /// to `user` and messages that mention it.
    pub async fn replies_to_lead(
        &self,
        workflow_id: i64,
        agent: &str,
        after: &str,
    ) -> Result<Vec<String>> {
        let (agent, after) = (agent.to_owned(), after.to_owned());
        self.store
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT content FROM messages
                     WHERE workflow_id = ?1 AND sender = ?2 AND id > ?3
                       AND (to_member = 'user' OR instr(mentions, '\"user\"') > 0)
                     ORDER BY id",
                )?;
                let rows = st
                    .query_map((workflow_id, &agent, &after), |r| r.get(0))?
                    .collect::<sql::Result<Vec<String>>>()?;
                Ok(rows)
            })
            .await
    }

    /// Sets an agent's lifecycle state to paused (stopping its run) or back to idle.
    pub async fn set_paused(self: &Arc<Self>, agent_id: i64, paused: bool) -> Result<()> {
        let sql = if paused {
            "UPDATE agents SET state = 'paused' WHERE id = ?1 RETURNING workflow_id, name"
        } else {
            "UPDATE agents SET state = 'idle' WHERE id = ?1 AND state = 'paused' RETURNING workflow_id, name"
        };
        let changed: Option<(i64, String)> = self
            .store
            .write(move |c| {
                Ok(c.query_row(sql, [agent_id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?)
            })
            .await?;
        // The node that runs it hears of it (a resume there serves its inbox).
        if let Some((workflow_id, name)) = changed {
            self.events
                .publish(crate::events::Event::AgentChanged { workflow_id, name });
        }
        if paused {
            self.scheduler_forget(agent_id);
            self.stop_run_anywhere(agent_id).await?;
        } else {
            self.resumed(agent_id).await?;
        }
        Ok(())
    }
}

fn skill_ref(s: domain::skills::Skill) -> protocol::SkillRef {
    protocol::SkillRef {
        name: s.name,
        description: s.description,
        dir: s.dir,
    }
}
