//! Hooks: events from outside that start or feed a team. A room above the
//! workflows (it starts them and posts to channels) that owns its tables, `hooks`
//! and `hook_deliveries`.
//!
//! - The lead declares a hook (hook_set): its name (the URL's last part), its
//!   secret, and what a delivery does ([`Action`]). The secret is kept for
//!   checking signatures and never leaves: views say only that one is set.
//! - [`Hooks::receive`] takes a request's body and headers and either refuses it
//!   (a [`Refusal`], which the HTTP layer answers the same way whatever it is, so
//!   that a sender learns nothing, not even whether the hook exists) or keeps the
//!   delivery and is answered, its action set off in a task of its own whose
//!   outcome lands on the delivery. A hook is ingress only: what it answers
//!   carries nothing of the team.
//! - A delivery is kept under the sender's delivery id before it acts: the same id
//!   again (a sender's retry) finds it and does nothing more.
//! - A hook's deliveries act one at a time, in the order kept; at most
//!   [`ACTING`] act at once across the kernel.
//! - Each hook takes at most its `rate` signed requests a minute (a bucket
//!   refilled evenly). Requests that fail (unsigned, a bad signature, no such
//!   hook) draw on one bucket shared by every name, so a stranger can neither
//!   spend a hook's rate nor tell a hook that exists by it; past that bucket,
//!   requests are refused before their signature is checked.

mod governed;
mod owned;
mod recovered;
mod rows;
#[cfg(test)]
mod tests;

use crate::Caller;
use crate::events::Events;
use crate::governance::contracts::Contracts;
use crate::messaging::{Messaging, Outgoing};
use crate::registry::Registry;
use crate::runtime::Runtime;
use crate::timing::Clock;
use crate::workflows::{Workflows, run::Source};
use domain::error::{Error, Result};
use domain::hooks::{self as spec, Action, Refusal, Signed};
use domain::names::WorkflowRef;
pub use owned::Starting;
pub use rows::DeliveryView;
use rows::Stored;
use schemars::JsonSchema;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use store::Store;

/// A hook as the lead sees it: never its secret.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct HookView {
    pub name: String,
    /// Always "set": the secret is never shown.
    pub secret: String,
    /// What a delivery does, e.g. "start examples/review.yaml as pr-$.number with
    /// pr=$.pull_request.number".
    pub action: String,
    /// Requests a minute it takes.
    pub rate: u32,
    /// Deliveries it has kept, and the newest's outcome.
    pub deliveries: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last: Option<String>,
}

/// A hook as hook_set gives it.
#[derive(Clone)]
pub struct NewHook {
    pub name: String,
    pub secret: String,
    pub action: Action,
    pub rate: Option<u32>,
}

/// What a request carried, as [`Hooks::receive`] reads it.
pub struct Request<'a> {
    pub name: &'a str,
    pub headers: Signed<'a>,
    /// Shared without a copy with the task that checks it.
    pub body: Arc<[u8]>,
}

/// A request taken: a new delivery (kept, and being acted on in a task of its
/// own, whose outcome lands on the delivery), or a retry of one already kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    New { delivery: String },
    Retry { delivery: String },
}

/// Each hook's bucket: `rate` requests a minute, refilled evenly, at most `rate`
/// at once. (Only hooks that exist have one.)
#[derive(Default)]
struct Counts {
    buckets: HashMap<String, (f64, i64)>,
}

/// The hooks room.
pub struct Hooks {
    store: Store,
    events: Events,
    clock: Clock,
    contracts: Arc<Contracts>,
    registry: Arc<Registry>,
    messaging: Arc<Messaging>,
    /// Arms the timers of the approvals that hold deliveries.
    runtime: Arc<Runtime>,
    workflows: Arc<Workflows>,
    counts: Mutex<Counts>,
    /// What a request to a hook that does not exist is checked against, so that
    /// it costs what a real one does.
    decoy: [u8; 32],
    /// When this kernel's life began: what this node left received before it was
    /// its previous life's.
    started: i64,
    /// The names starts in progress are declaring.
    claims: owned::Claims,
    /// Each hook's queue of deliveries to act on, in the order kept.
    queues: Mutex<HashMap<String, tokio::sync::mpsc::UnboundedSender<Job>>>,
    /// Deliveries acting at once across the kernel: at most [`ACTING`].
    acting: Arc<tokio::sync::Semaphore>,
}

/// A delivery's action, queued behind its hook's earlier ones.
type Job = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// The most deliveries acting at once across the kernel.
const ACTING: usize = 16;

