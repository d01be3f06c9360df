//! The hooks room's writes and reads of `hooks` and `hook_deliveries`.

use super::HookView;
use domain::error::{Error, Result};
use domain::hooks::Action;
use store::Store;
use store::sql::{self, OptionalExtension};

/// A hook's row, as the room checks a request against it.
pub(super) struct Stored {
    pub name: String,
    pub secret: String,
    pub action: Action,
    pub rate: u32,
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stored")
            .field("name", &self.name)
            .field("secret", &"<set>")
            .finish_non_exhaustive()
    }
}

/// Deliveries a hook keeps on record; older ones go as new ones come.
const KEEP: i64 = 1_000;

/// Declares or replaces a hook: the lead's (`owner` None) takes any name; an
/// instance's replaces only its own (false when another holds the name).
pub(super) async fn upsert(
    store: &Store,
    (name, secret, action, rate): (String, String, &Action, u32),
    (owner, now): (Option<i64>, i64),
) -> Result<bool> {
    let action = serde_json::to_string(action)
        .map_err(|e| Error::internal(format!("a hook's action: {e}")))?;
    store
        .write(move |c| {
            Ok(c.execute(
                "INSERT INTO hooks (name, secret, action, rate, created_at, updated_at, owner)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)
                 ON CONFLICT (name) DO UPDATE SET secret = excluded.secret,
                   action = excluded.action, rate = excluded.rate, updated_at = excluded.updated_at,
                   owner = excluded.owner
                 WHERE CAST(?6 AS BIGINT) IS NULL OR hooks.owner = excluded.owner
                   OR hooks.owner IN (SELECT id FROM workflows WHERE state IN ('stopped', 'failed'))",
                sql::params![name, secret, action, i64::from(rate), now, owner],
            )? > 0)
        })
        .await
}

/// Who holds hook `name`, if it exists: None (the lead), or an instance's
/// reference and whether that instance still runs (not stopped or failed).
pub(super) async fn holder(
    store: &Store,
    name: String,
) -> Result<Option<Option<(i64, String, bool)>>> {
    store
        .read(move |c| {
            let row = c
                .query_row(
                    "SELECT h.owner, w.name || ':' || w.tag, w.state NOT IN ('stopped', 'failed')
                     FROM hooks h LEFT JOIN workflows w ON w.id = h.owner WHERE h.name = ?1",
                    [name],
                    |r| {
                        Ok((
                            r.get::<Option<i64>>(0)?,
                            r.get::<Option<String>>(1)?,
                            r.get::<Option<bool>>(2)?,
                        ))
                    },
                )
                .optional()?;
            Ok(row.map(|(owner, at, live)| {
                owner.map(|o| {
                    (
                        o,
                        format!("@{}", at.unwrap_or_default()),
                        live.unwrap_or(false),
                    )
                })
            }))
        })
        .await
}

/// Removes the hooks instance `owner` (or, None, any instance) declared while
/// it is still stopped or failed (a late event must not take a re-run's hooks):
/// their names.
pub(super) async fn delete_owned(store: &Store, owner: Option<i64>) -> Result<Vec<String>> {
    store
        .write(move |c| {
            let mut st = c.prepare_cached(
                "DELETE FROM hooks WHERE (CAST(?1 AS BIGINT) IS NULL OR owner = ?1)
                   AND owner IN (SELECT id FROM workflows WHERE state IN ('stopped', 'failed'))
                 RETURNING name",
            )?;
            let names = st.query_map([owner], |r| r.get::<String>(0))?;
            Ok(names.collect::<std::result::Result<Vec<_>, _>>()?)
        })
        .await
}

/// Removes the hooks instance `owner` holds whose names are not in `keep`
/// (its `hooks:` no longer declares them), in one write: their names.
pub(super) async fn delete_undeclared(
    store: &Store,
    owner: i64,
    keep: Vec<String>,
) -> Result<Vec<String>> {
    store
        .write(move |c| {
            let mut st = c.prepare_cached("SELECT name FROM hooks WHERE owner = ?1")?;
            let held = st.query_map([owner], |r| r.get::<String>(0))?;
            let held = held.collect::<std::result::Result<Vec<_>, _>>()?;
            let mut gone = Vec::new();
            for name in held.into_iter().filter(|n| !keep.contains(n)) {
                c.execute(
                    "DELETE FROM hooks WHERE owner = ?1 AND name = ?2",
                    sql::params![owner, name],
                )?;
                gone.push(name);
            }
            Ok(gone)
        })
        .await
}

