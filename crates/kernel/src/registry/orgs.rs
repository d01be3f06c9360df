//! Organisations: a name, members with a role (agents or people), and the
//! instance that holds what they share, `@org.<name>` (its channel, documents and
//! each member's organisation inbox). An instance runs within one organisation
//! (`workflows.org`; NULL is `@global`, which has no members and no contracts of
//! its own and is never stored).
//!
//! What is per organisation and what per instance: a member has one identity in
//! its organisation (its place in the organisation's channel, with its read
//! position, its organisation inbox, its role), whichever instance it acts from;
//! its runs, its instance inbox, its workspace and skills stay with the instance
//! whose YAML made it. A member reaches the organisation's context by naming its
//! instance (`workflow: "@org.review-team"`) in the team tools; to anyone else it
//! is an instance that does not exist.

use super::{NewAgent, Registry, insert_agent_tx, workflow_id_tx};
use crate::Scope;
use domain::backends::Backend;
use domain::error::{Error, Result};
use domain::names::{ORG_PREFIX, WorkflowRef, org_instance};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use store::sql::{self, Connection, OptionalExtension};

/// The most members one organisation may have.
pub const MAX_MEMBERS: usize = 200;
/// The longest description of an organisation (workflow_list repeats it).
pub const MAX_DESCRIPTION: usize = 2_000;

/// A member of an organisation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrgMember {
    /// An agent's name in its instances, or a person's.
    pub name: String,
    /// What it does here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// A person (default: an agent).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub human: bool,
}

/// An organisation as workflow_list shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OrgView {
    /// e.g. "review-team" (`@global` is listed as "global").
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The instance that holds its channel and documents, e.g. "@org.review-team".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    pub members: Vec<OrgMember>,
    /// The instances run within it, e.g. "@review:pr-1".
    pub instances: Vec<String>,
}

/// What an organisation change did to its members, for the façade to finish
/// (a member removed is an agent of its instance to delete, tokens and all).
pub struct OrgChange {
    pub view: OrgView,
    pub removed: Vec<String>,
}

impl Registry {
    /// Creates an organisation, or changes its description or (given) members.
    pub(crate) async fn org_put(
        &self,
        name: &str,
        description: Option<String>,
        members: Option<Vec<OrgMember>>,
    ) -> Result<OrgChange> {
        let org = org_name_given(name)?;
        check_description(description.as_deref())?;
        if let Some(m) = &members {
            check_members(m)?;
        }
        let (org2, wf, now) = (org.clone(), org_instance(&org), self.clock.now_ms());
        let removed = self
            .store
            .write(move |c| {
                let wid = workflow_id_tx(c, &wf, Some(now))?.expect("created");
                c.execute(
                    "INSERT INTO orgs (name, description, workflow_id, created_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (name) DO UPDATE SET description = COALESCE(?2, orgs.description)",
                    sql::params![org2, description, wid, now],
                )?;
                match members {
                    Some(m) => put_members_tx(c, &org2, &wf, &m, now),
                    None => Ok(Vec::new()),
                }
            })
            .await?;
        // A member whose kind changed had its tokens revoked: none stays cached.
        self.tokens.forget_all();
        Ok(OrgChange {
            view: self.org_view(&org).await?,
            removed,
        })
    }

    /// Removes an organisation (none of its instances may be running, blocked or
    /// scheduled; those that completed run within `@global` from then on); returns
    /// its members, whose agents in its instance the façade deletes.
    pub(crate) async fn org_remove(&self, name: &str) -> Result<Vec<String>> {
        let org = org_name_given(name)?;
        self.store
            .write(move |c| {
                let live: Option<String> = c
                    .query_row(
                        "SELECT name || ':' || tag FROM workflows WHERE org = ?1
                           AND state IN ('running', 'scheduled', 'blocked') LIMIT 1",
                        [&org],
                        |r| r.get(0),
                    )
                    .optional()?;
                if let Some(w) = live {
                    return Err(Error::conflict(format!(
                        "@{w} runs within {org}; workflow_stop it first (nothing was removed)"
                    )));
                }
                let members = member_names(c, &org)?;
                if c.execute("DELETE FROM orgs WHERE name = ?1", [&org])? == 0 {
                    return Err(not_found(c, &org));
                }
                c.execute("DELETE FROM org_members WHERE org = ?1", [&org])?;
                c.execute("UPDATE workflows SET org = NULL WHERE org = ?1", [&org])?;
                Ok(members)
            })
            .await
    }

