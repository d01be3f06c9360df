//! agent_new, agent_list, agent_info, agent_delete, agent_join (the lead only).

use super::params::{Parameters, TargetArgs};
use super::schedules::ScheduleArgs;
use super::{ToolError, given};
use crate::AgentWorker;
use crate::client_configs::{ClientConfigs, StdioLaunch, for_http, for_stdio};
use domain::clock::{fmt_ms, parse_duration};
use domain::guards::Budget;
use domain::permissions::PermissionsArg;
use domain::placement::{Placement, PlacementArg};
use domain::protocol::{McpServer, MockRule};
use domain::workspace::{Workspace, WorkspaceArg};
use kernel::registry::config::AgentConfig;
use kernel::registry::{AgentView, NewAgent};
use kernel::runtime::agents::AgentInfo;
use kernel::runtime::agents::AgentUpdate;
use rmcp::{Json, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const DEFAULT_JOIN_TTL: &str = "24h";

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct AgentNewArgs {
    pub name: String,
    #[schemars(extend("enum" = ["claude", "codex", "cursor", "gemini", "opencode", "sdk", "mock", "external", "human"]))]
    pub backend: String,
    /// E.g. "sonnet" (default: the backend's).
    #[serde(default)]
    #[schemars(with = "String")]
    pub model: Option<String>,
    /// Its role.
    #[serde(default)]
    #[schemars(with = "String")]
    pub system: Option<String>,
    /// E.g. "@review:pr-1" (default "@global:main").
    #[serde(default)]
    #[schemars(with = "String")]
    pub workflow: Option<String>,
    /// A node's name or {labels: [..]} (default: the least loaded).
    #[serde(default)]
    #[schemars(schema_with = "super::any_value")]
    pub node: Option<PlacementArg>,
    /// Absolute, existing folder.
    #[serde(default)]
    #[schemars(with = "String")]
    pub cwd: Option<String>,
    /// API keys, base URLs.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_array")]
    pub mock: Vec<MockRule>,
    /// Model turns per run (default 30).
    #[serde(default)]
    #[schemars(with = "i64", range(min = 1, max = 500))]
    pub max_steps: Option<u32>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_object")]
    pub schedule: Option<ScheduleArgs>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_object")]
    pub budget: Option<Budget>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_value")]
    pub permissions: Option<PermissionsArg>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_object")]
    pub mcp_servers: BTreeMap<String, McpServer>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_value")]
    pub workspace: Option<WorkspaceArg>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_array")]
    pub skills: Vec<String>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_object")]
    pub delegate: Option<serde_json::Value>,
}

/// agent_update: what to change (everything else stays).
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct AgentUpdateArgs {
    pub target: String,
    #[serde(default)]
    #[schemars(schema_with = "super::any_value")]
    pub permissions: Option<PermissionsArg>,
    /// "" for the backend's default.
    #[serde(default)]
    #[schemars(with = "String")]
    pub model: Option<String>,
    /// "" for none.
    #[serde(default)]
    #[schemars(with = "String")]
    pub system: Option<String>,
    /// "" for the default.
    #[serde(default)]
    #[schemars(with = "String")]
    pub cwd: Option<String>,
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_object")]
    pub budget: Option<Budget>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_object")]
    pub mcp_servers: Option<BTreeMap<String, McpServer>>,
    #[serde(default)]
    #[schemars(with = "i64", range(min = 1, max = 500))]
    pub max_steps: Option<u32>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_value")]
    pub workspace: Option<WorkspaceArg>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_array")]
    pub skills: Option<Vec<String>>,
    /// "off" to stop it delegating.
    #[serde(default)]
    #[schemars(schema_with = "super::any_value")]
    pub delegate: Option<serde_json::Value>,
    /// A live node, or {labels: [..]}; not while running.
    #[serde(default)]
    #[schemars(schema_with = "super::any_value")]
    pub node: Option<PlacementArg>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct AgentListArgs {
    /// Only this instance's.
    #[serde(default)]
    #[schemars(with = "String")]
    pub workflow: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct AgentJoinArgs {
    pub target: String,
    /// E.g. "2h" (default 24h, at most 30 days).
    #[serde(default)]
    #[schemars(with = "String")]
    pub ttl: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentOut {
    pub agent: AgentView,
}

/// agent_update's `delegate`: "off", or what agent_new takes.
fn read_delegate(v: &serde_json::Value) -> Result<Option<domain::delegate::Delegate>, ToolError> {
    match v {
        serde_json::Value::String(s) if s.trim() == "off" => Ok(None),
        serde_json::Value::String(s) => Err(ToolError(format!(
            "delegate: {s:?}; give \"off\" or {{agents, depth, backends, budget}}"
        ))),
        v => domain::delegate::Delegate::read(v)
            .map(Some)
            .map_err(ToolError),
    }
}

/// The `skills` argument: absolute folders.
fn read_skills(s: &[String]) -> Result<Vec<std::path::PathBuf>, ToolError> {
    s.iter()
        .enumerate()
        .map(|(i, p)| {
            let p = std::path::PathBuf::from(p.trim());
            if p.is_absolute() {
                Ok(p)
            } else {
                Err(ToolError(format!(
                    "skills[{i}]: {} is not an absolute path; give the skill's folder as one",
                    p.display()
                )))
            }
        })
        .collect()
}

/// Checks the `permissions` argument; the error names the entry at fault.
/// `node`: a name or `{labels}`; an empty name is none.
fn read_node(n: Option<&PlacementArg>) -> Result<Option<Placement>, ToolError> {
    match n {
        Some(PlacementArg(serde_json::Value::String(s))) if s.trim().is_empty() => Ok(None),
        Some(n) => n.read().map(Some).map_err(ToolError),
        None => Ok(None),
    }
}

fn read_workspace(w: Option<&WorkspaceArg>) -> Result<Option<Workspace>, ToolError> {
    w.map(WorkspaceArg::read).transpose().map_err(ToolError)
}

fn read_permissions(
    p: Option<&PermissionsArg>,
) -> Result<Option<domain::permissions::Permissions>, ToolError> {
    p.map(PermissionsArg::read).transpose().map_err(ToolError)
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentMadeOut {
    pub agent: AgentView,
    /// What stands between it and its first run (its backend missing or not logged
    /// in, with the fix), or a choice worth knowing; absent when it is ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentsOut {
    pub agents: Vec<AgentView>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct DeletedOut {
    /// The deleted agent's target.
    pub deleted: String,
    /// What became of its worktree and branch (worktree agents).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
}

/// agent_delete's arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct AgentDeleteArgs {
    pub target: String,
    #[serde(default)]
    pub discard: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct JoinOut {
    /// The agent this token acts as.
    pub agent: String,
    /// The MCP endpoint (streamable HTTP, loopback).
    pub url: String,
    /// The bearer token. Shown once; treat it as a password.
    pub token: String,
    pub expires_at: String,
    /// How long `url` and `stdio` keep working.
    pub lasts: String,
    /// Ready-to-paste configuration for common MCP clients: HTTP to `url`.
    pub configs: ClientConfigs,
    /// The stdio launch as the agent (and its configs): it finds or starts the data
    /// dir's kernel itself, so it works whatever port the kernel has.
    pub stdio: StdioLaunch,
}

#[tool_router(router = agent_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Register an agent `name` with a `backend`
    /// (external: a client joined with agent_join; human: a person), `env` {KEY: value}.
    /// Shapes: `permissions`
    /// "read", "edit" (default), "full" or {profile, allow, deny} ("shell:git *"); `schedule`
    /// {every: "30m"} or {cron, prompt}; `budget` {max_runs_per_hour, max_hops, max_tokens,
    /// max_cost_usd}; `mcp_servers` {name: {command, args, env} or {url, headers}}; `mock`
    /// rules {when, send, to, write, reply, ...}; `workspace` "worktree" (its own git
    /// worktree and branch) or {mode, repo, base, branch}; `skills` [SKILL.md folders];
    /// `node`; `delegate` {agents, depth, backends, budget} (team_agent_*).
    #[tool(
        title = "Create an agent",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn agent_new(
        &self,
        Parameters(a): Parameters<AgentNewArgs>,
    ) -> Result<Json<AgentMadeOut>, ToolError> {
        let permissions = read_permissions(a.permissions.as_ref())?.unwrap_or_default();
        let new = NewAgent {
            name: a.name.trim().to_owned(),
            backend: a.backend.trim().to_owned(),
            model: given(&a.model).map(str::to_owned),
            system: given(&a.system).map(str::to_owned),
            workflow: given(&a.workflow).map(str::to_owned),
            cwd: given(&a.cwd).map(str::to_owned),
            env: a.env,
            config: AgentConfig {
                mock: a.mock,
                max_steps: a.max_steps,
                budget: a.budget,
                timeout_ms: None,
                permissions,
                mcp_servers: a.mcp_servers,
                workspace: read_workspace(a.workspace.as_ref())?.unwrap_or_default(),
                skills: read_skills(&a.skills)?,
                delegate: a
                    .delegate
                    .as_ref()
                    .map(domain::delegate::Delegate::read)
                    .transpose()
                    .map_err(ToolError)?,
            },
            schedule: a.schedule.as_ref().map(ScheduleArgs::read).transpose()?,
            node: read_node(a.node.as_ref())?,
            parent: None,
        };
        let (env, perms) = (new.env.clone(), new.config.permissions.clone());
        let agent = self.kernel.agent_new(new).await?;
        let warning = self
            .kernel
            .readiness_warning(&agent.backend, &env, &perms)
            .await;
        Ok(Json(AgentMadeOut { agent, warning }))
    }

    /// Change an agent (`target`): what is given (`permissions`, `env`, `budget`,
    /// `mcp_servers`, `workspace`, `skills`, `delegate` or "off", `node`) as agent_new takes
    /// it, from its next run; maps and lists replace. Workspace "shared" keeps its branch.
    #[tool(
        title = "Change an agent",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn agent_update(
        &self,
        Parameters(a): Parameters<AgentUpdateArgs>,
    ) -> Result<Json<AgentMadeOut>, ToolError> {
        let permissions = read_permissions(a.permissions.as_ref())?;
        let changed_env = a.env.is_some() || permissions.is_some();
        let u = AgentUpdate {
            permissions,
            model: a.model,
            system: a.system,
            cwd: a.cwd,
            env: a.env,
            budget: a.budget,
            mcp_servers: a.mcp_servers,
            max_steps: a.max_steps,
            workspace: read_workspace(a.workspace.as_ref())?,
            skills: a.skills.as_deref().map(read_skills).transpose()?,
            node: read_node(a.node.as_ref())?,
            delegate: a.delegate.as_ref().map(read_delegate).transpose()?,
        };
        let agent = self.kernel.agent_update(&a.target, u).await?;
        let warning = if changed_env {
            let (env, perms) = self.kernel.agent_env_and_permissions(&a.target).await?;
            self.kernel
                .readiness_warning(&agent.backend, &env, &perms)
                .await
        } else {
            None
        };
        Ok(Json(AgentMadeOut { agent, warning }))
    }

    /// Agents with backend, model, state and node.
    #[tool(
        title = "List agents",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn agent_list(
        &self,
        Parameters(a): Parameters<AgentListArgs>,
    ) -> Result<Json<AgentsOut>, ToolError> {
        Ok(Json(AgentsOut {
            agents: self
                .kernel
                .registry()
                .agent_list(given(&a.workflow))
                .await?,
        }))
    }

    /// One agent (`target`): configuration, state, inbox, recent runs (errors, usage,
    /// commits), totals, worktree.
    #[tool(
        title = "Show an agent",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn agent_info(
        &self,
        Parameters(a): Parameters<TargetArgs>,
    ) -> Result<Json<AgentInfo>, ToolError> {
        Ok(Json(self.kernel.agent_info(&a.target).await?))
    }

    /// Delete an agent (`target`): its worker stops, its tokens end; channel and documents
    /// stay. A worktree agent's branch stays unless `discard`.
    #[tool(
        title = "Delete an agent",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn agent_delete(
        &self,
        Parameters(a): Parameters<AgentDeleteArgs>,
    ) -> Result<Json<DeletedOut>, ToolError> {
        let (v, worktree) = self.kernel.agent_delete(&a.target, a.discard).await?;
        Ok(Json(DeletedOut {
            deleted: v.target,
            worktree,
        }))
    }

    /// Let an MCP client act as the external agent `target`: a token (`ttl`) with ready
    /// client configs over HTTP and stdio.
    #[tool(
        title = "Join as an agent",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn agent_join(
        &self,
        Parameters(a): Parameters<AgentJoinArgs>,
    ) -> Result<Json<JoinOut>, ToolError> {
        let ttl = parse_duration(given(&a.ttl).unwrap_or(DEFAULT_JOIN_TTL), "ttl")?;
        let rec = self.kernel.agent_get(&a.target).await?;
        let url = self
            .kernel
            .url()
            .ok_or_else(|| {
                ToolError(
                    "this server has no HTTP endpoint to join; start it with --http 127.0.0.1:PORT"
                        .into(),
                )
            })?
            .to_owned();
        let (token, expires_at) = self
            .kernel
            .registry()
            .mint_agent_token(rec.id, ttl, "join", None)
            .await?;
        let server_name = format!("agent-worker-{}", rec.view.name);
        let dir = std::path::absolute(self.kernel.data_dir())
            .unwrap_or_else(|_| self.kernel.data_dir().to_owned());
        let program = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "agent-worker".into());
        let lasts = lasts(&dir, &url).await;
        Ok(Json(JoinOut {
            configs: for_http(&server_name, &url, &token),
            stdio: for_stdio(&server_name, &program, &dir.display().to_string(), &token),
            lasts,
            agent: rec.view.target,
            url,
            token,
            expires_at: fmt_ms(expires_at),
        }))
    }
}

/// What a joined client may count on: the token until it expires; the URL across
/// the kernel's restarts when it is the data dir's remembered port; the stdio
/// launch always.
async fn lasts(dir: &std::path::Path, url: &str) -> String {
    let remembered = tokio::fs::read_to_string(dir.join(kernel::PORT_FILE))
        .await
        .ok()
        .map(|p| p.trim().to_owned());
    let port = url
        .strip_prefix("http://")
        .and_then(|a| a.split('/').next())
        .and_then(|a| a.rsplit_once(':'))
        .map(|(_, p)| p.to_owned());
    let stdio = "The stdio launch works whenever the token is valid: it finds the data dir's kernel, or \
                 starts one, whatever its port.";
    if remembered.is_some() && remembered == port {
        format!(
            "The token works until expires_at. The url is the data dir's port, remembered in {} and \
             taken again by every kernel started on it, so it keeps working across the kernel's idle \
             exits and restarts, unless another program takes the port meanwhile (the kernel's log \
             says so then; join again for a new url). While no kernel runs, another user of this \
             machine could take that port and read the token a client sends there: on a shared \
             machine prefer the stdio launch. {stdio}",
            dir.join(kernel::PORT_FILE).display()
        )
    } else {
        format!(
            "The token works until expires_at. The url is the address this kernel was started with \
             (--http): it works while a kernel serves it. {stdio}"
        )
    }
}
