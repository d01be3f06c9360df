//! A step workflow as it starts: its steps checked against the values their
//! prompts will be filled in with, then written in the transaction that
//! registers the instance (its steps as its contracts, every step waiting).

use super::rows;
use domain::error::{Error, Result};
use domain::steps::{self, On, StepDef};
use domain::workflow_yaml::{self, Vars, Workflow};

/// A step workflow's steps (prompts as written: each is filled in when its step
/// runs), the text they start from and the values their prompts are filled in
/// with (empty for a workflow whose agents route by mentions).
#[derive(Clone, Default)]
pub(in crate::workflows) struct Flow {
    steps: Vec<StepDef>,
    trigger: String,
    vars: serde_json::Value,
}

impl Flow {
    /// The steps, checked now against the values they will be filled in with: a
    /// name that cannot resolve, or a prompt left empty, refuses the start.
    pub(in crate::workflows) fn of(wf: &Workflow, vars: &Vars) -> Result<Flow> {
        let trigger = wf
            .trigger
            .as_deref()
            .map(|t| workflow_yaml::interpolate(t, vars))
            .transpose()
            .map_err(|e| Error::invalid(format!("trigger: {e}. Nothing was started.")))?
            .unwrap_or_default();
        for s in &wf.steps {
            let filled =
                workflow_yaml::interpolate_except(&s.prompt, vars, domain::steps::is_step_name)
                    .map_err(|e| {
                        Error::invalid(format!("steps.{}.prompt: {e}. Nothing was started.", s.id))
                    })?;
            if filled.trim().is_empty() {
                return Err(Error::invalid(format!(
                    "steps.{}.prompt is empty once the params are filled in; give the param a value. Nothing \
                 was started.",
                    s.id
                )));
            }
        }
        Ok(Flow {
            steps: wf.steps.clone(),
            trigger,
            vars: vars.to_json(),
        })
    }

    /// In the transaction that (re)starts an instance at `now`: its steps as its
    /// contracts (source `steps`, after its YAML's) and every step waiting.
    pub(in crate::workflows) fn register_tx(
        &self,
        c: &store::sql::Connection,
        wid: i64,
        now: i64,
    ) -> Result<()> {
        let (defs, trigger, vars) = (&self.steps, &self.trigger, &self.vars);
        for (i, d) in defs.iter().enumerate() {
            let name = steps::contract_name(&d.id);
            let spec = serde_json::json!({
                "name": name,
                "description": format!("step {} of {} of the workflow", i + 1, defs.len()),
                "when": {"event": "step", "on": d.on.iter().map(On::to_json).collect::<Vec<_>>()},
                "then": {"action": "run", "step": d.id, "agent": d.agent, "prompt": d.prompt,
                         "result": d.result.as_ref().map(|r| r.as_json())},
            });
            // A step whose contract would not read back would vanish from its graph.
            domain::contracts::parse(&spec)
                .map_err(|e| Error::invalid(format!("steps.{}: {e}", d.id)))?;
            crate::governance::contracts::put_tx(c, Some(wid), "steps", &spec, &name, now)?;
        }
        rows::reset(c, wid, defs, trigger, vars)
    }
}