    /// Every organisation, `@global` first.
    pub async fn org_list(&self) -> Result<Vec<OrgView>> {
        self.store
            .read(|c| {
                let mut out = vec![view_tx(c, None)?];
                for n in org_names(c)? {
                    out.push(view_tx(c, Some(&n))?);
                }
                Ok(out)
            })
            .await
    }

    /// One organisation (None: `@global`).
    pub async fn org_view(&self, org: &str) -> Result<OrgView> {
        let org = org_name_given(org)?;
        self.store
            .read(move |c| {
                if !exists(c, &org)? {
                    return Err(not_found(c, &org));
                }
                view_tx(c, Some(&org))
            })
            .await
    }

    /// The organisation named, which must exist (None: `@global`).
    pub async fn org_checked(&self, given: &str) -> Result<Option<String>> {
        let Some(org) = domain::names::org_name(given)? else {
            return Ok(None);
        };
        self.store
            .read(move |c| match exists(c, &org)? {
                true => Ok(Some(org)),
                false => Err(not_found(c, &org)),
            })
            .await
    }

    /// The organisation instance of `caller`, if it is a member of one (an agent
    /// of an instance run within it, or a member acting from it).
    pub async fn member_org(&self, caller: &crate::Caller) -> Result<Option<String>> {
        let crate::Caller::Agent(a) = caller else {
            return Ok(None);
        };
        if a.sub_agent {
            return Ok(None);
        }
        let (wid, me) = (a.workflow_id, a.name.clone());
        let org: Option<String> = self
            .store
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT o.name FROM orgs o JOIN org_members m ON m.org = o.name AND m.member = ?2
                     WHERE o.workflow_id = ?1
                        OR o.name = (SELECT org FROM workflows WHERE id = ?1)",
                    (wid, &me),
                    |r| r.get(0),
                )
                .optional()?)
            })
            .await?;
        Ok(org.map(|o| org_instance(&o).to_string()))
    }

    /// An agent's scope in its organisation's instance, when it names it and is
    /// a member there; else the instance reads as unknown.
    pub(super) async fn org_scope(
        &self,
        a: &crate::AgentIdentity,
        wf: &WorkflowRef,
    ) -> Result<Scope> {
        if a.sub_agent {
            return Err(Error::forbidden(format!(
                "you are {}, made by another agent: a sub-agent never acts as an organisation's \
                 member (whatever its name), so {wf} is not yours; leave out `workflow`",
                a.name
            )));
        }
        let (from, me) = (a.workflow_id, a.name.clone());
        let found: Option<(String, i64)> = self
            .store
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT o.name, o.workflow_id FROM workflows w JOIN orgs o ON o.name = w.org
                     JOIN org_members m ON m.org = o.name AND m.member = ?2
                     WHERE w.id = ?1",
                    (from, &me),
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?)
            })
            .await?;
        // Compared in one spelling on both engines; the scope names the instance as it is.
        let asked = WorkflowRef {
            name: wf.name.to_ascii_lowercase(),
            tag: wf.tag.clone(),
        };
        match found {
            Some((org, workflow_id)) if org_instance(&org) == asked => Ok(Scope {
                workflow: org_instance(&org),
                workflow_id,
                me: a.name.clone(),
                lead: false,
                run_id: a.run_id.clone(),
            }),
            _ => Err(Error::not_found(format!("no workflow instance {wf}"))),
        }
    }
}

/// `review-team` or `@review-team`; `@global` has nothing to change.
fn org_name_given(name: &str) -> Result<String> {
    domain::names::org_name(name)?.ok_or_else(|| {
        Error::invalid(
            "org: @global has no members or contracts of its own; name another organisation",
        )
    })
}

fn check_description(d: Option<&str>) -> Result<()> {
    match d.map(|d| d.chars().count()) {
        Some(n) if n > MAX_DESCRIPTION => Err(Error::invalid(format!(
            "description: {n} characters; at most {MAX_DESCRIPTION} (workflow_list repeats it): \
             keep the details in a document of the organisation's instance"
        ))),
        _ => Ok(()),
    }
}