impl Hooks {
    pub fn new(
        (store, events, clock): (Store, Events, Clock),
        (contracts, runtime): (Arc<Contracts>, Arc<Runtime>),
        (registry, messaging, workflows): (Arc<Registry>, Arc<Messaging>, Arc<Workflows>),
    ) -> Self {
        Self {
            store,
            events,
            clock: clock.clone(),
            contracts,
            runtime,
            registry,
            messaging,
            workflows,
            counts: Mutex::default(),
            decoy: rand::random(),
            started: clock.now_ms(),
            claims: owned::Claims::default(),
            queues: Mutex::default(),
            acting: Arc::new(tokio::sync::Semaphore::new(ACTING)),
        }
    }

    /// Declares (or replaces) a hook as the lead's: any name, even one an
    /// instance's `hooks:` declared (it is the lead's from then on).
    pub async fn hook_set(&self, h: NewHook) -> Result<HookView> {
        self.set_owned(h, None).await
    }

    /// Declares (or replaces) a hook held by `owner` (an instance's id and
    /// reference), or by the lead.
    async fn set_owned(&self, h: NewHook, owner: Option<(i64, &WorkflowRef)>) -> Result<HookView> {
        spec::check_name(&h.name)?;
        let (min, max) = spec::SECRET_CHARS;
        let n = h.secret.chars().count();
        if n < min || n > max {
            return Err(Error::invalid(format!(
                "secret: {min} to {max} characters (given {n}); make one with `openssl rand -hex 32`"
            )));
        }
        let rate = h.rate.unwrap_or(spec::DEFAULT_RATE);
        if rate == 0 || rate > spec::MAX_RATE {
            return Err(Error::invalid(format!(
                "rate: requests a minute, 1 to {}",
                spec::MAX_RATE
            )));
        }
        let action = self.checked(h.action).await?;
        let now = self.clock.now_ms();
        let name = h.name.clone();
        let held = (owner.map(|(id, _)| id), now);
        if !rows::upsert(&self.store, (h.name, h.secret, &action, rate), held).await? {
            return Err(match owner {
                Some((_, at)) => self.taken(&name, at).await,
                None => Error::internal("the lead's hook was not set"),
            });
        }
        self.forget_rate(&name);
        self.view(&name)
            .await?
            .ok_or_else(|| Error::internal("the hook just set is gone"))
    }

    /// A start's file as an absolute path that holds a workflow; a post's instance
    /// as one that exists.
    async fn checked(&self, action: Action) -> Result<Action> {
        match action {
            Action::Start {
                file, params, tag, ..
            } => {
                let path = std::path::absolute(&file)
                    .map_err(|e| Error::invalid(format!("file {file:?}: {e}")))?;
                let p = path.clone();
                let sha256 = tokio::task::spawn_blocking(move || {
                    domain::workflow_yaml::load(&p).map_err(|e| e.to_string())?;
                    file_sha256(&p)
                })
                .await
                .map_err(|e| Error::internal(format!("reading the workflow failed: {e}")))?
                .map_err(|e| Error::invalid(format!("file: {e}")))?;
                Ok(Action::Start {
                    file: path.to_string_lossy().into_owned(),
                    params,
                    tag,
                    sha256: Some(sha256),
                })
            }
            Action::Post {
                workflow,
                to,
                params,
            } => {
                let scope = self.registry.scope(&Caller::Lead, Some(&workflow)).await?;
                Ok(Action::Post {
                    workflow: scope.workflow.to_string(),
                    to,
                    params,
                })
            }
        }
    }

    /// Removes a hook (its deliveries stay on record); false if there was none.
    pub async fn hook_delete(&self, name: &str) -> Result<bool> {
        let gone = rows::delete(&self.store, name.to_owned()).await?;
        self.forget_rate(name);
        Ok(gone)
    }

    /// A hook set again or gone starts with a full bucket.
    fn forget_rate(&self, name: &str) {
        self.counts
            .lock()
            .expect("hook counts")
            .buckets
            .remove(&name.to_ascii_lowercase());
    }

    /// Every hook, by name.
    pub async fn hook_list(&self) -> Result<Vec<HookView>> {
        rows::list(&self.store, None).await
    }

    /// The newest `limit` deliveries of every hook, newest first.
    pub async fn deliveries(&self, limit: i64) -> Result<Vec<DeliveryView>> {
        rows::deliveries(&self.store, limit).await
    }

    async fn view(&self, name: &str) -> Result<Option<HookView>> {
        Ok(rows::list(&self.store, Some(name.to_owned()))
            .await?
            .into_iter()
            .next())
    }

    /// Whether the bucket `key` is past `rate` a minute; if not and `spend`, this
    /// request is taken from it.
    fn over_rate(&self, key: &str, rate: u32, spend: bool) -> bool {
        let (now, rate) = (self.clock.now_ms(), f64::from(rate));
        let mut c = self.counts.lock().expect("hook counts");
        let (tokens, at) = c
            .buckets
            .entry(key.to_ascii_lowercase())
            .or_insert((rate, now));
        let refilled = (now - *at).max(0) as f64 * rate / 60_000.0;
        *tokens = (*tokens + refilled).min(rate);
        *at = now;
        if *tokens < 1.0 {
            return true;
        }
        if spend {
            *tokens -= 1.0;
        }
        false
    }

