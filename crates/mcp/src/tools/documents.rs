//! team_doc_read, team_doc_write, team_doc_append, team_doc_create, team_doc_list,
//! document_suggest.

use super::params::Parameters;
use super::{ScopeArg, ToolError, given};

/// The optional `file` argument: left out means the main document (notes.md), but an
/// empty name is a mistake, not a request for notes.md.
fn doc_file(f: &Option<String>) -> Result<Option<&str>, ToolError> {
    match f.as_deref() {
        Some(s) if s.trim().is_empty() => Err(ToolError(
            "file is empty: leave it out for the main document (notes.md), or name one such as \"plan.md\""
                .into(),
        )),
        _ => Ok(given(f)),
    }
}
use crate::AgentWorker;
use kernel::context::documents::{DocList, DocRead, DocWritten, Suggested};
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ReadArgs {
    /// A relative path (default "notes.md").
    #[serde(default)]
    #[schemars(with = "String")]
    pub file: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct WriteArgs {
    /// At most 1 MiB.
    pub content: String,
    /// Default "notes.md".
    #[serde(default)]
    #[schemars(with = "String")]
    pub file: Option<String>,
    /// Write only if it is still at this version (from team_doc_read).
    #[serde(default)]
    #[schemars(with = "String")]
    pub expected_version: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct AppendArgs {
    pub content: String,
    /// Default "notes.md".
    #[serde(default)]
    #[schemars(with = "String")]
    pub file: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct CreateArgs {
    /// E.g. "design/api.md".
    pub file: String,

    #[serde(default)]
    pub content: String,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ListArgs {
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct SuggestArgs {
    /// What should change and why.
    pub suggestion: String,
    /// Default "notes.md".
    #[serde(default)]
    #[schemars(with = "String")]
    pub file: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[tool_router(router = document_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Read a team document (default notes.md) with its version.
    #[tool(
        title = "Read a document",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn team_doc_read(
        &self,
        Parameters(a): Parameters<ReadArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<DocRead>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(
            self.kernel
                .context()
                .doc_read(&scope, doc_file(&a.file)?)
                .await?,
        ))
    }

    /// Replace a team document's whole `content` (made if missing). If it has an owner, others
    /// use document_suggest.
    #[tool(
        title = "Write a document",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn team_doc_write(
        &self,
        Parameters(a): Parameters<WriteArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<DocWritten>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(
            self.kernel
                .context()
                .doc_write(
                    &scope,
                    doc_file(&a.file)?,
                    a.content,
                    given(&a.expected_version),
                )
                .await?,
        ))
    }

    /// Add `content` at the end of a team document (made if missing).
    #[tool(
        title = "Append to a document",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn team_doc_append(
        &self,
        Parameters(a): Parameters<AppendArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<DocWritten>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(
            self.kernel
                .context()
                .doc_append(&scope, doc_file(&a.file)?, a.content)
                .await?,
        ))
    }

    /// Create a new team document `file` with `content`; fails if it exists.
    #[tool(
        title = "Create a document",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn team_doc_create(
        &self,
        Parameters(a): Parameters<CreateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<DocWritten>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(
            self.kernel
                .context()
                .doc_create(&scope, &a.file, a.content)
                .await?,
        ))
    }

    /// The team's documents with size, last change and owner.
    #[tool(
        title = "List documents",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn team_doc_list(
        &self,
        Parameters(a): Parameters<ListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<DocList>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(self.kernel.context().doc_list(&scope).await?))
    }

    /// Send a document's owner your `suggestion` for it.
    #[tool(
        title = "Suggest a document change",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn document_suggest(
        &self,
        Parameters(a): Parameters<SuggestArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Suggested>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(
            self.kernel
                .context()
                .document_suggest(&scope, &a.suggestion, doc_file(&a.file)?)
                .await?,
        ))
    }
}
