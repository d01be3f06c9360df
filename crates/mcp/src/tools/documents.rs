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
    /// The document, a relative path such as "notes.md" or "design/api.md" (default "notes.md", the main document).
    #[serde(default)]
    #[schemars(with = "String")]
    pub file: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct WriteArgs {
    /// The whole new content (at most 1 MiB).
    pub content: String,
    /// The document (default "notes.md").
    #[serde(default)]
    #[schemars(with = "String")]
    pub file: Option<String>,
    /// The version team_doc_read returned: if the document changed since, nothing is written and the
    /// error gives the current version. Leave it out to overwrite unconditionally.
    #[serde(default)]
    #[schemars(with = "String")]
    pub expected_version: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct AppendArgs {
    /// The text to add at the end (a newline is put between it and the existing text).
    pub content: String,
    /// The document (default "notes.md"; created if missing).
    #[serde(default)]
    #[schemars(with = "String")]
    pub file: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct CreateArgs {
    /// The new document's relative path, e.g. "design/api.md".
    pub file: String,
    /// Its content (may be empty).
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
    /// What should change and why (at most 4,000 characters; put a long draft in a resource and give its id).
    pub suggestion: String,
    /// The document it is about (default "notes.md").
    #[serde(default)]
    #[schemars(with = "String")]
    pub file: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[tool_router(router = document_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Read a shared document of your team (default notes.md, the main document) with its
    /// version. Pass the version to team_doc_write as expected_version to never overwrite a
    /// change you have not seen.
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
            self.kernel.doc_read(&scope, doc_file(&a.file)?).await?,
        ))
    }

    /// Replace a shared document's whole `content` (creating it if needed). With
    /// expected_version, the write happens only if nobody changed it since you read it. If the
    /// team has a document owner, only the owner and the lead may write; others use
    /// document_suggest.
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
                .doc_write(
                    &scope,
                    doc_file(&a.file)?,
                    a.content,
                    given(&a.expected_version),
                )
                .await?,
        ))
    }

    /// Add `content` at the end of a shared document (default notes.md), e.g. a finding or a log
    /// line, without rewriting it. Creates the document if missing.
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
                .doc_append(&scope, doc_file(&a.file)?, a.content)
                .await?,
        ))
    }

    /// Create a new shared document `file` (a relative path); fails if it already exists (then read it and write or
    /// append instead). Folders in the path are created.
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
            self.kernel.doc_create(&scope, &a.file, a.content).await?,
        ))
    }

    /// List your team's shared documents (nested folders included) with size, last change
    /// and owner.
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
        Ok(Json(self.kernel.doc_list(&scope).await?))
    }

    /// Propose a change to a document that only its owner may write: posts your `suggestion` to
    /// @owner in the channel (it lands in their inbox) and returns the message id.
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
                .document_suggest(&scope, &a.suggestion, doc_file(&a.file)?)
                .await?,
        ))
    }
}
