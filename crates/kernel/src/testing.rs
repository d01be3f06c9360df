//! The rooms of the kernel built from below for their unit tests, the way the
//! composition root (`facade/mod.rs`) builds them: one store (SQLite in a temporary
//! folder; a fresh PostgreSQL database with `AGENT_WORKER_TEST_STORE=postgres`
//! and `AGENT_WORKER_TEST_PG` set, as the suite's kernels), the events and a
//! manual clock. Every room a unit test builds is built here, nowhere else, so a
//! change to a room's constructor is made once.
//!
//! The runtime is not built: the rooms tested here decide without a process.

use crate::context::Context;
use crate::events::Events;
use crate::feedback::FeedbackRoom;
use crate::governance::contracts::Contracts;
use crate::messaging::{Messaging, Outgoing, SendResult};
use crate::registry::{NewAgent, Registry, insert_agent_tx};
use crate::timing::Clock;
use crate::workflows::steps::Steps;
use crate::{AgentIdentity, Caller, Scope};
use domain::names::{LEAD, WorkflowRef};
use std::sync::{Arc, OnceLock};
use store::Store;

/// Where the manual clock of a fixture starts: 2026-01-01T00:00:00Z.
pub(crate) const T0: i64 = 1_767_225_600_000;
/// The admin token of every fixture's registry.
pub(crate) const ADMIN: &str = "awadmin_test_token_0123456789";
/// This kernel's node.
pub(crate) const NODE: &str = "local";

/// The rooms below the runtime, on one store.
/// A whole kernel on `dir` (SQLite there) reading `clock`: for the decisions that
/// need the composition root (the runtime's, a timer's), with no worker started.
pub(crate) async fn kernel_on(dir: &std::path::Path, clock: &Clock) -> Arc<crate::Kernel> {
    let setup = crate::Setup {
        clock: clock.clone(),
        timing: crate::timing::Timing::default(),
        worker_exe: crate::worker_exe(),
        labels: Vec::new(),
    };
    let store = store::Location::in_data_dir(dir);
    crate::Kernel::open_timed(dir, ADMIN.into(), &store, NODE, setup)
        .await
        .expect("open a kernel")
}

pub(crate) struct Rooms {
    pub(crate) store: Store,
    pub(crate) events: Events,
    pub(crate) clock: Clock,
    pub(crate) registry: Arc<Registry>,
    pub(crate) contracts: Arc<Contracts>,
    pub(crate) messaging: Arc<Messaging>,
    pub(crate) context: Arc<Context>,
    pub(crate) feedback: Arc<FeedbackRoom>,
    pub(crate) steps: Steps,
    /// The data dir (documents of the file provider live under it).
    pub(crate) dir: tempfile::TempDir,
}

/// The store a test's rooms use: see the module's doc.
fn open_store(dir: &std::path::Path) -> Store {
    let mode = std::env::var("AGENT_WORKER_TEST_STORE").unwrap_or_default();
    match mode.as_str() {
        "" | "sqlite" => {}
        "postgres" => {
            if let Some(store) = store::testing::fresh_postgres_store() {
                return store;
            }
        }
        other => panic!("AGENT_WORKER_TEST_STORE={other:?}: use sqlite or postgres"),
    }
    for (name, bytes) in template() {
        std::fs::write(dir.join(name), bytes).expect("copy the migrated database");
    }
    Store::open_as(&store::Location::in_data_dir(dir), NODE).expect("open the test store")
}

/// A SQLite database migrated to the end, once per test process: its file and
/// its log as bytes (the migrations are all in the log, which no checkpoint has
/// touched yet). Each test starts from a copy instead of migrating again, which
/// was most of a test's time.
fn template() -> &'static [(String, Vec<u8>)] {
    static TEMPLATE: OnceLock<Vec<(String, Vec<u8>)>> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a folder for the template");
        let store = Store::open_as(&store::Location::in_data_dir(dir.path()), NODE)
            .expect("migrate the template");
        let files = [store::DB_FILE.to_owned(), format!("{}-wal", store::DB_FILE)]
            .into_iter()
            .filter_map(|name| Some((name.clone(), std::fs::read(dir.path().join(&name)).ok()?)))
            .collect();
        drop(store);
        files
    })
}

