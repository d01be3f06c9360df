//! The façade of [`Contracts`](crate::governance::contracts::Contracts), the lead's contracts: each method hands the call to
//! the room (its documentation is there), resolving names first where it needs them.

use crate::Kernel;
use crate::governance::contracts::{ContractList, ContractView};
use domain::contracts;
use domain::error::{Error, Result};
use domain::names::WorkflowRef;
use serde_json::Value;

impl Kernel {
    /// contract_set: creates or replaces the lead's contract of this name.
    pub async fn contract_set(&self, spec: Value) -> Result<ContractView> {
        let c = contracts::parse(&spec).map_err(|e| Error::invalid(format!("contract.{e}")))?;
        if let Some(g) = &c.org {
            self.registry.org_checked(g).await?;
        }
        if let Some(w) = &c.workflow {
            let wf = WorkflowRef::parse(w)?;
            if w.contains(':') {
                // A named instance must exist, so a typo is not a contract that never applies.
                self.registry.workflow_id(&wf).await?;
            }
        }
        self.contracts.set(c, spec).await
    }

    /// contract_set with remove: deletes the lead's contract of this name.
    pub async fn contract_delete(&self, name: &str) -> Result<()> {
        self.contracts.delete(name).await
    }

    /// contract_list: the contracts (all, or those in force in one instance), the
    /// built-in guards and the latest decisions.
    pub async fn contract_list(
        &self,
        workflow: Option<&WorkflowRef>,
        org: Option<&str>,
    ) -> Result<ContractList> {
        let scope = match workflow {
            Some(wf) => Some((self.registry.workflow_id(wf).await?, wf.clone())),
            None => None,
        };
        if scope.is_some() && org.is_some() {
            return Err(domain::error::Error::invalid(
                "contract_list takes workflow (what is in force there) or org (what is bound to it), not both",
            ));
        }
        let org = match org {
            Some(g) => Some(self.registry.org_checked(g).await?.ok_or_else(|| {
                domain::error::Error::invalid(
                    "org: @global has no contracts of its own; leave org out to list every contract",
                )
            })?),
            None => None,
        };
        self.contracts.list(scope, org).await
    }
}
