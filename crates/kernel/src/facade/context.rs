//! The façade of [`Context`](crate::context::Context), documents and proposals: each method hands the call to
//! the room (its documentation is there), resolving names first where it needs them.

use crate::context::documents::settings::{ContextChange, ContextView};
use crate::context::documents::{DocList, DocRead, DocWritten, Suggested};
use crate::context::proposals::{self, Cancelled, NewProposal, StatusList, Voted};
use crate::{Kernel, Scope};
use domain::error::Result;

/// Documents and proposals.
impl Kernel {
    pub async fn doc_read(&self, scope: &Scope, file: Option<&str>) -> Result<DocRead> {
        self.context.doc_read(scope, file).await
    }

    pub async fn doc_write(
        &self,
        scope: &Scope,
        file: Option<&str>,
        content: String,
        expected_version: Option<&str>,
    ) -> Result<DocWritten> {
        self.context
            .doc_write(scope, file, content, expected_version)
            .await
    }

    pub async fn doc_append(
        &self,
        scope: &Scope,
        file: Option<&str>,
        content: String,
    ) -> Result<DocWritten> {
        self.context.doc_append(scope, file, content).await
    }

    pub async fn doc_create(
        &self,
        scope: &Scope,
        file: &str,
        content: String,
    ) -> Result<DocWritten> {
        self.context.doc_create(scope, file, content).await
    }

    pub async fn doc_list(&self, scope: &Scope) -> Result<DocList> {
        self.context.doc_list(scope).await
    }

    pub async fn document_suggest(
        &self,
        scope: &Scope,
        suggestion: &str,
        file: Option<&str>,
    ) -> Result<Suggested> {
        self.context.document_suggest(scope, suggestion, file).await
    }

    pub async fn workflow_context_set(
        &self,
        workflow: &str,
        change: ContextChange,
    ) -> Result<ContextView> {
        self.context.workflow_context_set(workflow, change).await
    }

    pub async fn proposal_create(
        &self,
        scope: &Scope,
        new: NewProposal,
    ) -> Result<proposals::Created> {
        self.context.proposal_create(scope, new).await
    }

    pub async fn proposal_vote(
        &self,
        scope: &Scope,
        proposal: &str,
        choice: &str,
        reason: Option<&str>,
    ) -> Result<Voted> {
        let voted = self
            .context
            .proposal_vote(scope, proposal, choice, reason)
            .await?;
        if let Some(id) = voted.closed_approval {
            // A vote of the members decided an approval: its holder goes on.
            self.runtime.approval_decided(id).await?;
        }
        Ok(voted)
    }

    pub async fn proposal_status(
        &self,
        scope: &Scope,
        proposal: Option<&str>,
    ) -> Result<StatusList> {
        self.context.proposal_status(scope, proposal).await
    }

    pub async fn proposal_cancel(&self, scope: &Scope, proposal: &str) -> Result<Cancelled> {
        self.context.proposal_cancel(scope, proposal).await
    }
}
