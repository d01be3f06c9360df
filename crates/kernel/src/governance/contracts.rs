//! Contract rows, the set in force (in memory, replaced whole on every change, so
//! a change applies to the very next decision without a restart), and the log of
//! decisions.
//!
//! A contract the lead sets is global unless its `workflow` field narrows it; a
//! contract from a workflow's YAML belongs to that instance and is replaced when
//! the instance is run again.

use crate::events::{Event, Events};
use crate::timing::Clock;
use domain::clock::fmt_ms;
use domain::contracts::{self, Contract, Verdict};
use domain::error::{Error, Result};
use domain::guards::{Budget, DEFAULT_MAX_HOPS, DEFAULT_RUNS_PER_HOUR};
use domain::names::WorkflowRef;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use store::Store;
use store::sql;
use store::sql::Connection;

/// How many decisions contract_list shows.
const RECENT_DECISIONS: i64 = 20;

/// A contract as stored.
#[derive(Debug, Clone)]
pub struct Stored {
    pub id: i64,
    /// The instance whose YAML declared it (None: the lead's).
    pub owner: Option<i64>,
    pub source: String,
    pub spec: Value,
    pub contract: Contract,
}

/// Every contract and the organisation each instance runs within: what a
/// decision reads (it derefs to the contracts, oldest first).
#[derive(Debug, Default)]
pub struct Set {
    contracts: Vec<Stored>,
    /// Instance id -> its organisation (instances within `@global` are absent).
    org_of: HashMap<i64, String>,
}

impl std::ops::Deref for Set {
    type Target = [Stored];
    fn deref(&self) -> &[Stored] {
        &self.contracts
    }
}

/// The contracts room: their rows, the set in force (replaced whole on every
/// change) and the decision log. Built from the store and the events alone; the
/// kernel's façade resolves workflow names before it asks (`facade.rs`).
pub struct Contracts {
    store: Store,
    events: Events,
    /// The kernel's clock: when a contract is put.
    clock: Clock,
    /// The contracts in force, oldest first, and the instances' organisations.
    in_force: RwLock<Arc<Set>>,
}

/// The contracts that apply in one instance: the lead's everywhere (or naming
/// it), then its organisation's, then its own.
pub fn in_force<'a>(
    all: &'a Set,
    workflow_id: i64,
    wf: &'a WorkflowRef,
) -> impl Iterator<Item = &'a Contract> + 'a {
    stored_in_force(all, workflow_id, wf).map(|s| &s.contract)
}

fn stored_in_force<'a>(
    all: &'a Set,
    workflow_id: i64,
    wf: &'a WorkflowRef,
) -> impl Iterator<Item = &'a Stored> + 'a {
    let org = all.org_of.get(&workflow_id);
    let lead = all.iter().filter(move |s| {
        s.owner.is_none() && s.contract.org.is_none() && s.contract.in_scope(&wf.name, &wf.tag)
    });
    let of_org = all.iter().filter(move |s| {
        s.owner.is_none() && s.contract.org.is_some() && s.contract.org.as_ref() == org
    });
    let own = all.iter().filter(move |s| s.owner == Some(workflow_id));
    lead.chain(of_org).chain(own)
}

/// Every instance run within an organisation, and which.
fn orgs_of(c: &Connection) -> Result<HashMap<i64, String>> {
    let mut st = c.prepare("SELECT id, org FROM workflows WHERE org IS NOT NULL")?;
    let rows = st.query_map((), |r| Ok((r.get::<i64>(0)?, r.get::<String>(1)?)))?;
    Ok(rows.collect::<sql::Result<HashMap<_, _>>>()?)
}

