//! Results with a shape: the schema an ask or a step's prompt gave its agent (a
//! `results` row per message that asks for one, written in the transaction that
//! posts it), and the result the agent submits (`result_submit`), checked against
//! that schema and kept once it fits. The asker reads it back by the message id:
//! agent_ask's answer, a step's outcome.
//!
//! A result is final: once one fits, the ask is answered and another submission
//! for it is refused. An agent's inbox shows the schema with the message that
//! asks for it, so the worker can tell the model what to submit.

use super::{Messaging, Outgoing, SendResult, governed, post};
use crate::Scope;
use domain::error::{Error, Result};
use domain::result_schema::{self, ResultSchema};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use store::sql::{self, Connection, OptionalExtension};
use store::{Isolation, WriteScope::Instance as instance};

/// The most a result may take as JSON.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// What result_submit answers: which ask the result answers, and the result kept.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Submitted {
    /// The message that asked for it (the ask, or the step's prompt).
    pub ask: String,
    /// The step it ends, when a step asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The result as kept: it fits the schema.
    pub result: Value,
}

/// One ask for a result, as its row holds it.
struct Asked {
    message_id: String,
    step: Option<String>,
    schema: String,
    result: Option<String>,
}

/// Records that message `message_id` asks `agent` for a result fitting `schema`
/// (in the transaction that posts the message).
pub(crate) fn expect_tx(
    c: &Connection,
    (wid, message_id): (i64, &str),
    agent: &str,
    step: Option<&str>,
    schema: &ResultSchema,
    now: i64,
) -> Result<()> {
    c.prepare_cached(
        "INSERT INTO results (workflow_id, message_id, agent, step, schema, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute((
        wid,
        message_id,
        agent,
        step,
        schema.as_json().to_string(),
        now,
    ))?;
    Ok(())
}

/// Message `message_id` no longer asks for a result (a step's prompt withdrawn or
/// posted again): its ask, if unanswered, goes, so it awaits nothing.
pub(crate) fn close_tx(c: &Connection, wid: i64, message_id: &str) -> Result<()> {
    c.prepare_cached(
        "DELETE FROM results WHERE workflow_id = ?1 AND message_id = ?2 AND result IS NULL",
    )?
    .execute((wid, message_id))?;
    Ok(())
}

/// Agent `agent` of instance `wid` deleted (in the transaction that deletes it):
/// the asks still awaiting its result go with it, so a later agent of the name
/// cannot submit one for them; the results it submitted stay for their askers.
pub(crate) fn forget_agent_tx(c: &Connection, wid: i64, agent: &str) -> Result<()> {
    c.prepare_cached(
        "DELETE FROM results WHERE workflow_id = ?1 AND agent = ?2 AND result IS NULL",
    )?
    .execute((wid, agent))?;
    Ok(())
}

/// The schemas still awaiting a result from `agent`, by the message that asks, as
/// a query sent now (read with [`open_schemas_of`]).
pub(crate) fn open_schemas_ahead(c: &Connection, wid: i64, agent: &str) -> Result<sql::Later> {
    Ok(c.prepare_cached(
        "SELECT message_id, schema FROM results
              WHERE workflow_id = ?1 AND agent = ?2 AND result IS NULL ORDER BY message_id",
    )?
    .query_later((wid, agent))?)
}

/// The open asks' schemas from [`open_schemas_ahead`]'s rows.
pub(crate) fn open_schemas_of(mut rows: sql::Rows<'_>) -> Result<Vec<(String, Value)>> {
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let (id, schema): (String, String) = (r.get(0)?, r.get(1)?);
        if let Ok(schema) = serde_json::from_str(&schema) {
            out.push((id, schema));
        }
    }
    Ok(out)
}

/// The result kept for the ask `message_id`, if one was submitted.
pub(crate) fn result_tx(c: &Connection, wid: i64, message_id: &str) -> Result<Option<Value>> {
    let text: Option<String> = c
        .prepare_cached("SELECT result FROM results WHERE workflow_id = ?1 AND message_id = ?2")?
        .query_row((wid, message_id), |r| r.get(0))
        .optional()?
        .flatten();
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
}

impl Messaging {
    /// channel_send for an ask: the message, and with `expect` (the asked agent and
    /// a schema) the row that asks it for a result, in one transaction.
    pub async fn ask_send(
        &self,
        scope: &Scope,
        send: Outgoing,
        expect: Option<(String, ResultSchema)>,
    ) -> Result<SendResult> {
        let Some((agent, schema)) = expect else {
            return self.channel_send(scope, send).await;
        };
        let s = scope.clone();
        let now = self.clock.now_ms();
        let rules = governed::Rules::of(&self.contracts, scope, now);
        let mut posted = self
            .store
            .write(move |c| {
                let posted = match governed::post_all(c, &s, &[send], &rules, post)? {
                    Ok(p) => p,
                    Err(e) => return Ok(Err(e)),
                };
                expect_tx(
                    c,
                    (s.workflow_id, &posted[0].result.id),
                    &agent,
                    None,
                    &schema,
                    now,
                )?;
                Ok(Ok(posted))
            })
            .await??;
        let p = posted.remove(0);
        self.announce(scope.workflow_id, &p);
        Ok(p.result)
    }

