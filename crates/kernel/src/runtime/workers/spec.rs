//! What a run needs to know about its agent, read when it starts, and the run's
//! span (traces).

use super::Workers;
use crate::registry::config::AgentConfig;
use crate::runtime::runs;
use domain::backends::Backend;
use domain::error::{Error, Result};
use domain::names::WorkflowRef;
use domain::protocol;
use domain::states::{AgentState, Wake, WorkflowState};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use store::sql::OptionalExtension;

/// What a run needs to know about its agent, read when it starts.
#[derive(Clone)]
pub(crate) struct Spec {
    pub(crate) agent_id: i64,
    pub(crate) name: String,
    pub(crate) workflow: WorkflowRef,
    pub(crate) workflow_id: i64,
    pub(crate) backend: Backend,
    pub(crate) model: Option<String>,
    pub(crate) system: Option<String>,
    pub(crate) cwd: Option<String>,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) config: AgentConfig,
    pub(crate) state: AgentState,
    pub(crate) session_id: Option<String>,
    pub(crate) session_usage: Option<protocol::Usage>,
    /// The instance's state: a stopped or failed workflow starts no runs.
    pub(crate) workflow_state: WorkflowState,
    /// The node that runs it: only that node starts its runs.
    pub(crate) node: Option<String>,
    /// Set while the run waits for an approval (its silence is not idleness).
    pub(crate) held: Arc<AtomicBool>,
    /// What the kernel refused the run (tool requests), kept with the run at its end.
    pub(crate) denials: Arc<Mutex<Vec<runs::Denial>>>,
    /// The run's span, when traces are exported (see [`Spec::traced`]).
    pub(crate) trace: Option<telemetry::Span>,
}

impl Spec {
    /// Agent 7, `a`, of instance 1 `@w`, idle, on `backend` with `env`: for tests
    /// of what a run's start makes of its spec.
    #[cfg(test)]
    pub(crate) fn for_tests(backend: Backend, env: &[(&str, &str)]) -> Spec {
        Spec {
            agent_id: 7,
            name: "a".into(),
            workflow: WorkflowRef::parse("@w").expect("a workflow reference"),
            workflow_id: 1,
            backend,
            model: None,
            system: None,
            cwd: None,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            config: Default::default(),
            state: AgentState::Idle,
            session_id: None,
            session_usage: None,
            workflow_state: WorkflowState::Active,
            node: None,
            held: Default::default(),
            denials: Default::default(),
            trace: None,
        }
    }

    /// Starts the run's span, under `parent` (the call that sent the message
    /// that woke it), else the current context (the lead's call that started it,
    /// e.g. agent_ask), else as a trace's root (a schedule's run). A run an
    /// agent's call set off is the root of a trace of its own, linked to that
    /// call ([`telemetry::Span::caused`]).
    pub(super) fn traced(&mut self, run_id: &str, wake: Wake, parent: Option<telemetry::Context>) {
        use telemetry::KeyValue;
        self.trace = telemetry::Span::caused(
            format!("invoke_agent {}", self.name),
            telemetry::SpanKind::Internal,
            parent.as_ref(),
            vec![
                KeyValue::new("gen_ai.operation.name", "invoke_agent"),
                KeyValue::new("gen_ai.agent.name", self.name.clone()),
                KeyValue::new("agent_worker.workflow", self.workflow.to_string()),
                KeyValue::new("agent_worker.backend", self.backend.to_string()),
                KeyValue::new(
                    "gen_ai.request.model",
                    self.model.clone().unwrap_or_default(),
                ),
                KeyValue::new("agent_worker.trigger", wake.as_str()),
                KeyValue::new("agent_worker.run_id", run_id.to_owned()),
                KeyValue::new("agent_worker.node", self.node.clone().unwrap_or_default()),
            ],
        );
    }
}

impl Workers {
    pub(crate) async fn spec(&self, agent_id: i64) -> Result<Spec> {
        self.base
            .store
            .read(move |c| {
                c.query_row(
                    "SELECT a.id, a.name, w.name, w.tag, w.id, a.backend, a.model, a.system, a.cwd,
                            a.env, a.config, a.state, a.session_id, w.state, a.session_usage, a.node
                     FROM agents a JOIN workflows w ON w.id = a.workflow_id WHERE a.id = ?1",
                    [agent_id],
                    |r| {
                        let env: String = r.get(9)?;
                        let config: String = r.get(10)?;
                        Ok(Spec {
                            agent_id: r.get(0)?,
                            name: r.get(1)?,
                            workflow: WorkflowRef {
                                name: r.get(2)?,
                                tag: r.get(3)?,
                            },
                            workflow_id: r.get(4)?,
                            backend: r.parse(5)?,
                            model: r.get(6)?,
                            system: r.get(7)?,
                            cwd: r.get(8)?,
                            env: serde_json::from_str(&env).unwrap_or_default(),
                            config: serde_json::from_str(&config).unwrap_or_default(),
                            state: r.parse(11)?,
                            session_id: r.get(12)?,
                            workflow_state: r.parse(13)?,
                            node: r.get(15)?,
                            held: Default::default(),
                            denials: Default::default(),
                            trace: None,
                            session_usage: r
                                .get::<Option<String>>(14)?
                                .and_then(|u| serde_json::from_str(&u).ok()),
                        })
                    },
                )
                .optional()?
                .ok_or_else(|| Error::not_found("the agent was deleted"))
            })
            .await
    }
}