fn check_members(m: &[OrgMember]) -> Result<()> {
    if m.len() > MAX_MEMBERS {
        return Err(Error::invalid(format!("members: at most {MAX_MEMBERS}")));
    }
    for (i, x) in m.iter().enumerate() {
        domain::names::check_agent_name(&x.name)
            .map_err(|e| Error::invalid(format!("members[{i}].name: {e}")))?;
        if m[..i].iter().any(|y| y.name.eq_ignore_ascii_case(&x.name)) {
            return Err(Error::invalid(format!(
                "members[{i}].name: {:?} is named twice",
                x.name
            )));
        }
        if x.role.as_ref().is_some_and(|r| r.chars().count() > 200) {
            return Err(Error::invalid(format!(
                "members[{i}].role: at most 200 characters"
            )));
        }
    }
    Ok(())
}

/// Replaces the members; each is an agent of the organisation's instance without
/// a worker (`external`, or `human` for a person). Returns the names removed.
fn put_members_tx(
    c: &Connection,
    org: &str,
    wf: &WorkflowRef,
    members: &[OrgMember],
    now: i64,
) -> Result<Vec<String>> {
    let before = member_names(c, org)?;
    c.execute("DELETE FROM org_members WHERE org = ?1", [org])?;
    for m in members {
        let kind = if m.human {
            Backend::Human
        } else {
            Backend::External
        };
        c.execute(
            "INSERT INTO org_members (org, member, role, kind) VALUES (?1, ?2, ?3, ?4)",
            sql::params![org, m.name, m.role, kind.as_str()],
        )?;
        let wid = workflow_id_tx(c, wf, Some(now))?.expect("created");
        let had: Option<Backend> = c
            .query_row(
                "SELECT backend FROM agents WHERE workflow_id = ?1 AND name = ?2",
                (wid, &m.name),
                |r| r.parse(0),
            )
            .optional()?;
        match had {
            None => {
                let a = NewAgent {
                    name: m.name.clone(),
                    backend: kind.as_str().into(),
                    model: None,
                    system: m.role.clone(),
                    workflow: Some(wf.to_string()),
                    cwd: None,
                    env: Default::default(),
                    config: Default::default(),
                    schedule: None,
                    node: None,
                    parent: None,
                };
                insert_agent_tx(c, &a, wf, None, now)?;
            }
            Some(was) => {
                // A person who becomes an agent member, or the reverse, joins again.
                if was != kind {
                    c.execute(
                        "UPDATE tokens SET revoked_at = ?3 WHERE revoked_at IS NULL AND agent_id =
                           (SELECT id FROM agents WHERE workflow_id = ?1 AND name = ?2)",
                        sql::params![wid, m.name, now],
                    )?;
                }
                c.execute(
                    "UPDATE agents SET backend = ?3, system = ?4 WHERE workflow_id = ?1 AND name = ?2",
                    sql::params![wid, m.name, kind.as_str(), m.role],
                )?;
            }
        }
    }
    Ok(before
        .into_iter()
        .filter(|b| !members.iter().any(|m| m.name.eq_ignore_ascii_case(b)))
        .collect())
}

fn member_names(c: &Connection, org: &str) -> Result<Vec<String>> {
    Ok(
        c.prepare("SELECT member FROM org_members WHERE org = ?1 ORDER BY member")?
            .query_map([org], |r| r.get(0))?
            .collect::<sql::Result<_>>()?,
    )
}

/// Every organisation's name but `@global`'s, in order.
fn org_names(c: &Connection) -> Result<Vec<String>> {
    Ok(c.prepare("SELECT name FROM orgs ORDER BY name")?
        .query_map((), |r| r.get(0))?
        .collect::<sql::Result<_>>()?)
}

pub(crate) fn exists(c: &Connection, org: &str) -> Result<bool> {
    Ok(c.query_row(
        "SELECT EXISTS (SELECT 1 FROM orgs WHERE name = ?1)",
        [org],
        |r| r.get(0),
    )?)
}