/// Every contract row, parsed (a row that no longer parses is skipped and logged).
pub fn load(c: &Connection) -> Result<Vec<Stored>> {
    let mut st =
        c.prepare("SELECT id, owner_workflow_id, source, spec FROM contracts ORDER BY id")?;
    let rows = st.query_map((), |r| {
        Ok((
            r.get::<i64>(0)?,
            r.get::<Option<i64>>(1)?,
            r.get::<String>(2)?,
            r.get::<String>(3)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, owner, source, spec) = row?;
        let parsed = serde_json::from_str::<Value>(&spec)
            .map_err(|e| e.to_string())
            .and_then(|v| contracts::parse(&v).map(|c| (v, c)));
        match parsed {
            Ok((spec, contract)) => out.push(Stored {
                id,
                owner,
                source,
                spec,
                contract,
            }),
            Err(e) => tracing::error!(id, "a stored contract no longer parses; skipped: {e}"),
        }
    }
    Ok(out)
}

/// Inserts or replaces one contract (by owner and name) at `now` inside a store job.
pub fn put_tx(
    c: &Connection,
    owner: Option<i64>,
    source: &str,
    spec: &Value,
    name: &str,
    now: i64,
) -> Result<()> {
    c.execute(
        "DELETE FROM contracts WHERE COALESCE(owner_workflow_id, 0) = COALESCE(?1, 0) AND name = ?2",
        (owner, name),
    )?;
    c.execute(
        "INSERT INTO contracts (name, owner_workflow_id, spec, source, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        (name, owner, spec.to_string(), source, now),
    )?;
    Ok(())
}

/// One decision worth keeping: which contracts, about what, and how it ended.
#[derive(Debug, Clone, Default)]
pub struct Decision {
    pub workflow_id: i64,
    pub agent: String,
    pub event: String,
    pub detail: String,
    pub contracts: Vec<String>,
    pub outcome: String,
    pub approval_id: Option<i64>,
    pub decided_by: Option<String>,
    pub reason: Option<String>,
}

/// How much of what a decision was about is kept.
const DETAIL_CHARS: usize = 500;

impl Decision {
    /// One decision: `contracts` led to `outcome` about `detail` (kept in part).
    pub fn new(
        workflow_id: i64,
        agent: &str,
        event: &str,
        detail: &str,
        contracts: Vec<String>,
        outcome: &str,
    ) -> Self {
        Decision {
            workflow_id,
            agent: agent.to_owned(),
            event: event.to_owned(),
            detail: detail.chars().take(DETAIL_CHARS).collect(),
            contracts,
            outcome: outcome.to_owned(),
            ..Default::default()
        }
    }

    /// The decision a verdict stands for, with its outcome word.
    pub fn of(workflow_id: i64, agent: &str, event: &str, detail: &str, v: &Verdict) -> Self {
        let (outcome, contracts, reason) = if let Some((c, r, pause)) = &v.deny {
            (
                if *pause { "paused" } else { "denied" },
                vec![c.clone()],
                Some(r.clone()),
            )
        } else if let Some(c) = &v.allowed_by {
            ("allowed", vec![c.clone()], None)
        } else if let Some(a) = &v.approval {
            ("approval_requested", a.contracts.clone(), None)
        } else if !v.routes.is_empty() {
            (
                "routed",
                v.routes.iter().map(|r| r.0.clone()).collect(),
                None,
            )
        } else if !v.pause.is_empty() {
            (
                "paused",
                v.pause.iter().map(|p| p.0.clone()).collect(),
                Some(v.pause[0].1.clone()),
            )
        } else {
            (
                "notified",
                v.notify.iter().map(|n| n.0.clone()).collect(),
                None,
            )
        };
        Decision {
            reason,
            ..Decision::new(workflow_id, agent, event, detail, contracts, outcome)
        }
    }
}

/// Keeps decision `d`, taken at `now`.
pub fn record_tx(c: &Connection, d: &Decision, now: i64) -> Result<i64> {
    c.prepare_cached(
        "INSERT INTO contract_decisions (at, workflow_id, agent, event, detail, contracts, outcome, approval_id,
                                         decided_by, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) RETURNING id",
    )?
    .query_row(sql::params![
        now,
        d.workflow_id,
        d.agent,
        d.event,
        d.detail,
        serde_json::to_string(&d.contracts).unwrap_or_default(),
        d.outcome,
        d.approval_id,
        d.decided_by,
        d.reason
    ], |r| r.get(0))
    .map_err(Into::into)
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ContractView {
    pub name: String,
    /// What it does, in one sentence.
    pub says: String,
    /// `lead`, `yaml` (a workflow file, for its instance only), `steps` (a step
    /// workflow's steps), `proposal` (drafted by an agent, approved by the lead)
    /// or `built-in` (a guard).
    pub source: String,
    /// The instance a workflow's contract belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// The organisation it is bound to (in force in every instance run within it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub org: Option<String>,
    /// The contract as given (absent for built-in guards).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub spec: Option<Value>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DecisionView {
    pub at: String,
    pub workflow: String,
    pub agent: String,
    pub event: String,
    /// What it was about: the command, path, message or spend.
    pub detail: String,
    pub contracts: Vec<String>,
    /// allowed, denied, paused, routed, notified, approval_requested, approved,
    /// refused (by an approver), timed_out or lost.
    pub outcome: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ContractList {
    /// Oldest first: the order in which a deny is found first.
    pub contracts: Vec<ContractView>,
    /// The kernel's own guards, as the contracts they are.
    pub built_in: Vec<ContractView>,
    /// The latest decisions, newest first.
    pub decisions: Vec<DecisionView>,
}

/// The built-in guards (see `registry::guards`) in the same words.
fn guards(workflow: &str, b: &Budget) -> Vec<ContractView> {
    let mut out = vec![
        format!(
            "When an agent has started {} runs in the last hour, pause it until it is resumed.",
            b.max_runs_per_hour.unwrap_or(DEFAULT_RUNS_PER_HOUR)
        ),
        format!(
            "When agents have sent each other {} messages without one from you (the lead), pause the one about to \
             run until it is resumed.",
            b.max_hops.unwrap_or(DEFAULT_MAX_HOPS)
        ),
    ];
    if let Some(t) = b.max_tokens {
        out.push(format!(
            "When an agent has used more than {t} tokens, pause it until it is resumed."
        ));
    }
    if let Some(c) = b.max_cost_usd {
        out.push(format!(
            "When an agent has spent more than ${c}, pause it until it is resumed."
        ));
    }
    out.into_iter()
        .enumerate()
        .map(|(i, says)| ContractView {
            name: ["runs-per-hour", "hops", "tokens", "cost"][i.min(3)].into(),
            says: format!("{} (in {workflow})", says.trim_end_matches('.')) + ".",
            source: "built-in".into(),
            workflow: Some(workflow.to_owned()),
            org: None,
            spec: None,
        })
        .collect()
}

impl Contracts {
    pub fn new(store: Store, events: Events, clock: Clock) -> Self {
        Self {
            store,
            events,
            clock,
            in_force: RwLock::default(),
        }
    }

    /// Every contract, oldest first: what a decision reads (memory, never the store).
    pub fn all(&self) -> Arc<Set> {
        self.in_force.read().unwrap().clone()
    }

    /// Reads every contract into the set in force (at open and after each change).
    pub async fn reload(&self) -> Result<()> {
        let set = self
            .store
            .read(|c| {
                Ok(Set {
                    contracts: load(c)?,
                    org_of: orgs_of(c)?,
                })
            })
            .await?;
        *self.in_force.write().unwrap() = Arc::new(set);
        Ok(())
    }

    /// After a change to the contracts: reads them again, and tells the other
    /// kernels of the store to do the same.
    pub async fn changed(&self) -> Result<()> {
        self.reload().await?;
        self.events.publish(Event::ContractsChanged);
        Ok(())
    }

    /// contract_set: creates or replaces the lead's contract of this name (`c`,
    /// parsed from `spec`).
    pub async fn set(&self, c: Contract, spec: Value) -> Result<ContractView> {
        if matches!(c.when, contracts::When::Step { .. }) {
            return Err(Error::invalid(
                "contract.when.event: a step contract is made from a workflow's `steps:` (workflow_run); \
                 contract_set cannot set one",
            ));
        }
        let (name, spec2) = (c.name.clone(), spec.clone());
        let (count, now) = (self.all().len(), self.clock.now_ms());
        self.store
            .write(move |tx| {
                let exists: bool = tx.query_row(
                    "SELECT EXISTS (SELECT 1 FROM contracts WHERE owner_workflow_id IS NULL AND name = ?1)",
                    [&name],
                    |r| r.get(0),
                )?;
                if !exists && count >= contracts::MAX_CONTRACTS {
                    return Err(Error::invalid(format!(
                        "there are already {} contracts; delete one first",
                        contracts::MAX_CONTRACTS
                    )));
                }
                put_tx(tx, None, "lead", &spec2, &name, now)
            })
            .await?;
        self.changed().await?;
        Ok(ContractView {
            says: contracts::sentence(&c),
            source: "lead".into(),
            workflow: None,
            org: c.org.clone(),
            name: c.name,
            spec: Some(spec),
        })
    }

    /// An organisation was removed: the lead's contracts bound to it go with it.
    pub async fn delete_org(&self, org: &str) -> Result<usize> {
        let ids: Vec<i64> = self
            .all()
            .iter()
            .filter(|s| s.owner.is_none() && s.contract.org.as_deref() == Some(org))
            .map(|s| s.id)
            .collect();
        let n = ids.len();
        self.store
            .write(move |c| {
                for id in &ids {
                    c.execute("DELETE FROM contracts WHERE id = ?1", [id])?;
                }
                Ok(())
            })
            .await?;
        self.changed().await?;
        Ok(n)
    }

    /// contract_set with remove: deletes the lead's contract of this name.
    pub async fn delete(&self, name: &str) -> Result<()> {
        let n = name.to_owned();
        let removed = self
            .store
            .write(move |c| {
                let removed = c.execute(
                    "DELETE FROM contracts WHERE owner_workflow_id IS NULL AND name = ?1",
                    [&n],
                )?;
                // What its rate counted, unless an instance's contract has the name.
                c.execute(
                    "DELETE FROM contract_hits WHERE contract = ?1
                       AND NOT EXISTS (SELECT 1 FROM contracts WHERE name = ?1)",
                    [&n],
                )?;
                Ok(removed)
            })
            .await?;
        if removed == 0 {
            let names: Vec<String> = self
                .all()
                .iter()
                .filter(|s| s.owner.is_none())
                .map(|s| s.contract.name.clone())
                .collect();
            return Err(Error::not_found(format!(
                "no contract named {name:?} (contracts of a workflow file go with its instance); contracts: {}",
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            )));
        }
        self.changed().await
    }

    /// contract_list: the contracts (all, or those in force in one instance: its
    /// id and name), the built-in guards and the latest decisions.
    pub async fn list(
        &self,
        scope: Option<(i64, WorkflowRef)>,
        org: Option<String>,
    ) -> Result<ContractList> {
        let all = self.all();
        let id = scope.as_ref().map(|s| s.0);
        let (names, budgets, decisions) = self.store.read(move |c| listing(c, id)).await?;
        let shown: Vec<&Stored> = match (&scope, &org) {
            (_, Some(g)) => all
                .iter()
                .filter(|s| s.owner.is_none() && s.contract.org.as_ref() == Some(g))
                .collect(),
            (Some((id, wf)), None) => stored_in_force(&all, *id, wf).collect(),
            (None, None) => all.iter().collect(),
        };
        let contracts = shown
            .into_iter()
            .map(|s| ContractView {
                name: s.contract.name.clone(),
                says: contracts::sentence(&s.contract),
                source: s.source.clone(),
                workflow: s.owner.and_then(|o| names.get(&o)).map(|w| w.to_string()),
                org: s.contract.org.clone(),
                spec: Some(s.spec.clone()),
            })
            .collect();
        let built_in = budgets
            .iter()
            .flat_map(|(id, b)| {
                let w = names.get(id).map(|w| w.to_string()).unwrap_or_default();
                guards(&w, b)
            })
            .collect();
        let decisions = decisions
            .into_iter()
            .map(|mut d| {
                if let Ok(id) = d.workflow.parse::<i64>() {
                    d.workflow = names.get(&id).map(|w| w.to_string()).unwrap_or_default();
                }
                d
            })
            .collect();
        Ok(ContractList {
            contracts,
            built_in,
            decisions,
        })
    }
}

/// What contract_list reads: every instance's name by id, the budget of the
/// instance shown (the global one when none is), and the latest decisions.
type Listing = (
    HashMap<i64, WorkflowRef>,
    Vec<(i64, Budget)>,
    Vec<DecisionView>,
);

fn listing(c: &Connection, scope: Option<i64>) -> Result<Listing> {
    let mut names = std::collections::HashMap::new();
    let mut st = c.prepare("SELECT id, name, tag FROM workflows")?;
    for r in st.query_map((), |r| {
        Ok((
            r.get::<i64>(0)?,
            WorkflowRef {
                name: r.get(1)?,
                tag: r.get(2)?,
            },
        ))
    })? {
        let (id, wf) = r?;
        names.insert(id, wf);
    }
    let id = match scope {
        Some(id) => id,
        None => c.query_row(
            "SELECT id FROM workflows WHERE name = ?1 AND tag = ?2",
            (domain::names::GLOBAL_WORKFLOW, domain::names::DEFAULT_TAG),
            |r| r.get(0),
        )?,
    };
    let budget: String = c.query_row("SELECT budget FROM workflows WHERE id = ?1", [id], |r| {
        r.get(0)
    })?;
    let budgets = vec![(id, serde_json::from_str(&budget).unwrap_or_default())];
    let decisions = recent(c, scope)?;
    Ok((names, budgets, decisions))
}

/// The latest decisions (of one instance, or all), newest first; `workflow` holds
/// the instance id until the caller names it.
fn recent(c: &Connection, workflow_id: Option<i64>) -> Result<Vec<DecisionView>> {
    let mut st = c.prepare(
        "SELECT at, workflow_id, agent, event, detail, contracts, outcome, approval_id, decided_by, reason
         FROM contract_decisions WHERE (workflow_id = ?1 OR ?1 IS NULL) ORDER BY id DESC LIMIT ?2",
    )?;
    let rows = st.query_map((workflow_id, RECENT_DECISIONS), |r| {
        Ok(DecisionView {
            at: fmt_ms(r.get(0)?),
            workflow: r.get::<i64>(1)?.to_string(),
            agent: r.get(2)?,
            event: r.get(3)?,
            detail: r.get(4)?,
            contracts: serde_json::from_str(&r.get::<String>(5)?).unwrap_or_default(),
            outcome: r.get(6)?,
            approval_id: r.get(7)?,
            decided_by: r.get(8)?,
            reason: r.get(9)?,
        })
    })?;
    Ok(rows.collect::<sql::Result<_>>()?)
}
