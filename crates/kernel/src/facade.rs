//! The kernel as the MCP layer sees it, for the rooms that are services: each
//! method resolves what the caller named (a workflow instance, by name) and hands
//! the room only what it needs.
//!
//! Rooms that are still `impl Kernel` blocks keep their methods where they are;
//! as each becomes a service that owns its state, its façade moves here.

use crate::AgentIdentity;
use crate::context::documents::settings::{ContextChange, ContextView};
use crate::context::documents::{DocList, DocRead, DocWritten, Suggested};
use crate::context::proposals::{self, Cancelled, NewProposal, StatusList, Voted};
use crate::governance::approvals::ApprovalView;
use crate::governance::contracts::{ContractList, ContractView};
use crate::messaging::inbox::{AckResult, DeferResult, Inbox};
use crate::messaging::resources::{Created, Resource};
use crate::messaging::team::{Member, Status, StatusUpdate};
use crate::messaging::{Outgoing, ReadResult, SendResult};
use crate::registry::NewAgent;
use crate::registry::tokens::AuthError;
use crate::registry::{AgentRecord, AgentView};
use crate::runtime::agents::{AgentInfo, AgentUpdate};
use crate::runtime::ask::{AskResult, Asking};
use crate::runtime::nodes::NodeView;
use crate::runtime::requests::Answer;
use crate::runtime::runs::RunView;
use crate::runtime::schedules::ScheduleView;
use crate::{Caller, Kernel, Scope};
use domain::contracts;
use domain::error::{Error, Result};
use domain::names::WorkflowRef;
use domain::permissions::Permissions;
use domain::protocol::BackendReport;
use domain::trigger::Trigger;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

impl Kernel {
    /// contract_set: creates or replaces the lead's contract of this name.
    pub async fn contract_set(&self, spec: Value) -> Result<ContractView> {
        let c = contracts::parse(&spec).map_err(|e| Error::invalid(format!("contract.{e}")))?;
        if let Some(w) = &c.workflow {
            let wf = WorkflowRef::parse(w)?;
            if w.contains(':') {
                // A named instance must exist, so a typo is not a contract that never applies.
                self.registry.workflow_id(&wf).await?;
            }
        }
        self.contracts.set(c, spec).await
    }

    /// contract_set with remove: deletes the lead's contract of this name.
    pub async fn contract_delete(&self, name: &str) -> Result<()> {
        self.contracts.delete(name).await
    }

    /// contract_list: the contracts (all, or those in force in one instance), the
    /// built-in guards and the latest decisions.
    pub async fn contract_list(&self, workflow: Option<&WorkflowRef>) -> Result<ContractList> {
        let scope = match workflow {
            Some(wf) => Some((self.registry.workflow_id(wf).await?, wf.clone())),
            None => None,
        };
        self.contracts.list(scope).await
    }
}

/// The registry: who is who.
impl Kernel {
    pub async fn agent_list(&self, workflow: Option<&str>) -> Result<Vec<AgentView>> {
        self.registry.agent_list(workflow).await
    }

    pub async fn agent_get(&self, target: &str) -> Result<AgentRecord> {
        self.registry.agent_get(target).await
    }

    pub async fn workflow_ref(&self, id: i64) -> Result<Option<WorkflowRef>> {
        self.registry.workflow_ref(id).await
    }

    pub async fn workflow_id(&self, wf: &WorkflowRef) -> Result<i64> {
        self.registry.workflow_id(wf).await
    }

    pub async fn scope(&self, caller: &Caller, workflow: Option<&str>) -> Result<Scope> {
        self.registry.scope(caller, workflow).await
    }

    pub fn local_token(&self) -> &str {
        self.registry.local_token()
    }

    pub async fn authenticate(&self, bearer: Option<&str>) -> Result<Caller, AuthError> {
        self.registry.authenticate(bearer).await
    }

    pub async fn mint_agent_token(
        &self,
        agent_id: i64,
        ttl: std::time::Duration,
        purpose: &str,
        run_id: Option<String>,
    ) -> Result<(String, i64)> {
        self.registry
            .mint_agent_token(agent_id, ttl, purpose, run_id)
            .await
    }
}

