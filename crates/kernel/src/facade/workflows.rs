//! The façade of [`Workflows`](crate::workflows::Workflows), workflow runs: each method hands the call to
//! the room (its documentation is there), resolving names first where it needs them.

use crate::Kernel;
use crate::workflows::run::{Source, Started};
use crate::workflows::{WorkflowListed, WorkflowStatus};
use domain::error::Result;
use std::time::Duration;

/// Workflow runs.
impl Kernel {
    pub async fn workflow_status(&self, workflow: &str) -> Result<WorkflowStatus> {
        self.workflows.workflow_status(workflow).await
    }

    pub async fn workflow_wait(
        &self,
        workflow: &str,
        wait: Duration,
        progress: impl FnMut(String),
    ) -> Result<WorkflowStatus> {
        self.workflows.workflow_wait(workflow, wait, progress).await
    }

    pub async fn workflow_stop(&self, workflow: &str) -> Result<(usize, Vec<String>)> {
        self.workflows.workflow_stop(workflow).await
    }

    pub async fn workflow_list(&self) -> Result<Vec<WorkflowListed>> {
        self.workflows.workflow_list().await
    }

    pub async fn workflow_start(
        &self,
        source: Source,
        tag: Option<&str>,
        params: &serde_json::Map<String, serde_json::Value>,
        org: Option<&str>,
    ) -> Result<Started> {
        self.workflows
            .workflow_start(source, tag, params, org)
            .await
    }
}
