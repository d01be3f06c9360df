//! Contracts drafted by agents: an `approval` proposal carrying a contract. Agents
//! may vote (advice to the lead); the lead's vote decides it at once: `approve`
//! installs the contract for this workflow instance (source `proposal`), `reject`
//! drops it. Expiry installs nothing. Only the lead's approval installs: an agent
//! cannot widen or loosen the rules it works under by itself.

use super::*;
use crate::governance::contracts::put_tx;
use crate::messaging::post_system;

/// Checks a draft: (its sentence, its JSON) or why it cannot be proposed.
pub(super) fn check(kind: &str, binding: bool, v: &serde_json::Value) -> Result<(String, String)> {
    if kind != "approval" {
        return Err(Error::invalid(
            "contract goes with type approval (the lead approves it into force)",
        ));
    }
    if !binding {
        return Err(Error::invalid(
            "a contract proposal is binding: leave binding out or set it true",
        ));
    }
    if v.get("workflow").is_some() {
        return Err(Error::invalid(
            "contract.workflow: a drafted contract applies to this workflow instance; leave workflow out",
        ));
    }
    let c = domain::contracts::parse(v).map_err(|e| Error::invalid(format!("contract.{e}")))?;
    Ok((domain::contracts::sentence(&c), v.to_string()))
}

/// The lead voted on a drafted contract: close the proposal with that choice and,
/// on approve, put the contract in force, all in this transaction.
pub(super) fn decide(
    c: &Connection,
    p: &mut Stored,
    (s, option): (&Scope, &str),
    now: i64,
) -> Result<Posted> {
    p.close(
        c,
        (ProposalStatus::Resolved, now),
        Some(option.to_owned()),
        LEAD,
    )?;
    let spec = p.contract.clone().unwrap_or_default();
    let text = if option == "approve" {
        let v: serde_json::Value =
            serde_json::from_str(&spec).map_err(|e| Error::internal(e.to_string()))?;
        let name = v["name"].as_str().unwrap_or_default().to_owned();
        match v["org"].as_str() {
            // Bound to an organisation: the lead's contract there, for every instance run within it.
            Some(org) => {
                let org = domain::names::org_name(org)?.unwrap_or_default();
                if !crate::registry::orgs::exists(c, &org)? {
                    return Err(Error::not_found(format!(
                        "the contract is bound to the organisation {org:?}, which does not exist; \
                         org_set it first, then vote again"
                    )));
                }
                if !replaces_only_its_own(c, &name, &org)? {
                    return Err(Error::conflict(format!(
                        "the lead's contract {name:?} is in force elsewhere, and this one would replace \
                         it; reject the proposal and draft it under another name"
                    )));
                }
                put_tx(c, None, "proposal", &v, &name, now)?;
                format!(
                    "@{} {} is approved by the lead: contract \"{name}\" is now in force in every instance \
                     run within the organisation {org}.",
                    p.creator,
                    p.id(),
                )
            }
            None => {
                put_tx(c, Some(p.workflow_id), "proposal", &v, &name, now)?;
                format!(
                    "@{} {} is approved by the lead: contract \"{name}\" is now in force in {}.",
                    p.creator,
                    p.id(),
                    s.workflow
                )
            }
        }
    } else {
        format!(
            "@{} {} is not approved by the lead ({}): its contract is not installed.",
            p.creator,
            p.id(),
            quote(option)
        )
    };
    post_system(c, p.workflow_id, &s.workflow, text, now)
}

/// Whether the lead's contract of this name, if there is one, is bound to `org`
/// too (a drafted contract may replace only that one).
fn replaces_only_its_own(c: &Connection, name: &str, org: &str) -> Result<bool> {
    use store::sql::OptionalExtension;
    let spec: Option<String> = c
        .query_row(
            "SELECT spec FROM contracts WHERE owner_workflow_id IS NULL AND name = ?1",
            [name],
            |r| r.get(0),
        )
        .optional()?;
    let Some(spec) = spec else {
        return Ok(true);
    };
    let bound = serde_json::from_str::<serde_json::Value>(&spec)
        .ok()
        .and_then(|v| v["org"].as_str().map(str::to_owned))
        .and_then(|g| domain::names::org_name(&g).ok().flatten());
    Ok(bound.as_deref() == Some(org))
}
