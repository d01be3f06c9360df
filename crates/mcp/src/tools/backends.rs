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
    /// Only these backends (default: all of them).
    #[serde(default)]
    pub backends: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct BackendsOut {
    pub backends: Vec<BackendReport>,
}

#[tool_router(router = backend_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Which backends can run agents here, as the kernel sees them (an agent's own env
    /// may add keys or a PATH): for each CLI where its command was found (PATH or the
    /// usual install places) and its version, whether it is logged in, what to do if
    /// not, and what each permission profile becomes on it. Starts the CLIs' own checks,
    /// so it takes a few seconds. `backends` (a list of names) limits it to those.
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
        Ok(Json(BackendsOut { backends }))
    }
}
