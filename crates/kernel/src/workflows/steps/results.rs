//! Steps that ask for a result: the ask recorded with the step's prompt, and the
//! step done only with its result, whose result events are seen with it.

use super::rows;
use crate::messaging;
use domain::error::Result;
use domain::states::StepState;
use domain::steps::StepDef;

/// Posts a step's prompt to its agent; a step that asks for a result records the
/// ask with it (the agent's inbox shows the schema; result_submit answers it).
pub(super) fn post_prompt(
    c: &store::sql::Connection,
    (wid, wref): (i64, &domain::names::WorkflowRef),
    def: &StepDef,
    text: &str,
    now: i64,
) -> Result<messaging::Posted> {
    let to = std::slice::from_ref(&def.agent);
    let posted = messaging::post_system_to(c, wid, wref, to, text, now)?;
    if let Some(schema) = &def.result {
        let at = (wid, posted.result.id.as_str());
        messaging::results::expect_tx(c, at, &def.agent, Some(&def.id), schema, now)?;
    }
    Ok(posted)
}

/// Step `i`, whose run succeeded, is done; if it asks for a result, only with
/// one (else it failed, saying so), and the result events that result meets
/// are seen in the same transaction (so a graph read sees both or neither).
pub(super) fn done_with_result(
    c: &store::sql::Connection,
    wid: i64,
    (defs, i): (&[StepDef], usize),
    row: &rows::Row,
    now: i64,
) -> Result<()> {
    let def = &defs[i];
    if def.result.is_none() {
        rows::done(c, wid, row, now)?;
        return Ok(());
    }
    let result = match &row.message_id {
        Some(m) => messaging::results::result_tx(c, wid, m)?,
        None => None,
    };
    let Some(result) = result else {
        let why = "its run ended without submitting the result it was asked for (result_submit)";
        rows::change(
            c,
            (wid, &def.id),
            StepState::Running,
            StepState::Failed,
            Some(why),
            now,
        )?;
        return Ok(());
    };
    if !rows::done(c, wid, row, now)? {
        return Ok(());
    }
    for d in defs {
        for (k, e) in d.on.iter().enumerate() {
            if e.step() == Some(def.id.as_str()) && e.result_matches(&result) {
                rows::see(c, wid, &d.id, k)?;
            }
        }
    }
    Ok(())
}
