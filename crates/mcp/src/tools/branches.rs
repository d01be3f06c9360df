//! branch_diff (the team: read a teammate's branch) and branch_merge (the lead:
//! bring an agent's work back, or the base into an agent's branch).

use super::params::Parameters;
use super::{ScopeArg, ToolError, given};
use crate::AgentWorker;
use kernel::runtime::worktrees::diff::BranchDiff;
use kernel::runtime::worktrees::merge::MergeOut;
use kernel::runtime::worktrees::{DiffArgs, MergeAsk};
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct BranchDiffArgs {
    /// A teammate ("bob"; the lead also "bob@review:pr-1").
    pub agent: String,
    /// A ref or "@alice" (default: its base).
    #[serde(default)]
    #[schemars(with = "String")]
    pub against: Option<String>,
    /// Only this file.
    #[serde(default)]
    #[schemars(with = "String")]
    pub file: Option<String>,
    /// The file's text instead of a patch.
    #[serde(default)]
    pub content: bool,
    /// Default 65536, at most 262144.
    #[serde(default)]
    #[schemars(with = "u32")]
    pub max_bytes: Option<usize>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct BranchMergeArgs {
    pub agent: String,
    /// A branch or "@alice" (default: its base).
    #[serde(default)]
    #[schemars(with = "String")]
    pub into: Option<String>,
    /// Bring this ref into the agent's branch instead; conflicts are left to it.
    #[serde(default)]
    #[schemars(with = "String")]
    pub from: Option<String>,
    /// Default auto: fast-forward, else a merge commit.
    #[serde(default)]
    #[schemars(with = "String", extend("enum" = ["auto", "ff", "merge", "squash"]))]
    pub mode: Option<String>,

    #[serde(default)]
    #[schemars(with = "String")]
    pub message: Option<String>,
}

#[tool_router(router = branch_read_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// What a worktree `agent` committed on its branch since its base: files with line
    /// counts, and the patch.
    #[tool(
        title = "Read an agent's branch",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn branch_diff(
        &self,
        Parameters(a): Parameters<BranchDiffArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<BranchDiff>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        let args = DiffArgs {
            agent: &a.agent,
            against: given(&a.against),
            file: given(&a.file),
            content: a.content,
            max_bytes: a.max_bytes,
        };
        Ok(Json(self.kernel.branch_diff(&scope, args).await?))
    }
}

#[tool_router(router = branch_merge_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Merge a worktree `agent`'s branch into its base (or `into`) by `mode`; a conflict is
    /// reported with its hunks and nothing written; `from` merges the other way. Contracts on
    /// merge may hold it for approval.
    #[tool(
        title = "Merge an agent's branch",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn branch_merge(
        &self,
        Parameters(a): Parameters<BranchMergeArgs>,
    ) -> Result<Json<MergeOut>, ToolError> {
        let ask = MergeAsk {
            agent: a.agent,
            into: given(&a.into).map(str::to_owned),
            from: given(&a.from).map(str::to_owned),
            mode: given(&a.mode).unwrap_or("auto").to_owned(),
            message: given(&a.message).map(str::to_owned),
        };
        Ok(Json(self.kernel.branch_merge(ask).await?))
    }
}