    /// The result kept for the ask `message_id` of instance `wid`, if any.
    pub async fn result_of(&self, wid: i64, message_id: &str) -> Result<Option<Value>> {
        let id = message_id.to_owned();
        self.store.read(move |c| result_tx(c, wid, &id)).await
    }

    /// result_submit: checks `result` against the schema of what was asked of the
    /// caller (the ask `ask`, the step `step`, or the one ask awaiting a result)
    /// and keeps it; a misfit is refused naming each field to fix.
    pub async fn result_submit(
        &self,
        scope: &Scope,
        result: Value,
        ask: Option<String>,
        step: Option<String>,
    ) -> Result<Submitted> {
        let bytes = result.to_string().len();
        if bytes > MAX_RESULT_BYTES {
            return Err(Error::invalid(format!(
                "result: {bytes} bytes; at most {MAX_RESULT_BYTES}: put long material in a document \
                 (team_doc_write) and its path in the result"
            )));
        }
        let (s, now) = (scope.clone(), self.clock.now_ms());
        // The instance's asks and their results.
        self.store
            .write_as(instance(scope.workflow_id), Isolation::Savepoint, move |c| {
                let asked = which(c, &s, ask.as_deref(), step.as_deref())?;
                if asked.result.is_some() {
                    return Err(Error::conflict(format!(
                        "{} already has its result; a result is final",
                        words(&asked)
                    )));
                }
                let schema: Value = serde_json::from_str(&asked.schema)
                    .map_err(|e| Error::internal(format!("a stored schema: {e}")))?;
                let schema = ResultSchema::parse(&schema)
                    .map_err(|e| Error::internal(format!("a stored schema: {e}")))?;
                if let Err(misfits) = schema.check(&result) {
                    return Err(Error::invalid(format!(
                        "the result does not fit the schema of {}: {}. Fix {} and call result_submit \
                         again. The schema: {}",
                        words(&asked),
                        result_schema::describe(&misfits),
                        if misfits.len() == 1 { "it" } else { "them" },
                        schema.as_json()
                    )));
                }
                c.prepare_cached(
                    "UPDATE results SET result = ?3, run_id = ?4, submitted_at = ?5
                      WHERE workflow_id = ?1 AND message_id = ?2 AND result IS NULL",
                )?
                .execute((
                    s.workflow_id,
                    &asked.message_id,
                    result.to_string(),
                    s.run_id.as_deref(),
                    now,
                ))?;
                Ok(Submitted {
                    ask: asked.message_id,
                    step: asked.step,
                    result,
                })
            })
            .await
    }
}

fn words(a: &Asked) -> String {
    match &a.step {
        Some(s) => format!("step {s} (message {})", a.message_id),
        None => format!("the ask {}", a.message_id),
    }
}

fn row(r: &store::sql::Row<'_>) -> store::sql::Result<Asked> {
    Ok(Asked {
        message_id: r.get(0)?,
        step: r.get(1)?,
        schema: r.get(2)?,
        result: r.get(3)?,
    })
}

/// The ask a submission answers: the one named, else the one awaiting a result.
fn which(c: &Connection, s: &Scope, ask: Option<&str>, step: Option<&str>) -> Result<Asked> {
    const COLS: &str = "SELECT message_id, step, schema, result FROM results";
    let named = match (ask.map(str::trim), step.map(str::trim)) {
        (Some(a), _) => c
            .prepare_cached(&format!(
                "{COLS} WHERE workflow_id = ?1 AND agent = ?2 AND message_id = ?3"
            ))?
            .query_row((s.workflow_id, &s.me, a), row)
            .optional()?
            .ok_or_else(|| format!("ask {a:?}")),
        (None, Some(st)) => c
            .prepare_cached(&format!(
                "{COLS} WHERE workflow_id = ?1 AND agent = ?2 AND step = ?3 ORDER BY message_id DESC LIMIT 1"
            ))?
            .query_row((s.workflow_id, &s.me, st), row)
            .optional()?
            .ok_or_else(|| format!("step {st:?}")),
        (None, None) => {
            let mut st = c.prepare_cached(&format!(
                "{COLS} WHERE workflow_id = ?1 AND agent = ?2 AND result IS NULL ORDER BY message_id"
            ))?;
            let open = st
                .query_map((s.workflow_id, &s.me), row)?
                .collect::<store::sql::Result<Vec<_>>>()?;
            return match <[Asked; 1]>::try_from(open) {
                Ok([one]) => Ok(one),
                Err(open) if open.is_empty() => Err(Error::invalid(format!(
                    "nothing asked of {} awaits a result: result_submit answers an ask or a step that \
                     gave a result schema; answer others with channel_send",
                    s.me
                ))),
                Err(open) => {
                    let ids: Vec<String> = open.iter().map(words).collect();
                    Err(Error::invalid(format!(
                        "several asks await a result from you ({}): name one with `ask` (its message id)",
                        ids.join(", ")
                    )))
                }
            };
        }
    };
    named.map_err(|what| {
        Error::not_found(format!(
            "no {what} of yours asked for a result; result_submit answers an ask or a step that gave \
             a result schema (leave out `ask` and `step` to answer the one awaiting a result)"
        ))
    })
}
