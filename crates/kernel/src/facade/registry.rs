//! The registry is the MCP layer's to call ([`Kernel::registry`]); this one
//! forward stays for the runtime's schedule tests, which name it.

use crate::Kernel;
use crate::registry::AgentRecord;
use domain::error::Result;

impl Kernel {
    pub async fn agent_get(&self, target: &str) -> Result<AgentRecord> {
        self.registry.agent_get(target).await
    }
}