/// The channel and the inboxes.
impl Kernel {
    pub async fn channel_send(&self, scope: &Scope, send: Outgoing) -> Result<SendResult> {
        self.messaging.channel_send(scope, send).await
    }

    pub async fn channel_send_many(
        &self,
        scope: &Scope,
        sends: Vec<Outgoing>,
    ) -> Result<Vec<SendResult>> {
        self.messaging.channel_send_many(scope, sends).await
    }

    pub async fn channel_read(
        &self,
        scope: &Scope,
        since: Option<String>,
        limit: Option<i64>,
    ) -> Result<ReadResult> {
        self.messaging.channel_read(scope, since, limit).await
    }

    pub async fn my_inbox(&self, scope: &Scope, limit: Option<i64>) -> Result<Inbox> {
        self.messaging.my_inbox(scope, limit).await
    }

    pub async fn inbox_peek(&self, scope: &Scope, limit: i64) -> Result<Inbox> {
        self.messaging.inbox_peek(scope, limit).await
    }

    pub async fn my_inbox_ack(
        &self,
        scope: &Scope,
        message_id: &str,
        through: bool,
    ) -> Result<AckResult> {
        self.messaging
            .my_inbox_ack(scope, message_id, through)
            .await
    }

    pub async fn my_inbox_defer(
        &self,
        scope: &Scope,
        message_id: &str,
        until: Option<&str>,
    ) -> Result<DeferResult> {
        self.messaging
            .my_inbox_defer(scope, message_id, until)
            .await
    }

    pub async fn my_inbox_wait(
        &self,
        scope: &Scope,
        limit: Option<i64>,
        wait: Duration,
    ) -> Result<Inbox> {
        self.messaging.my_inbox_wait(scope, limit, wait).await
    }

    pub async fn channel_read_wait(
        &self,
        scope: &Scope,
        since: Option<String>,
        limit: Option<i64>,
        wait: Duration,
    ) -> Result<ReadResult> {
        self.messaging
            .channel_read_wait(scope, since, limit, wait)
            .await
    }

    pub async fn my_status_set(&self, scope: &Scope, u: StatusUpdate) -> Result<Status> {
        self.messaging.my_status_set(scope, u).await
    }

    pub async fn team_members(&self, scope: &Scope, include_status: bool) -> Result<Vec<Member>> {
        self.messaging.team_members(scope, include_status).await
    }

    pub async fn resource_create(
        &self,
        scope: &Scope,
        content: String,
        kind: Option<&str>,
    ) -> Result<Created> {
        self.messaging.resource_create(scope, content, kind).await
    }

    pub async fn resource_read(&self, id: &str) -> Result<Resource> {
        self.messaging.resource_read(id).await
    }
}

/// Documents and proposals.
impl Kernel {
    pub async fn doc_read(&self, scope: &Scope, file: Option<&str>) -> Result<DocRead> {
        self.context.doc_read(scope, file).await
    }

    pub async fn doc_write(
        &self,
        scope: &Scope,
        file: Option<&str>,
        content: String,
        expected_version: Option<&str>,
    ) -> Result<DocWritten> {
        self.context
            .doc_write(scope, file, content, expected_version)
            .await
    }

    pub async fn doc_append(
        &self,
        scope: &Scope,
        file: Option<&str>,
        content: String,
    ) -> Result<DocWritten> {
        self.context.doc_append(scope, file, content).await
    }

    pub async fn doc_create(
        &self,
        scope: &Scope,
        file: &str,
        content: String,
    ) -> Result<DocWritten> {
        self.context.doc_create(scope, file, content).await
    }

    pub async fn doc_list(&self, scope: &Scope) -> Result<DocList> {
        self.context.doc_list(scope).await
    }

    pub async fn document_suggest(
        &self,
        scope: &Scope,
        suggestion: &str,
        file: Option<&str>,
    ) -> Result<Suggested> {
        self.context.document_suggest(scope, suggestion, file).await
    }

    pub async fn workflow_context_set(
        &self,
        workflow: &str,
        change: ContextChange,
    ) -> Result<ContextView> {
        self.context.workflow_context_set(workflow, change).await
    }

    pub async fn proposal_create(
        &self,
        scope: &Scope,
        new: NewProposal,
    ) -> Result<proposals::Created> {
        self.context.proposal_create(scope, new).await
    }

