//! Hooks a workflow's `hooks:` declares belong to its instance: another
//! instance's `hooks:` may not take one over, nor the lead's (hook_set), and
//! they go when their instance is stopped or fails. (A completed instance keeps
//! them: a delivery posts into it and wakes its agent again.)

use super::{Hooks, NewHook, rows};
use crate::workflows::run::{Source, Started, instance_of};
use domain::error::{Error, Result};
use domain::hooks::Action;
use domain::names::WorkflowRef;
use serde_json::{Map, Value};

/// What a start is given besides its source and tag: the organisation it runs
/// in, and whether its params came from outside (a hook's payload).
pub type Starting<'a> = (Option<&'a str>, bool);

impl Hooks {
    /// Starts a workflow instance and declares its `hooks:`; refused before
    /// anything starts when one names a hook the lead or another running
    /// instance holds.
    pub async fn start(
        &self,
        (source, tag): (Source, Option<&str>),
        params: &Map<String, Value>,
        (org, outside): Starting<'_>,
    ) -> Result<Started> {
        if let Some((wref, names)) = declared(&source, tag).await {
            for name in &names {
                self.free(name, &wref).await?;
            }
        }
        let w = &self.workflows;
        let started = match outside {
            true => w.start_from_outside(source, tag, params).await?,
            false => w.workflow_start(source, tag, params, org).await?,
        };
        self.declare(&started).await?;
        Ok(started)
    }

    /// Declares the hooks a started workflow's `hooks:` names, each posting into
    /// its instance and held by it: their names.
    async fn declare(&self, started: &Started) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for h in &started.hooks {
            let hook = NewHook {
                name: h.name.clone(),
                secret: h.secret.clone(),
                action: Action::Post {
                    workflow: started.workflow.to_string(),
                    to: h.to.clone(),
                    params: h.params.clone(),
                },
                rate: h.rate,
            };
            let owner = Some((started.id, &started.workflow));
            names.push(self.set_owned(hook, owner).await?.name);
        }
        Ok(names)
    }

    /// Refused when hook `name` is held by the lead or by a running instance
    /// other than `wref`.
    async fn free(&self, name: &str, wref: &WorkflowRef) -> Result<()> {
        match rows::holder(&self.store, name.to_owned()).await? {
            None => Ok(()),
            Some(Some((_, at, live))) if !live || at == wref.to_string() => Ok(()),
            Some(_) => Err(self.taken(name, wref).await),
        }
    }

    /// Why instance `wref`'s `hooks:` may not declare `name`: who holds it, and
    /// what to do.
    pub(super) async fn taken(&self, name: &str, wref: &WorkflowRef) -> Error {
        let holder = rows::holder(&self.store, name.to_owned()).await;
        let fix = match holder {
            Ok(Some(Some((_, at, _)))) => format!(
                "{at} declared a hook named {name} and still runs: rename it in {wref}'s \
                 hooks:, or stop {at} first (workflow_stop)"
            ),
            _ => format!(
                "the lead's hook_set declared a hook named {name}: rename it in {wref}'s \
                 hooks:, or delete the lead's first (hook_set {{name: \"{name}\", delete: true}})"
            ),
        };
        Error::conflict(format!("hooks.{name}: {fix}. Nothing was started."))
    }

    /// Instance `workflow_id` was stopped or failed: the hooks it declared go.
    pub(super) async fn instance_ended(&self, workflow_id: i64) -> Result<()> {
        for name in rows::delete_owned(&self.store, workflow_id).await? {
            tracing::info!(hook = name, workflow_id, "an ended instance's hook removed");
            self.forget_rate(&name);
        }
        Ok(())
    }
}

/// The instance a start would make and the hooks its `hooks:` names; None when
/// the source does not parse (the start says why).
async fn declared(source: &Source, tag: Option<&str>) -> Option<(WorkflowRef, Vec<String>)> {
    let source = match source {
        Source::File(p) => Source::File(p.clone()),
        Source::Text(t) => Source::Text(t.clone()),
    };
    let wf = tokio::task::spawn_blocking(move || match source {
        Source::File(p) => domain::workflow_yaml::load(&std::path::absolute(p).ok()?).ok(),
        Source::Text(t) => domain::workflow_yaml::parse(&t, None, std::path::Path::new("/")).ok(),
    })
    .await
    .ok()??;
    let wref = instance_of(&wf, tag).ok()?;
    Some((wref, wf.hooks.iter().map(|h| h.name.clone()).collect()))
}
