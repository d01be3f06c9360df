//! org_set (the lead): organisations, their members, and the instance that holds
//! their channel and documents (workflow_list lists them).

use super::ToolError;
use super::params::Parameters;
use crate::AgentWorker;
use kernel::registry::orgs::{OrgMember, OrgView};
use rmcp::{Json, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct OrgSetArgs {
    pub name: String,
    /// What it is for.
    #[serde(default)]
    #[schemars(with = "String")]
    pub description: Option<String>,
    /// Replaces its members.
    #[serde(default)]
    #[schemars(with = "Vec<OrgMember>")]
    pub members: Option<Vec<OrgMember>>,
    /// Remove it, its members and its contracts.
    #[serde(default)]
    pub remove: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct OrgSetOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organisation: Option<OrgView>,
    pub removed: bool,
}

#[tool_router(router = org_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Create or change the organisation `name` and its `members` [{name, role, human}]; they
    /// share a channel and documents, @org.<name>. contract_set and workflow_run take {org}.
    #[tool(
        title = "Set an organisation",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn org_set(
        &self,
        Parameters(a): Parameters<OrgSetArgs>,
    ) -> Result<Json<OrgSetOut>, ToolError> {
        if a.remove {
            if a.members.is_some() || a.description.is_some() {
                return Err(ToolError(
                    "remove takes only the name; leave out members and description".into(),
                ));
            }
            self.kernel.org_remove(&a.name).await?;
            return Ok(Json(OrgSetOut {
                organisation: None,
                removed: true,
            }));
        }
        let org = self
            .kernel
            .org_set(&a.name, a.description, a.members)
            .await?;
        Ok(Json(OrgSetOut {
            organisation: Some(org),
            removed: false,
        }))
    }
}
