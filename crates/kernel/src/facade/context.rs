//! A vote that decides an approval: the context room counts it, the runtime lets
//! the approval's holder go on. Everything else of documents and proposals is the
//! room's own ([`Kernel::context`]).

use crate::context::proposals::Voted;
use crate::{Kernel, Scope};
use domain::error::Result;

impl Kernel {
    /// team_vote: the caller's vote; when it closes a proposal that stood for an
    /// approval, the approval is decided and whoever waits on it goes on.
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
}
