//! backend_list (the lead only): which backends can run agents here.

use super::ToolError;
use super::params::Parameters;
use crate::AgentWorker;
use domain::protocol::BackendReport;
use rmcp::{Json, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct BackendListArgs {
    /// Default: all.
    #[serde(default)]
    pub backends: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct BackendsOut {
    pub backends: Vec<BackendReport>,
    /// What this machine gives a run's OS sandbox.
    pub sandbox: String,
}

#[tool_router(router = backend_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Which `backends` can run here: found, version, logged in, the fix, what each permission
    /// profile becomes.
    #[tool(
        title = "List backends",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn backend_list(
        &self,
        Parameters(a): Parameters<BackendListArgs>,
    ) -> Result<Json<BackendsOut>, ToolError> {
        let names: Vec<&str> = a.backends.iter().map(String::as_str).collect();
        for n in &names {
            if !kernel::registry::BACKENDS.contains(n) {
                return Err(ToolError(format!(
                    "unknown backend {n:?}: use one of {}",
                    kernel::registry::BACKENDS.join(", ")
                )));
            }
        }
        let backends = self.kernel.probe_backends(&names, &BTreeMap::new()).await?;
        let sandbox = kernel::runtime::workers::sandbox::support();
        Ok(Json(BackendsOut { backends, sandbox }))
    }
}
