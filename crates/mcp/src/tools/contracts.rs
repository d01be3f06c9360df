//! contract_set, contract_list (the lead); approval_list, approval_decide (the lead
//! and the approvers a contract names); permission_request (worker runs only: how a
//! run asks before a tool runs; the lead never sees it).

use super::params::Parameters;
use super::{ToolError, caller, given};
use crate::AgentWorker;
use domain::names::WorkflowRef;
use kernel::Caller;
use kernel::governance::approvals::ApprovalView;
use kernel::governance::contracts::{ContractList, ContractView};
use kernel::runtime::requests::Answer;
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The tool a worker run asks through; hidden from the lead.
pub const PERMISSION_TOOL: &str = "permission_request";

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ContractSetArgs {
    pub name: String,
    /// Why it exists.
    #[serde(default)]
    #[schemars(with = "String")]
    pub description: Option<String>,
    /// "review" or "review:pr-1" (default everywhere).
    #[serde(default)]
    #[schemars(with = "String")]
    pub workflow: Option<String>,
    /// An organisation: in force in its instances.
    #[serde(default)]
    #[schemars(with = "String")]
    pub org: Option<String>,
    /// {event: tool_request (tool read|edit|shell|web|mcp, match, agent) | message (from, to,
    /// text, urgent) | spend (usd|tokens, per, agent) | run_end (status, agent) | doc_write
    /// (file, agent) | merge (agent, into, mode) | agent_new (by, backend) | task (state,
    /// title, agent) | hook (hook, kind)}; tool_request and message take a rate:
    /// more_than (a count) and within ("1h").
    #[serde(default)]
    #[schemars(schema_with = "super::any_object")]
    pub when: Option<Value>,
    /// {action: allow | deny (reason) | require_approval (approvers, count, timeout,
    /// on_timeout) | require_votes (votes: 2 or "2/3" of the members, timeout, on_timeout)
    /// | notify (to) | pause (reason) | route (to)}.
    #[serde(default)]
    #[schemars(schema_with = "super::any_object")]
    pub then: Option<Value>,
    /// Delete the contract `name` instead.
    #[serde(default)]
    pub remove: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct WorkflowFilter {
    /// Only this instance's, e.g. "@review:pr-1".
    #[serde(default)]
    #[schemars(with = "String")]
    pub workflow: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ContractFilter {
    /// Those in force in this instance.
    #[serde(default)]
    #[schemars(with = "String")]
    pub workflow: Option<String>,
    /// Those bound to this organisation.
    #[serde(default)]
    #[schemars(with = "String")]
    pub org: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct DecideArgs {
    pub id: i64,
    #[schemars(extend("enum" = ["approve", "deny"]))]
    pub decision: String,
    /// Why (shown to the asker).
    #[serde(default)]
    #[schemars(with = "String")]
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct PermissionArgs {
    /// The tool about to run, as the backend names it (Bash, Write, run_command, mcp__server__tool...).
    pub tool_name: String,
    /// Its input.
    #[schemars(with = "Map<String, Value>")]
    pub input: Value,
    /// The backend's id for the call, if it has one (accepted; not needed).
    #[serde(default)]
    #[allow(dead_code)]
    #[schemars(with = "String")]
    pub tool_use_id: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ContractSetOut {
    /// The contract as it now reads (absent after remove).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contract: Option<ContractView>,
    /// True after remove.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ApprovalsOut {
    /// Pending first (newest first), then the latest closed ones.
    pub approvals: Vec<ApprovalView>,
}

/// The answer in the shape Claude Code's permission prompt tool reads: one text
/// block holding this as JSON (Claude Code refuses structured content here).
#[derive(Debug, Serialize)]
pub struct PermissionOut {
    /// "allow" or "deny".
    pub behavior: String,
    /// The input to run the tool with (unchanged), when allowed.
    #[serde(rename = "updatedInput", skip_serializing_if = "Option::is_none")]
    pub updated_input: Option<Value>,
    /// Why it was refused, when denied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

fn workflow_arg(w: &Option<String>) -> Result<Option<WorkflowRef>, ToolError> {
    Ok(given(w).map(WorkflowRef::parse).transpose()?)
}

#[tool_router(router = contract_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Create or replace the contract `name`: `when` an event happens, `then` an action, e.g.
    /// when {event: tool_request, tool: shell, match: "rm *"} then {action: deny, reason:
    /// "ask first"}. Cookbook: prompt teams-guide.
    #[tool(
        title = "Set a contract",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn contract_set(
        &self,
        Parameters(a): Parameters<ContractSetArgs>,
    ) -> Result<Json<ContractSetOut>, ToolError> {
        if a.remove {
            if a.when.is_some() || a.then.is_some() || given(&a.description).is_some() {
                return Err(ToolError(
                    "remove takes only the name; leave out when, then and description".into(),
                ));
            }
            self.kernel.contract_delete(a.name.trim()).await?;
            return Ok(Json(ContractSetOut {
                contract: None,
                removed: true,
            }));
        }
        let mut spec = Map::new();
        spec.insert("name".into(), Value::String(a.name));
        for (k, v) in [
            ("description", &a.description),
            ("workflow", &a.workflow),
            ("org", &a.org),
        ] {
            if let Some(v) = given(v) {
                spec.insert(k.into(), Value::String(v.to_owned()));
            }
        }
        for (k, v) in [("when", a.when), ("then", a.then)] {
            if let Some(v) = v {
                spec.insert(k.into(), v);
            }
        }
        let contract = self.kernel.contract_set(Value::Object(spec)).await?;
        Ok(Json(ContractSetOut {
            contract: Some(contract),
            removed: false,
        }))
    }

    /// Every contract as a sentence, the built-in guards, and the latest decisions.
    #[tool(
        title = "List contracts",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn contract_list(
        &self,
        Parameters(a): Parameters<ContractFilter>,
    ) -> Result<Json<ContractList>, ToolError> {
        let wf = workflow_arg(&a.workflow)?;
        Ok(Json(
            self.kernel
                .contract_list(wf.as_ref(), given(&a.org))
                .await?,
        ))
    }
}

#[tool_router(router = approval_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Approvals contracts asked for: who, for what, why, who may decide. Pending first.
    #[tool(
        title = "List approvals",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn approval_list(
        &self,
        Parameters(a): Parameters<WorkflowFilter>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<ApprovalsOut>, ToolError> {
        let who: Caller = caller(&ctx)?;
        let wf = workflow_arg(&a.workflow)?;
        Ok(Json(ApprovalsOut {
            approvals: self.kernel.approval_list(&who, wf.as_ref()).await?,
        }))
    }

    /// Decide approval `id` (from approval_list): `decision` approve or deny.
    #[tool(
        title = "Decide an approval",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn approval_decide(
        &self,
        Parameters(a): Parameters<DecideArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<ApprovalView>, ToolError> {
        let approve = match a.decision.trim() {
            "approve" => true,
            "deny" => false,
            other => {
                return Err(ToolError(format!(
                    "decision {other:?}: write \"approve\" or \"deny\""
                )));
            }
        };
        let who: Caller = caller(&ctx)?;
        Ok(Json(
            self.kernel
                .approval_decide(&who, a.id, approve, given(&a.reason).map(str::to_owned))
                .await?,
        ))
    }

    /// Your runtime calls this before a tool runs, to ask the team's contracts; you do not need
    /// to call it yourself.
    #[tool(
        title = "Ask before a tool runs",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn permission_request(
        &self,
        Parameters(a): Parameters<PermissionArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<String, ToolError> {
        let Caller::Agent(who) = caller(&ctx)? else {
            return Err(ToolError("permission_request is for worker runs".into()));
        };
        let answer = self
            .kernel
            .tool_request(&who, &a.tool_name, &a.input)
            .await?;
        // The decision, on this request's span (traces): what the contracts said.
        telemetry::note("agent_worker.tool_request", a.tool_name.clone());
        telemetry::note(
            "agent_worker.decision",
            if matches!(answer, Answer::Allow) {
                "allow"
            } else {
                "deny"
            },
        );
        let out = match answer {
            Answer::Allow => PermissionOut {
                behavior: "allow".into(),
                updated_input: Some(a.input),
                message: None,
            },
            Answer::Deny(why) => PermissionOut {
                behavior: "deny".into(),
                updated_input: None,
                message: Some(why),
            },
        };
        serde_json::to_string(&out).map_err(|e| ToolError(e.to_string()))
    }
}
