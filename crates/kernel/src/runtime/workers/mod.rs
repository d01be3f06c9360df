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
use crate::runtime::approvals::Approvals;
use crate::runtime::base::{Base, Pause};
use crate::runtime::runs::{self, NewRun, RunEnd};
use crate::runtime::skills::Skills;
use crate::runtime::spending::Spending;
use crate::runtime::worktrees::Worktrees;
use domain::backends::Backend;
use domain::error::{Error, Result};
use domain::protocol::{self, RunConfig};
use domain::states::{AgentState, Wake};
use os::process;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
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

/// Takes from `cmd` what no worker inherits from the kernel: [`SCRUBBED_ENV`] and
/// every variable holding a hook's secret (named `*_HOOK_SECRET`).
pub(crate) fn scrub_env(cmd: &mut tokio::process::Command) {
    for k in SCRUBBED_ENV {
        cmd.env_remove(k);
    }
    for (k, _) in std::env::vars_os() {
        if k.to_str()
            .is_some_and(|k| k.ends_with(domain::hooks::SECRET_VAR_SUFFIX))
        {
            cmd.env_remove(k);
        }
    }
}

mod commits;
pub(crate) mod home;
mod records;
pub mod sandbox;
mod spec;
mod supervise;

pub use crate::runtime::running::RunHandle;
use crate::runtime::running::{Active, Claim, Running};
use domain::workspace::Workspace;
pub(crate) use spec::Spec;

/// The process manager: the runs in progress (a table it shares with the
/// approvals a run waits on), and each run from its start to its settlement.
pub struct Workers {
    base: Arc<Base>,
    running: Arc<Running>,
    worktrees: Arc<Worktrees>,
    skills: Arc<Skills>,
    approvals: Arc<Approvals>,
    spending: Arc<Spending>,
    exe: PathBuf,
    limits: process::Limits,
    /// Each run's own pids cgroup, where the machine has a writable one.
    cgroups: Option<os::cgroup::Pids>,
    /// Told what a run's end means for scheduling, before the run reports done.
    after: OnceLock<Weak<dyn AfterRun>>,
}

/// Whoever settles what a finished run means for scheduling (the scheduler, which
/// sits above the process manager and is told through this).
pub(crate) trait AfterRun: Send + Sync {
    fn settle_run(
        self: Arc<Self>,
        agent_id: i64,
        workflow_id: i64,
        end: RunEnd,
        again: Option<(Wake, Option<String>)>,
    ) -> futures::future::BoxFuture<'static, ()>;
}

/// What the process manager is built from, besides the ground.
pub(crate) struct Parts {
    pub running: Arc<Running>,
    pub worktrees: Arc<Worktrees>,
    pub skills: Arc<Skills>,
    pub approvals: Arc<Approvals>,
    pub spending: Arc<Spending>,
    pub exe: PathBuf,
}

impl Workers {
    pub(crate) fn new(base: Arc<Base>, p: Parts) -> Self {
        Self {
            cgroups: sandbox::cgroups(&base.data_dir),
            base,
            running: p.running,
            worktrees: p.worktrees,
            skills: p.skills,
            approvals: p.approvals,
            spending: p.spending,
            exe: p.exe,
            limits: process::Limits::default(),
            after: OnceLock::new(),
        }
    }

    /// A run's scratch folder, in the data dir.
    pub(crate) fn scratch_dir(&self, run_id: &str) -> PathBuf {
        protocol::scratch_dir(&self.base.data_dir, run_id)
    }

    /// The binary a worker runs.
    pub(crate) fn exe(&self) -> &std::path::Path {
        &self.exe
    }

    /// Names who settles each run's end (set once, when the runtime is composed).
    pub(crate) fn settle_with(&self, after: Weak<dyn AfterRun>) {
        let _ = self.after.set(after);
    }

    /// The run in progress for an agent, if any.
    pub fn active_run(&self, agent_id: i64) -> Option<RunHandle> {
        self.running.handle(agent_id)
    }