    /// Checks a request and, when it is signed and new, keeps it and sets off
    /// what it does: answered once the delivery is kept, not when it has acted
    /// (a start may take long; a sender times out in seconds).
    pub async fn receive(
        self: &Arc<Self>,
        req: Request<'_>,
    ) -> std::result::Result<Taken, Refusal> {
        let stored = rows::find(&self.store, req.name.to_owned())
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "a hook's row could not be read");
                Refusal::Unknown
            })?;
        // Requests that fail draw on one bucket, whatever name they give: past
        // it, none is checked (and a hook's own rate is spent only when signed).
        if self.over_rate(FAILED, FAILED_RATE, false) {
            return Err(Refusal::Rate);
        }
        let now_secs = self.clock.now_ms().div_euclid(1000);
        let secret: Vec<u8> = match &stored {
            Some(s) => s.secret.as_bytes().to_vec(),
            None => self.decoy.to_vec(),
        };
        let headers = Owned::of(&req.headers);
        let body = req.body.clone();
        // Hashing and parsing up to a MiB: off the async threads.
        let checked = tokio::task::spawn_blocking(move || {
            let v = spec::verify(&secret, &headers.signed(), &body, now_secs)?;
            spec::check_depth(&body)?;
            let payload: serde_json::Value =
                serde_json::from_slice(&body).map_err(|_| Refusal::NotJson)?;
            Ok::<_, Refusal>((v, payload))
        })
        .await
        .map_err(|_| Refusal::NotJson)?;
        let (stored, (verified, payload)) = match (stored, checked) {
            (Some(s), Ok(c)) => (s, c),
            (s, c) => {
                self.over_rate(FAILED, FAILED_RATE, true);
                return Err(if s.is_none() {
                    Refusal::Unknown
                } else {
                    c.err().unwrap_or(Refusal::Unknown)
                });
            }
        };
        if self.over_rate(&stored.name, stored.rate, true) {
            return Err(Refusal::Rate);
        }
        self.deliver(stored, verified, req.headers.event, payload)
            .await
    }

    /// Keeps the delivery (or finds it kept) and sets off a new one's action.
    async fn deliver(
        self: &Arc<Self>,
        hook: Stored,
        verified: spec::Verified,
        event: Option<&str>,
        payload: serde_json::Value,
    ) -> std::result::Result<Taken, Refusal> {
        let (delivery, mac) = (verified.delivery, verified.mac);
        let now = self.clock.now_ms();
        let event = event.map(|e| e.chars().take(64).collect::<String>());
        let kept = rows::keep(
            &self.store,
            (&hook.name, &delivery, event.clone()),
            (mac, now),
            (self.runtime.node(), &payload),
        )
        .await;
        match kept {
            Ok(false) => return Ok(Taken::Retry { delivery }),
            Ok(true) => {}
            Err(e) => {
                tracing::warn!(hook = %hook.name, error = %e, "a delivery could not be kept");
                return Err(Refusal::Unknown);
            }
        }
        self.set_off(hook, (event, delivery.clone()), payload, String::new());
        Ok(Taken::New { delivery })
    }

    /// Acts on a kept delivery in a task of its own; `note` ends its outcome. A
    /// hook's deliveries act one at a time in the order kept (its queue), and at
    /// most [`ACTING`] act at once across the kernel.
    fn set_off(
        self: &Arc<Self>,
        hook: Stored,
        (event, d): (Option<String>, String),
        payload: serde_json::Value,
        note: String,
    ) {
        let key = hook.name.to_ascii_lowercase();
        let me = Arc::downgrade(self);
        let acting = async move {
            let Some(me) = me.upgrade() else { return };
            let span = telemetry::Span::start(
                "hooks/act",
                telemetry::SpanKind::Internal,
                None,
                vec![telemetry::KeyValue::new(
                    "agent_worker.hook",
                    hook.name.clone(),
                )],
            );
            let outcome = me
                .settle(&hook, (event.as_deref(), &d), payload, &note)
                .await;
            if let Some(s) = span {
                s.set("agent_worker.hook.outcome", outcome);
                s.end();
            }
        };
        let job: Job = Box::pin(telemetry::FutureExt::with_current_context(acting));
        let mut queues = self.queues.lock().expect("hook queues");
        let job = match queues.get(&key) {
            Some(tx) => match tx.send(job) {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => job,
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Job>();
        let _ = tx.send(job);
        queues.insert(key, tx);
        let bound = self.acting.clone();
        tokio::spawn(async move {
            while let Some(job) = rx.recv().await {
                let Ok(_permit) = bound.acquire().await else {
                    return;
                };
                job.await;
            }
        });
    }

    /// Asks the contracts and acts on a kept delivery, keeping what came of it
    /// (and `note`) on the delivery: that, in words.
    async fn settle(
        &self,
        hook: &Stored,
        (event, delivery): (Option<&str>, &str),
        payload: serde_json::Value,
        note: &str,
    ) -> String {
        let outcome = match self.govern(hook, event.unwrap_or_default(), delivery).await {
            Ok(governed::Said::Go) => match self.act(hook, &payload).await {
                Ok(o) => o,
                Err(e) => format!("failed: {e}"),
            },
            Ok(governed::Said::Held { approval }) => {
                let held = (approval, &payload);
                if let Err(e) = rows::hold(&self.store, (&hook.name, delivery), held).await {
                    tracing::warn!(hook = %hook.name, error = %e, "a held delivery was not kept");
                }
                return format!("held for approval {approval}");
            }
            Err(e) => format!("denied: {e}"),
        } + note;
        tracing::info!(hook = %hook.name, delivery, outcome, "hook delivery");
        if let Err(e) = rows::outcome(&self.store, (&hook.name, delivery), &outcome).await {
            tracing::warn!(hook = %hook.name, error = %e, "a delivery's outcome was not kept");
        }
        outcome
    }

    /// Does what the hook declares with `payload`: what came of it, in words.
    async fn act(&self, hook: &Stored, payload: &serde_json::Value) -> Result<String> {
        let values = hook.action.resolve(payload).map_err(Error::invalid)?;
        match &hook.action {
            Action::Start {
                file, tag, sha256, ..
            } => {
                let p = std::path::PathBuf::from(file);
                let now = tokio::task::spawn_blocking(move || file_sha256(&p))
                    .await
                    .map_err(|e| Error::internal(e.to_string()))?;
                if sha256.is_some() && now.ok() != *sha256 {
                    return Err(Error::conflict(format!(
                        "{file} changed since the hook was set; nothing was started (set the hook \
                         again with hook_set to take the new file)"
                    )));
                }
                let tag = tag
                    .as_ref()
                    .map(|t| t.resolve(payload).map(text_of))
                    .transpose()
                    .map_err(Error::invalid)?;
                let start = (Source::File(file.into()), tag.as_deref());
                let started = self.start(start, &values, (None, true)).await?;
                Ok(format!("started {}", started.workflow))
            }
            Action::Post { workflow, to, .. } => {
                // The payload's @mentions wake nobody (shown as ＠): only `to` is
                // reached.
                let scope = self.registry.scope(&Caller::Lead, Some(workflow)).await?;
                let body = if values.is_empty() {
                    payload.clone()
                } else {
                    serde_json::Value::Object(values)
                };
                let text = cut(&body.to_string()).replace('@', "\u{FF20}");
                let message = format!("[hook {}] {text}", hook.name);
                let out = Outgoing {
                    message,
                    to: to.clone(),
                    force: true,
                    urgent: false,
                };
                let sent = self.messaging.hook_post(&scope, &hook.name, out).await?;
                Ok(format!("posted {} in {workflow}", sent.id))
            }
        }
    }
}

/// The bucket of requests that fail (no hook, no valid signature), and its rate
/// a minute: a flood of them is refused before its signatures are checked.
const FAILED: &str = "\0failed";
const FAILED_RATE: u32 = 600;

/// The longest message a delivery posts (the lead's limit is larger; a payload
/// past this is cut).
const POSTED_CHARS: usize = 16_000;

fn cut(s: &str) -> String {
    match s.char_indices().nth(POSTED_CHARS) {
        Some((i, _)) => format!("{}… (cut)", &s[..i]),
        None => s.to_owned(),
    }
}

/// A file's SHA-256, hex.
fn file_sha256(p: &std::path::Path) -> std::result::Result<String, String> {
    use sha2::Digest;
    let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(hex::encode(sha2::Sha256::digest(bytes)))
}

fn text_of(v: serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    }
}

/// The headers, owned for the blocking task.
struct Owned(Option<String>, Option<String>, Option<String>);

impl Owned {
    fn of(s: &Signed) -> Self {
        let o = |x: Option<&str>| x.map(str::to_owned);
        Self(o(s.github), o(s.generic), o(s.delivery))
    }
    fn signed(&self) -> Signed<'_> {
        Signed {
            github: self.0.as_deref(),
            generic: self.1.as_deref(),
            delivery: self.2.as_deref(),
            event: None,
        }
    }
}

/// Its secret is never printed, not even in a log.
impl std::fmt::Debug for NewHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewHook")
            .field("name", &self.name)
            .field("secret", &"<set>")
            .finish_non_exhaustive()
    }
}