pub(super) async fn delete(store: &Store, name: String) -> Result<bool> {
    store
        .write(move |c| Ok(c.execute("DELETE FROM hooks WHERE name = ?1", [name])? > 0))
        .await
}

pub(super) async fn find(store: &Store, name: String) -> Result<Option<Stored>> {
    store
        .read(move |c| {
            let row = c
                .query_row(
                    "SELECT name, secret, action, rate FROM hooks WHERE name = ?1",
                    [name],
                    |r| {
                        Ok((
                            r.get::<String>(0)?,
                            r.get::<String>(1)?,
                            r.get::<String>(2)?,
                            r.get::<i64>(3)?,
                        ))
                    },
                )
                .optional()?;
            row.map(|(name, secret, action, rate)| {
                Ok(Stored {
                    name,
                    secret,
                    action: parse_action(&action)?,
                    rate: u32::try_from(rate).unwrap_or(u32::MAX),
                })
            })
            .transpose()
        })
        .await
}

fn parse_action(text: &str) -> Result<Action> {
    serde_json::from_str(text).map_err(|e| Error::internal(format!("a hook's stored action: {e}")))
}

/// Every hook (or the one named), as the lead sees it.
pub(super) async fn list(store: &Store, only: Option<String>) -> Result<Vec<HookView>> {
    store
        .read(move |c| {
            let mut st = c.prepare_cached(
                "SELECT h.name, h.action, h.rate,
                   (SELECT count(*) FROM hook_deliveries d WHERE d.hook = h.name),
                   (SELECT d.outcome FROM hook_deliveries d WHERE d.hook = h.name
                      ORDER BY d.id DESC LIMIT 1)
                 FROM hooks h WHERE CAST(?1 AS TEXT) IS NULL OR h.name = ?1 ORDER BY h.name",
            )?;
            let rows = st.query_map([only], |r| {
                Ok((
                    r.get::<String>(0)?,
                    r.get::<String>(1)?,
                    r.get::<i64>(2)?,
                    r.get::<i64>(3)?,
                    r.get::<Option<String>>(4)?,
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (name, action, rate, deliveries, last) = row?;
                out.push(HookView {
                    name,
                    secret: "set".into(),
                    action: describe(&parse_action(&action)?),
                    rate: u32::try_from(rate).unwrap_or(u32::MAX),
                    deliveries,
                    last,
                });
            }
            Ok(out)
        })
        .await
}

/// An action in words, e.g. "start /x/review.yaml as pr-$.number with pr=$.number".
pub(super) fn describe(a: &Action) -> String {
    let with = |params: &std::collections::BTreeMap<String, domain::hooks::Param>| {
        if params.is_empty() {
            return String::new();
        }
        let each: Vec<String> = params
            .iter()
            .map(|(k, p)| format!("{k}={}", p.as_text()))
            .collect();
        format!(" with {}", each.join(", "))
    };
    match a {
        Action::Start {
            file, params, tag, ..
        } => {
            let tag = tag
                .as_ref()
                .map(|t| format!(" as {}", t.as_text()))
                .unwrap_or_default();
            format!("start {file}{tag}{}", with(params))
        }
        Action::Post {
            workflow,
            to,
            params,
        } => {
            let to = to.as_ref().map(|t| format!(" to @{t}")).unwrap_or_default();
            format!("post in {workflow}{to}{}", with(params))
        }
    }
}

/// Keeps a delivery as received by `node`, with its payload until it has acted;
/// false when its signature was taken before (a retry, or a replay under another
/// delivery id) or the sender's id is already kept. The hook's oldest past
/// [`KEEP`] go; the signatures stay.
pub(super) async fn keep(
    store: &Store,
    (hook, delivery, event): (&str, &str, Option<String>),
    (mac, now): (String, i64),
    (node, payload): (&str, &serde_json::Value),
) -> Result<bool> {
    let (hook, delivery) = (hook.to_owned(), delivery.to_owned());
    let (node, payload) = (node.to_owned(), payload.to_string());
    store
        .write(move |c| {
            let fresh = c.execute(
                "INSERT INTO hook_macs (mac, hook, received_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (mac) DO NOTHING",
                sql::params![mac, hook, now],
            )? > 0;
            if !fresh {
                return Ok(false);
            }
            let new = c.execute(
                "INSERT INTO hook_deliveries (hook, delivery, event, received_at, outcome, node, payload)
                 VALUES (?1, ?2, ?3, ?4, 'received', ?5, ?6) ON CONFLICT (hook, delivery) DO NOTHING",
                sql::params![hook, delivery, event, now, node, payload],
            )? > 0;
            if new {
                c.execute(
                    "DELETE FROM hook_deliveries WHERE hook = ?1 AND id < (SELECT id FROM
                       hook_deliveries WHERE hook = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
                    sql::params![hook, KEEP - 1],
                )?;
            }
            Ok(new)
        })
        .await
}

/// The delivery approval `id` holds: its hook, id and payload (None once it acted).
pub(super) async fn held(
    store: &Store,
    id: i64,
) -> Result<Option<(String, String, serde_json::Value)>> {
    let row: Option<(String, String, Option<String>)> = store
        .read(move |c| {
            Ok(c.query_row(
                "SELECT hook, delivery, payload FROM hook_deliveries WHERE approval_id = ?1
                   AND payload IS NOT NULL",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?)
        })
        .await?;
    Ok(row.and_then(|(h, d, p)| Some((h, d, serde_json::from_str(&p?).ok()?))))
}

/// Keeps a held delivery's payload and approval until the approval closes.
pub(super) async fn hold(
    store: &Store,
    (hook, delivery): (&str, &str),
    (approval, payload): (i64, &serde_json::Value),
) -> Result<()> {
    let (hook, delivery, payload) = (hook.to_owned(), delivery.to_owned(), payload.to_string());
    let outcome = format!("held for approval {approval}");
    store
        .write(move |c| {
            c.execute(
                "UPDATE hook_deliveries SET payload = ?3, approval_id = ?4, outcome = ?5
                 WHERE hook = ?1 AND delivery = ?2",
                sql::params![hook, delivery, payload, approval, outcome],
            )?;
            Ok(())
        })
        .await
}

pub(super) async fn outcome(
    store: &Store,
    (hook, delivery): (&str, &str),
    outcome: &str,
) -> Result<()> {
    let (hook, delivery, outcome) = (hook.to_owned(), delivery.to_owned(), outcome.to_owned());
    store
        .write(move |c| {
            c.execute(
                "UPDATE hook_deliveries SET outcome = ?3, payload = NULL
                 WHERE hook = ?1 AND delivery = ?2",
                sql::params![hook, delivery, outcome],
            )?;
            Ok(())
        })
        .await
}

/// A delivery as the dashboard and hook_set's list show it.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema, PartialEq)]
pub struct DeliveryView {
    pub hook: String,
    pub delivery: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    pub at: String,
    pub outcome: String,
}

/// The newest `limit` deliveries of every hook, newest first.
pub(super) async fn deliveries(store: &Store, limit: i64) -> Result<Vec<DeliveryView>> {
    store
        .read(move |c| {
            let mut st = c.prepare_cached(
                "SELECT hook, delivery, event, received_at, outcome FROM hook_deliveries
                 ORDER BY id DESC LIMIT ?1",
            )?;
            let rows = st.query_map([limit], |r| {
                Ok(DeliveryView {
                    hook: r.get(0)?,
                    delivery: r.get(1)?,
                    event: r.get(2)?,
                    at: domain::clock::fmt_ms(r.get(3)?),
                    outcome: r.get(4)?,
                })
            })?;
            Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
        })
        .await
}