    /// If the agent is running, remembers a wake for when the run ends and returns
    /// the run. A remembered prompt (a schedule's) is kept over a prompt-less wake.
    pub(crate) fn remember_wake(
        &self,
        agent_id: i64,
        wake: Wake,
        prompt: Option<&str>,
    ) -> Option<RunHandle> {
        self.running.remember_wake(agent_id, wake, prompt)
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
        self.running
            .remember_wake_before(agent_id, wake, message_id)
    }

    /// How many runs are in progress (the scheduler's concurrency limit counts them).
    pub(crate) fn runs_in_progress(&self) -> usize {
        self.running.count()
    }

    /// Whether any of these agents is running or has a wake remembered.
    pub(crate) fn any_active(&self, agent_ids: &[i64]) -> bool {
        self.running.any(agent_ids)
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
        // A start refused for its sandbox pauses the agent: a start that lost the
        // race to it (agent_ask's own, after its message's wake) says why too.
        if spec.state == AgentState::Paused {
            sandbox::check(&spec)?;
        }
        self.may_start(&spec)?;
        let url = self
            .base
            .url()
            .ok_or_else(|| Error::internal("the kernel has no HTTP endpoint for workers"))?
            .to_owned();
        let state_dir = self.base.workspace_dir(&spec.workflow, &spec.name);
        let cwd = match self.run_folder(&spec, &state_dir).await {
            Ok(cwd) => cwd,
            Err(e) => return Err(self.start_refused(&spec, e).await),
        };
        let skills = match self.skills.read_dirs(&spec.config.skills).await {
            Ok(s) => s.into_iter().map(skill_ref).collect(),
            Err(e) => return Err(self.start_refused(&spec, e).await),
        };
        if let Err(e) = sandbox::check(&spec) {
            return Err(self.start_refused(&spec, e).await);
        }
        let run_id = uuid::Uuid::now_v7().to_string();
        let stop = CancellationToken::new();
        let (done_tx, done_rx) = watch::channel(false);
        let (progress, _) = broadcast::channel(256);
        // Claim the agent before any await, so two starts cannot both spawn.
        let claimed = self.running.claim_unless_served(
            agent_id,
            Active {
                run_id: run_id.clone(),
                stop: stop.clone(),
                done: done_rx,
                progress: progress.clone(),
                wake_again: None,
                held: spec.held.clone(),
                held_file: self.scratch_dir(&run_id).join(protocol::HELD_FILE),
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
        let woken_by = self.base.events.take_trace(spec.workflow_id, &spec.name);
        spec.traced(&run_id, wake, woken_by);
        match self
            .prepare(&spec, (&run_id, &cwd, skills), wake, prompt, url)
            .await
        {
            Ok(cmd) => {
                self.running.started(agent_id, &run_id);
                let k = self.clone();
                tokio::spawn(async move {
                    k.supervise_run(spec, run_id, cmd, stop, progress, done_tx)
                        .await
                });
                Ok(Ok(handle))
            }
            Err(e) => {
                self.running.finish(agent_id);
                if let Some(span) = &spec.trace {
                    span.set("agent_worker.outcome", "refused");
                    span.fail(domain::redact::shown(&e.to_string()));
                    span.end();
                }
                Err(e)
            }
        }
    }

    /// A worktree agent's run, just claimed, holds its worktree from here to its
    /// commit: at once, or when a sync or merge writing there is done.
    async fn hold_worktree(&self, spec: &Spec) {
        if spec.config.workspace.is_worktree() {
            let held = self.worktrees.hold(&spec.workflow, &spec.name).await;
            self.running.keep_worktree(spec.agent_id, held);
        }
    }

    /// A run cannot start because what it works with is gone or broken (its
    /// worktree, a skill's folder): the agent is paused with the reason (its
    /// messages wait), and the start fails with it.
    async fn start_refused(&self, spec: &Spec, e: Error) -> Error {
        let reason = e.to_string();
        let paused = self
            .base
            .pause(Pause {
                agent_id: spec.agent_id,
                workflow: &spec.workflow,
                workflow_id: spec.workflow_id,
                name: &spec.name,
                reason: &reason,
                auto_from: None,
            })
            .await;
        if let Err(p) = paused {
            tracing::warn!(agent = %spec.name, "cannot pause it: {p}");
        }
        Error::invalid(reason)
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
        if spec.node.as_deref() != Some(self.base.node()) {
            return Err(Error::conflict(format!(
                "{} runs on node {}, not on {}",
                spec.name,
                spec.node.as_deref().unwrap_or("(none)"),
                self.base.node()
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
    async fn run_folder(&self, spec: &Spec, state_dir: &std::path::Path) -> Result<PathBuf> {
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
    pub(crate) async fn work_folder(&self, spec: &Spec, state_dir: &std::path::Path) -> PathBuf {
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
        let state_dir = self.base.workspace_dir(&spec.workflow, &spec.name);
        let cwd = cwd.to_owned();
        // A worktree is checked (by start_run), never made here.
        let made = (!spec.config.workspace.is_worktree()).then(|| cwd.clone());
        let (dir, id) = (state_dir.clone(), spec.agent_id);
        let home = home::Home::of(spec, &self.base.data_dir);
        tokio::task::spawn_blocking(move || {
            crate::runtime::own_folder::claim(&dir, id)?;
            home.map_or(Ok(()), |h| h.prepare())?;
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
        let ttl = self.limits.total + Duration::from_secs(300);
        let (id, agent_id, wid) = (run_id.to_owned(), spec.agent_id, spec.workflow_id);
        let (name, backend) = (spec.name.clone(), spec.backend);
        let asked = prompt.clone();
        let node = self.base.node().to_owned();
        let trace_id = spec.trace.as_ref().map(telemetry::Span::trace_id);
        let now = self.base.clock.now_ms();
        let token = self
            .base
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
                        now,
                    },
                )?;
                let (secret, _) = tokens::mint_tx(c, agent_id, ttl, "run", Some(&id), now)?;
                Ok(secret)
            })
            .await?;
        let (governed, permissions) = self.governed_run(spec);
        let at = (cwd.as_path(), state_dir.as_path());
        let sandbox = self.sandbox_plan(spec, permissions.profile, run_id, at, &skills, &url);
        let sandbox = sandbox.await?;
        let config = RunConfig {
            run_id: run_id.to_owned(),
            agent: spec.name.clone(),
            workflow: spec.workflow.to_string(),
            backend: spec.backend.to_string(),
            model: spec.model.clone(),
            system: spec.system.clone(),
            cwd: cwd.clone(),
            state_dir,
            scratch: self.scratch_dir(run_id),
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
            sandbox,
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
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.arg(WORKER_MODE).current_dir(cwd);
        scrub_env(&mut cmd);
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
        let all = self.base.contracts.all();
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

    /// How long a run's worker may print nothing: the agent's `timeout`, or the default.
    fn idle_limit(&self, spec: &Spec) -> Duration {
        spec.config
            .timeout_ms
            .map_or(self.limits.idle, Duration::from_millis)
    }

    /// Stops an agent's run, if one is in progress, and waits until it is recorded.
    pub async fn stop_run(&self, agent_id: i64) -> Option<String> {
        let (run_id, mut done) = self.running.stop(agent_id)?;
        let _ = done.wait_for(|d| *d).await;
        Some(run_id)
    }

    /// Stops every run (kernel shutdown).
    pub async fn stop_all_runs(&self) {
        let ids = self.running.agent_ids();
        futures::future::join_all(ids.into_iter().map(|id| self.stop_run(id))).await;
        if let Some(c) = &self.cgroups {
            c.close();
        }
    }
}

fn skill_ref(s: domain::skills::Skill) -> protocol::SkillRef {
    protocol::SkillRef {
        name: s.name,
        description: s.description,
        dir: s.dir,
    }
}
