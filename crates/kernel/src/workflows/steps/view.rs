//! A step workflow's graph as workflow_status shows it: each step, what it waits
//! for in words, and where it is.

use super::{Steps, aligned, rows};
use domain::clock::fmt_ms;
use domain::error::Result;
use domain::states::StepState;
use domain::steps::on_words;
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StepView {
    pub id: String,
    pub agent: String,
    /// What it waits for, e.g. "step review completes".
    pub on: String,
    /// waiting, running, done, failed or skipped.
    pub state: StepState,
    /// Why it failed or was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The run that did it (agent_info and the runs resource show it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// The result its agent submitted, when the step asks for one (`result:`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
}

impl Steps {
    /// The instance's steps in order (empty when it routes by mentions).
    pub async fn view(&self, wid: i64) -> Result<Vec<StepView>> {
        let defs = self.graph(wid);
        if defs.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self
            .store
            .read(move |c| {
                let rows = rows::rows(c, wid)?;
                let mut results = Vec::new();
                for r in &rows {
                    let got = match &r.message_id {
                        Some(m) => crate::messaging::results::result_tx(c, wid, m)?,
                        None => None,
                    };
                    results.push(got);
                }
                Ok(rows.into_iter().zip(results).collect::<Vec<_>>())
            })
            .await?;
        let (rows, results): (Vec<rows::Row>, Vec<Option<serde_json::Value>>) =
            rows.into_iter().unzip();
        let (states, _) = aligned(&defs, &rows);
        Ok(defs
            .iter()
            .zip(states)
            .map(|(d, state)| {
                let at = rows.iter().position(|r| r.step == d.id);
                let row = at.map(|j| &rows[j]);
                StepView {
                    id: d.id.clone(),
                    agent: d.agent.clone(),
                    on: on_words(&d.on),
                    state,
                    reason: row.and_then(|r| r.reason.clone()),
                    run_id: row.and_then(|r| r.run_id.clone()),
                    started_at: row.and_then(|r| r.started_at).map(fmt_ms),
                    ended_at: row.and_then(|r| r.ended_at).map(fmt_ms),
                    result: at.and_then(|j| results[j].clone()),
                }
            })
            .collect())
    }
}