impl Rooms {
    /// Fresh rooms on an empty store (only `@global:main` exists).
    pub(crate) async fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temporary data dir");
        let path = dir.path().to_owned();
        let store = tokio::task::spawn_blocking(move || open_store(&path))
            .await
            .expect("open the store");
        let events = Events::default();
        let clock = Clock::manual(T0);
        let registry = Arc::new(Registry::new(store.clone(), clock.clone(), ADMIN.into()));
        let contracts = Arc::new(Contracts::new(store.clone(), events.clone(), clock.clone()));
        let messaging = Arc::new(Messaging::new(
            (store.clone(), events.clone(), clock.clone()),
            contracts.clone(),
            NODE.into(),
        ));
        let context = Arc::new(Context::new(
            (store.clone(), events.clone(), clock.clone()),
            contracts.clone(),
            (registry.clone(), messaging.clone()),
            dir.path().to_owned(),
        ));
        let feedback = Arc::new(FeedbackRoom::new(
            store.clone(),
            events.clone(),
            clock.clone(),
        ));
        let steps = Steps::new(
            (store.clone(), clock.clone()),
            contracts.clone(),
            messaging.clone(),
        );
        contracts.reload().await.expect("load the contracts");
        Self {
            store,
            events,
            clock,
            registry,
            contracts,
            messaging,
            context,
            feedback,
            steps,
            dir,
        }
    }

    /// Registers `name` (backend `backend`) in `workflow` (created if new); its id.
    pub(crate) async fn agent_in(&self, workflow: &str, name: &str, backend: &str) -> i64 {
        let wf = WorkflowRef::parse(workflow).expect("a workflow reference");
        let a = NewAgent {
            name: name.into(),
            backend: backend.into(),
            workflow: Some(wf.to_string()),
            ..Default::default()
        };
        let now = self.clock.now_ms();
        let (_, id, _) = self
            .store
            .write(move |c| insert_agent_tx(c, &a, &wf, Some(NODE), now))
            .await
            .expect("register the agent");
        id
    }

    /// Registers mock agents `names` in `@global:main`.
    pub(crate) async fn agents(&self, names: &[&str]) {
        for n in names {
            self.agent_in("@global:main", n, "mock").await;
        }
    }

    /// What `name` (an agent, or the lead for `user`) acts as in `workflow`.
    pub(crate) async fn scope_in(&self, workflow: &str, name: &str) -> Scope {
        let wf = WorkflowRef::parse(workflow).expect("a workflow reference");
        if name == LEAD {
            let caller = Caller::Lead;
            return self
                .registry
                .scope(&caller, Some(&wf.to_string()))
                .await
                .expect("the lead's scope");
        }
        let caller = self.caller(&format!("{name}{}", at(&wf))).await;
        self.registry
            .scope(&caller, None)
            .await
            .expect("the agent's scope")
    }

    /// What `name` acts as in `@global:main`.
    pub(crate) async fn scope(&self, name: &str) -> Scope {
        self.scope_in("@global:main", name).await
    }

    /// The caller an agent token of `target` (e.g. `alice`, `bob@review:pr-1`) is.
    pub(crate) async fn caller(&self, target: &str) -> Caller {
        let id = self
            .registry
            .agent_get(target)
            .await
            .expect("the agent exists")
            .id;
        self.registry
            .agent_caller(id, None)
            .await
            .expect("the agent's identity")
    }

    /// The identity of an agent caller.
    pub(crate) async fn identity(&self, target: &str) -> AgentIdentity {
        match self.caller(target).await {
            Caller::Agent(a) => a,
            Caller::Lead => unreachable!("an agent's caller"),
        }
    }

    /// `from` sends `text` in `@global:main` (no guard: `force`).
    pub(crate) async fn send(&self, from: &str, text: &str) -> SendResult {
        let scope = self.scope(from).await;
        self.messaging
            .channel_send(
                &scope,
                Outgoing {
                    message: text.into(),
                    force: true,
                    ..Default::default()
                },
            )
            .await
            .expect("the send")
    }

    /// One number the store answers (`SELECT count(*) ...`), with one text parameter.
    pub(crate) async fn count(&self, sql: &'static str, param: &str) -> i64 {
        let p = param.to_owned();
        self.store
            .read(move |c| Ok(c.query_row(sql, [&p], |r| r.get::<i64>(0))?))
            .await
            .expect("the count")
    }

    /// Runs one statement with one text parameter: how a test puts the store where
    /// it wants it (a deadline passed, a token expired).
    pub(crate) async fn execute(&self, sql: &'static str, param: &str) -> usize {
        let p = param.to_owned();
        self.store
            .write(move |c| Ok(c.execute(sql, [&p])?))
            .await
            .expect("the statement")
    }
}

/// `@name:tag` as an agent target's suffix; nothing for `@global:main`.
fn at(wf: &WorkflowRef) -> String {
    if *wf == WorkflowRef::global() {
        String::new()
    } else {
        wf.to_string()
    }
}

/// Names as owned strings, for comparing with what a room returns.
pub(crate) fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

/// What a room answered, short: `ok`, or the error's kind and its words
/// (`invalid: ...`, `not found: ...`, `conflict: ...`, `forbidden: ...`).
pub(crate) fn said<T>(r: &domain::error::Result<T>) -> String {
    use domain::error::Error;
    match r {
        Ok(_) => "ok".into(),
        Err(Error::Invalid(m)) => format!("invalid: {m}"),
        Err(Error::NotFound(m)) => format!("not found: {m}"),
        Err(Error::Conflict(m)) => format!("conflict: {m}"),
        Err(Error::Forbidden(m)) => format!("forbidden: {m}"),
        Err(e) => format!("error: {e}"),
    }
}

/// Asserts that `got` (see [`said`]) starts with `want` and holds each of `also`.
#[track_caller]
pub(crate) fn expect(got: &str, want: &str, also: &[&str]) {
    assert!(got.starts_with(want), "got {got:?}, want {want:?}");
    for a in also {
        assert!(got.contains(a), "got {got:?}, want it to say {a:?}");
    }
}