    pub async fn proposal_vote(
        &self,
        scope: &Scope,
        proposal: &str,
        choice: &str,
        reason: Option<&str>,
    ) -> Result<Voted> {
        self.context
            .proposal_vote(scope, proposal, choice, reason)
            .await
    }

    pub async fn proposal_status(
        &self,
        scope: &Scope,
        proposal: Option<&str>,
    ) -> Result<StatusList> {
        self.context.proposal_status(scope, proposal).await
    }

    pub async fn proposal_cancel(&self, scope: &Scope, proposal: &str) -> Result<Cancelled> {
        self.context.proposal_cancel(scope, proposal).await
    }
}

/// Agents as things that run.
impl Kernel {
    pub fn touch_client(&self) {
        self.runtime.touch_client()
    }

    pub fn client_idle_for(&self) -> Duration {
        self.runtime.client_idle_for()
    }

    pub async fn owes_nothing(&self) -> Result<bool> {
        self.runtime.owes_nothing().await
    }

    pub async fn stop_all_runs(&self) {
        self.runtime.stop_all_runs().await
    }

    pub async fn run_view(&self, run_id: &str) -> Result<RunView> {
        self.runtime.run_view(run_id).await
    }

    pub async fn set_paused(&self, agent_id: i64, paused: bool) -> Result<()> {
        self.runtime.set_paused(agent_id, paused).await
    }

    pub async fn approval_decide(
        &self,
        caller: &Caller,
        id: i64,
        approve: bool,
        reason: Option<String>,
    ) -> Result<ApprovalView> {
        self.runtime
            .approval_decide(caller, id, approve, reason)
            .await
    }

    pub async fn approval_view(&self, id: i64) -> Result<Option<ApprovalView>> {
        self.runtime.approval_view(id).await
    }

    pub async fn approval_list(
        &self,
        caller: &Caller,
        workflow: Option<&WorkflowRef>,
    ) -> Result<Vec<ApprovalView>> {
        self.runtime.approval_list(caller, workflow).await
    }

    pub async fn tool_request(
        &self,
        who: &AgentIdentity,
        tool_name: &str,
        input: &serde_json::Value,
    ) -> Result<Answer> {
        self.runtime.tool_request(who, tool_name, input).await
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
        self.runtime.agent_new(a).await
    }

    pub async fn agent_delete(self: &std::sync::Arc<Self>, target: &str) -> Result<AgentView> {
        self.runtime.agent_delete(target).await
    }

    pub async fn agent_env_and_permissions(
        &self,
        target: &str,
    ) -> Result<(BTreeMap<String, String>, Permissions)> {
        self.runtime.agent_env_and_permissions(target).await
    }

    pub async fn agent_update(&self, target: &str, u: AgentUpdate) -> Result<AgentView> {
        self.runtime.agent_update(target, u).await
    }

    pub async fn agent_info(&self, target: &str) -> Result<AgentInfo> {
        self.runtime.agent_info(target).await
    }

    pub async fn ask(&self, target: &str, message: &str) -> Result<Asking> {
        self.runtime.ask(target, message).await
    }

    pub async fn asked(&self, target: &str, message_id: &str) -> Result<Asking> {
        self.runtime.asked(target, message_id).await
    }

    pub async fn await_answer(
        &self,
        a: Asking,
        deadline: Instant,
        cancel: &CancellationToken,
        progress: impl Fn(String),
    ) -> Result<AskResult> {
        self.runtime
            .await_answer(a, deadline, cancel, progress)
            .await
    }

    pub async fn schedule_set(
        &self,
        target: &str,
        trigger: Trigger,
        prompt: Option<String>,
    ) -> Result<ScheduleView> {
        self.runtime.schedule_set(target, trigger, prompt).await
    }

    pub async fn schedule_clear(&self, target: &str) -> Result<bool> {
        self.runtime.schedule_clear(target).await
    }

    pub fn node(&self) -> &str {
        self.runtime.node()
    }

    pub async fn node_list(&self) -> Result<Vec<NodeView>> {
        self.runtime.node_list().await
    }

    pub async fn leave(&self) -> Result<()> {
        self.runtime.leave().await
    }

    pub async fn start_scheduler(&self) -> Result<()> {
        self.runtime.start_scheduler().await
    }
}
