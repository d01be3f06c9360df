//! The façade of [`Runtime`](crate::runtime::Runtime), agents as things that run: each method hands the call to
//! the room (its documentation is there), resolving names first where it needs them.

use crate::AgentIdentity;
use crate::governance::approvals::ApprovalView;
use crate::registry::AgentView;
use crate::registry::NewAgent;
use crate::runtime::agents::{AgentInfo, AgentUpdate};
use crate::runtime::ask::{AskResult, Asking};
use crate::runtime::requests::Answer;
use crate::runtime::schedules::ScheduleView;
use crate::{Caller, Kernel};
use domain::error::Result;
use domain::names::WorkflowRef;
use domain::permissions::Permissions;
use domain::protocol::BackendReport;
use domain::trigger::Trigger;
use std::collections::BTreeMap;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Agents as things that run.
impl Kernel {
    pub async fn branch_diff(
        &self,
        scope: &crate::Scope,
        a: crate::runtime::worktrees::DiffArgs<'_>,
    ) -> Result<crate::runtime::worktrees::diff::BranchDiff> {
        self.runtime.branches().branch_diff(scope, a).await
    }

    pub async fn agent_skills(&self, target: &str) -> Result<Vec<domain::skills::Skill>> {
        self.runtime.agents().agent_skills(target).await
    }

    pub async fn branch_merge(
        &self,
        ask: crate::runtime::worktrees::MergeAsk,
    ) -> Result<crate::runtime::worktrees::merge::MergeOut> {
        self.runtime.branches().branch_merge(ask).await
    }

    pub async fn owes_nothing(&self) -> Result<bool> {
        self.runtime.owes_nothing().await
    }

    pub async fn stop_all_runs(&self) {
        self.runtime.workers().stop_all_runs().await
    }

    pub async fn set_paused(&self, agent_id: i64, paused: bool) -> Result<()> {
        self.runtime.agents().set_paused(agent_id, paused).await
    }

    pub async fn approval_decide(
        &self,
        caller: &Caller,
        id: i64,
        approve: bool,
        reason: Option<String>,
    ) -> Result<ApprovalView> {
        self.runtime
            .approvals()
            .decide(caller, id, approve, reason)
            .await
    }

    pub async fn approval_list(
        &self,
        caller: &Caller,
        workflow: Option<&WorkflowRef>,
    ) -> Result<Vec<ApprovalView>> {
        self.runtime.approvals().list(caller, workflow).await
    }

    pub async fn tool_request(
        &self,
        who: &AgentIdentity,
        tool_name: &str,
        input: &serde_json::Value,
    ) -> Result<Answer> {
        self.runtime
            .requests()
            .tool_request(who, tool_name, input)
            .await
    }

    pub async fn probe_backends(
        &self,
        backends: &[&str],
        env: &BTreeMap<String, String>,
    ) -> Result<Vec<BackendReport>> {
        self.runtime.probe_backends(backends, env).await
    }

    pub async fn readiness_warning(
        &self,
        backend: &str,
        env: &BTreeMap<String, String>,
        permissions: &domain::permissions::Permissions,
    ) -> Option<String> {
        self.runtime
            .readiness_warning(backend, env, permissions)
            .await
    }

    pub fn set_url(&self, url: String) {
        self.runtime.set_url(url)
    }

    pub fn url(&self) -> Option<&str> {
        self.runtime.url()
    }

    pub async fn agent_new(&self, a: NewAgent) -> Result<AgentView> {
        self.runtime.agents().agent_new(a).await
    }

    pub async fn agent_delete(
        &self,
        target: &str,
        discard: bool,
    ) -> Result<(AgentView, Option<String>)> {
        self.runtime.agents().agent_delete(target, discard).await
    }

    pub async fn agent_env_and_permissions(
        &self,
        target: &str,
    ) -> Result<(BTreeMap<String, String>, Permissions)> {
        self.runtime
            .agents()
            .agent_env_and_permissions(target)
            .await
    }

    pub async fn agent_update(&self, target: &str, u: AgentUpdate) -> Result<AgentView> {
        self.runtime.agents().agent_update(target, u).await
    }

    pub async fn agent_info(&self, target: &str) -> Result<AgentInfo> {
        self.runtime.agents().agent_info(target).await
    }

    /// Agents making, asking and deleting agents of their own.
    pub fn delegation(&self) -> &std::sync::Arc<crate::runtime::delegation::Delegation> {
        self.runtime.delegation()
    }

    /// agent_ask; with `schema`, the agent is asked for a result fitting it.
    pub async fn ask(
        &self,
        target: &str,
        message: &str,
        schema: Option<domain::result_schema::ResultSchema>,
    ) -> Result<Asking> {
        self.runtime.asks().ask(target, message, schema).await
    }

    pub async fn asked(&self, target: &str, message_id: &str) -> Result<Asking> {
        self.runtime.asks().asked(target, message_id).await
    }

    pub async fn await_answer(
        &self,
        a: Asking,
        deadline: Instant,
        cancel: &CancellationToken,
        progress: impl Fn(String),
    ) -> Result<AskResult> {
        self.runtime
            .asks()
            .await_answer(a, deadline, cancel, progress)
            .await
    }

    pub async fn schedule_set(
        &self,
        target: &str,
        trigger: Trigger,
        prompt: Option<String>,
    ) -> Result<ScheduleView> {
        self.runtime
            .scheduler()
            .schedule_set(target, trigger, prompt)
            .await
    }

    pub async fn schedule_clear(&self, target: &str) -> Result<bool> {
        self.runtime.scheduler().schedule_clear(target).await
    }
    /// How long this node's write transactions held the store's write since the
    /// last call, all of them and per instance (see [`store::Store::take_write_holds`]
    /// and [`store::Store::take_instance_holds`]); for the benchmarks.
    pub fn take_write_holds(&self) -> (store::HoldStats, Vec<(i64, store::HoldStats)>) {
        (
            self.store.take_write_holds(),
            self.store.take_instance_holds(),
        )
    }

    pub fn node(&self) -> &str {
        self.runtime.node()
    }

    pub async fn start_scheduler(&self) -> Result<()> {
        self.runtime.start_scheduler().await
    }
}
