//! The façade of [`Registry`](crate::registry::Registry), who is who (instances, agents, tokens): each method hands the call to
//! the room (its documentation is there), resolving names first where it needs them.

use crate::registry::tokens::AuthError;
use crate::registry::{AgentRecord, AgentView};
use crate::{Caller, Kernel, Scope};
use domain::error::Result;
use domain::names::WorkflowRef;

/// The registry: who is who.
impl Kernel {
    pub async fn agent_list(&self, workflow: Option<&str>) -> Result<Vec<AgentView>> {
        self.registry.agent_list(workflow).await
    }

    pub async fn agent_get(&self, target: &str) -> Result<AgentRecord> {
        self.registry.agent_get(target).await
    }

    pub async fn workflow_ref(&self, id: i64) -> Result<Option<WorkflowRef>> {
        self.registry.workflow_ref(id).await
    }

    pub async fn workflow_id(&self, wf: &WorkflowRef) -> Result<i64> {
        self.registry.workflow_id(wf).await
    }

    pub async fn scope(&self, caller: &Caller, workflow: Option<&str>) -> Result<Scope> {
        self.registry.scope(caller, workflow).await
    }

    pub fn local_token(&self) -> &str {
        self.registry.local_token()
    }

    pub async fn authenticate(&self, bearer: Option<&str>) -> Result<Caller, AuthError> {
        self.registry.authenticate(bearer).await
    }

    pub async fn mint_agent_token(
        &self,
        agent_id: i64,
        ttl: std::time::Duration,
        purpose: &str,
        run_id: Option<String>,
    ) -> Result<(String, i64)> {
        self.registry
            .mint_agent_token(agent_id, ttl, purpose, run_id)
            .await
    }
}
