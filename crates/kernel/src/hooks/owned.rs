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
use std::collections::HashMap;
use std::sync::Mutex;

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
        let mut claim = Claim::new(&self.claims);
        if let Some((wref, names)) = declared(&source, tag).await {
            for name in &names {
                self.free(name, &wref).await?;
                claim.take(name, &wref)?;
            }
        }
        let w = &self.workflows;
        let started = match outside {
            true => w.start_from_outside(source, tag, params).await?,
            false => w.workflow_start(source, tag, params, org).await?,
        };
        if let Err(e) = self.declare(&started).await {
            // Another node took a name meanwhile: the instance does not run
            // without its hooks.
            let why = format!("its hooks: were not declared: {e}");
            self.workflows.workflow_fail(started.id, &why).await?;
            return Err(e);
        }
        Ok(started)
    }

    /// Declares the hooks a started workflow's `hooks:` names, each posting into
    /// its instance and held by it, and removes those it held before that its
    /// `hooks:` no longer names: their names.
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
        for gone in rows::delete_undeclared(&self.store, started.id, names.clone()).await? {
            tracing::info!(
                hook = gone,
                "a hook its instance no longer declares removed"
            );
            self.forget_rate(&gone);
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

    /// Instance `workflow_id` (or, None, any instance: events were missed) was
    /// stopped or failed: the hooks it declared go, if it still is.
    pub(super) async fn instance_ended(&self, workflow_id: Option<i64>) -> Result<()> {
        for name in rows::delete_owned(&self.store, workflow_id).await? {
            tracing::info!(
                hook = name,
                ?workflow_id,
                "an ended instance's hook removed"
            );
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

/// The hook names starts are declaring, and the instance each is for: a start
/// that names one another start is declaring is refused before it starts (the
/// hooks' rows are written only once the first has started).
pub(super) type Claims = Mutex<HashMap<String, String>>;

/// The names one start claimed, released when it ends however it ends.
struct Claim<'a> {
    claims: &'a Claims,
    names: Vec<String>,
}

impl<'a> Claim<'a> {
    fn new(claims: &'a Claims) -> Self {
        Self {
            claims,
            names: Vec::new(),
        }
    }

    /// Claims `name` for instance `wref`; refused when another start is
    /// declaring it for another instance.
    fn take(&mut self, name: &str, wref: &WorkflowRef) -> Result<()> {
        let key = name.to_ascii_lowercase();
        let mut all = self.claims.lock().expect("hook claims");
        match all.get(&key) {
            Some(at) if *at != wref.to_string() => Err(Error::conflict(format!(
                "hooks.{name}: {at} is starting and declares a hook named {name}: rename it in \
                 {wref}'s hooks:, or stop {at} first (workflow_stop). Nothing was started."
            ))),
            Some(_) => Ok(()),
            None => {
                all.insert(key.clone(), wref.to_string());
                self.names.push(key);
                Ok(())
            }
        }
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut all = self.claims.lock().expect("hook claims");
        for n in &self.names {
            all.remove(n);
        }
    }
}