/// "no organisation named x; organisations: ..." (read as unknown, as every scope).
fn not_found(c: &Connection, org: &str) -> Error {
    let names = org_names(c).unwrap_or_default();
    Error::not_found(format!(
        "no organisation named {org:?}; org_set makes one. Organisations: global{}",
        names.iter().map(|n| format!(", {n}")).collect::<String>()
    ))
}

/// One organisation's view (None: `@global`, the instances run within no other).
fn view_tx(c: &Connection, org: Option<&str>) -> Result<OrgView> {
    let instances: Vec<String> = c
        .prepare(
            "SELECT name, tag FROM workflows WHERE org IS NOT DISTINCT FROM ?1
               AND substr(name, 1, 4) <> ?2 AND state <> 'active' ORDER BY name, tag",
        )?
        .query_map((org, ORG_PREFIX), |r| {
            Ok(format!("@{}:{}", r.get::<String>(0)?, r.get::<String>(1)?))
        })?
        .collect::<sql::Result<_>>()?;
    let Some(org) = org else {
        return Ok(OrgView {
            name: domain::names::GLOBAL_ORG.into(),
            description: Some("no members and no contracts of its own".into()),
            channel: None,
            members: Vec::new(),
            instances,
        });
    };
    let description: Option<String> =
        c.query_row("SELECT description FROM orgs WHERE name = ?1", [org], |r| {
            r.get(0)
        })?;
    let members = c
        .prepare("SELECT member, role, kind FROM org_members WHERE org = ?1 ORDER BY member")?
        .query_map([org], |r| {
            Ok(OrgMember {
                name: r.get(0)?,
                role: r.get(1)?,
                human: r.parse::<Backend>(2)? == Backend::Human,
            })
        })?
        .collect::<sql::Result<_>>()?;
    Ok(OrgView {
        name: org.to_owned(),
        description,
        channel: Some(org_instance(org).to_string()),
        members,
        instances,
    })
}

/// The instances an agent of `instance` acts in: its own, and, when `instance`
/// is an organisation's, every instance run within it (its members decide the
/// approvals there).
pub(crate) fn acts_in_tx(c: &Connection, instance: i64) -> Result<Vec<i64>> {
    let mut out = vec![instance];
    out.extend(
        c.prepare(
            "SELECT w.id FROM orgs o JOIN workflows w ON w.org = o.name WHERE o.workflow_id = ?1 ORDER BY w.id",
        )?
        .query_map([instance], |r| r.get::<i64>(0))?
        .collect::<sql::Result<Vec<_>>>()?,
    );
    Ok(out)
}

/// The organisation instance `instance` runs within: its own instance (id and
/// name) and its members; None within `@global`.
pub(crate) fn of_tx(
    c: &Connection,
    instance: i64,
) -> Result<Option<(i64, WorkflowRef, Vec<String>)>> {
    let org: Option<(String, i64)> = c
        .query_row(
            "SELECT o.name, o.workflow_id FROM workflows w JOIN orgs o ON o.name = w.org WHERE w.id = ?1",
            [instance],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((org, wid)) = org else {
        return Ok(None);
    };
    Ok(Some((wid, org_instance(&org), member_names(c, &org)?)))
}

/// Puts instance `instance` within organisation `org` (or none), inside the
/// caller's store job (a workflow run's start).
pub(crate) fn set_org_tx(c: &Connection, instance: i64, org: Option<&str>) -> Result<()> {
    c.execute(
        "UPDATE workflows SET org = ?2 WHERE id = ?1",
        sql::params![instance, org],
    )?;
    Ok(())
}

/// Who votes as the members in `instance`, run within an organisation: its
/// people, and its agent members that are agents of the instance.
pub(crate) fn voters_tx(c: &Connection, instance: i64) -> Result<Vec<String>> {
    Ok(c.prepare(
        "SELECT m.member FROM workflows w JOIN org_members m ON m.org = w.org
         WHERE w.id = ?1 AND (m.kind = ?2
           OR EXISTS (SELECT 1 FROM agents a WHERE a.workflow_id = w.id AND a.name = m.member
                      AND a.parent_id IS NULL))
         ORDER BY m.member",
    )?
    .query_map((instance, Backend::Human.as_str()), |r| r.get(0))?
    .collect::<sql::Result<_>>()?)
}
