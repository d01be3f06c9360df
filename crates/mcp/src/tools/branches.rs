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
    /// The agent whose branch to read: a teammate's name ("bob"); the lead may also write "bob@review:pr-1".
    pub agent: String,
    /// Compare with this branch, tag or commit, or "@alice" (her branch); default the branch it was made from.
    #[serde(default)]
    #[schemars(with = "String")]
    pub against: Option<String>,
    /// Only this file (a path in the repository).
    #[serde(default)]
    #[schemars(with = "String")]
    pub file: Option<String>,
    /// With `file`: that file as it is on the branch, instead of a patch.
    #[serde(default)]
    pub content: bool,
    /// Cut the patch or file here (default 65536, at most 262144).
    #[serde(default)]
    #[schemars(with = "u32")]
    pub max_bytes: Option<usize>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct BranchMergeArgs {
    /// The agent whose branch is merged: "bob" or "bob@review:pr-1".
    pub agent: String,
    /// Where it goes: a branch, or "@alice" (her branch); default the branch it was made from.
    #[serde(default)]
    #[schemars(with = "String")]
    pub into: Option<String>,
    /// Instead, bring this branch (or "@alice") into the agent's branch; a conflict is left for the agent to resolve.
    #[serde(default)]
    #[schemars(with = "String")]
    pub from: Option<String>,
    /// auto (default: fast-forward when possible, else a merge commit), ff, merge or squash.
    #[serde(default)]
    #[schemars(with = "String", extend("enum" = ["auto", "ff", "merge", "squash"]))]
    pub mode: Option<String>,
    /// The commit message (default: says whose branch went where).
    #[serde(default)]
    #[schemars(with = "String")]
    pub message: Option<String>,
}

#[tool_router(router = branch_read_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// What a worktree agent (`agent`) committed on its branch: the files changed with
    /// lines added and removed, and the patch, against the branch it was made from or
    /// `against`; with `file` only that file, with `content` the file itself. Bounded by
    /// `max_bytes`. Read-only: use it to review a teammate's work.
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
    /// Merge a worktree agent's (`agent`) branch `into` the branch it was made from, another
    /// branch or "@alice": `mode` auto, ff, merge or squash, with an optional `message`;
    /// repeatable as it keeps working. A conflict is reported file by file with its hunks
    /// and nothing is written. `from` does the reverse (the base into the agent's branch):
    /// a conflict there is left in its worktree and the agent is asked to resolve it.
    /// Contracts on `merge` may refuse it or hold it for an approval.
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
