//! Organisations changed: the registry keeps them (`registry/orgs.rs`), a member
//! removed is an agent of the organisation's instance, deleted as any agent is, and
//! an organisation removed takes the lead's contracts bound to it. Reading them is
//! the registry's own ([`Kernel::registry`]).

use crate::Kernel;
use crate::registry::orgs::{OrgMember, OrgView};
use domain::error::Result;
use domain::names::org_instance;

impl Kernel {
    /// org_set: creates or changes an organisation (its description, its members).
    pub async fn org_set(
        &self,
        name: &str,
        description: Option<String>,
        members: Option<Vec<OrgMember>>,
    ) -> Result<OrgView> {
        let change = self.registry.org_put(name, description, members).await?;
        for m in &change.removed {
            self.runtime
                .agent_delete(&member_target(m, &change.view.name), false)
                .await?;
        }
        if change.removed.is_empty() {
            return Ok(change.view);
        }
        self.registry.org_view(name).await
    }

    /// org_set with remove: the organisation, its members and its contracts; its
    /// channel and documents stay readable by the lead (`@org.<name>`).
    pub async fn org_remove(&self, name: &str) -> Result<()> {
        let members = self.registry.org_remove(name).await?;
        let org = domain::names::org_name(name)?.unwrap_or_default();
        // Its contracts first: with the organisation gone, they must not wait for a
        // new one of the same name.
        self.contracts.delete_org(&org).await?;
        for m in &members {
            self.runtime
                .agent_delete(&member_target(m, &org), false)
                .await?;
        }
        Ok(())
    }
}

/// A member as an agent of its organisation's instance: `coder@org.review-team:main`.
fn member_target(member: &str, org: &str) -> String {
    let wf = org_instance(org);
    format!("{member}@{}:{}", wf.name, wf.tag)
}
