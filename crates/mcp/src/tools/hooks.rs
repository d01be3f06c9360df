//! hook_set (the lead only): declare, replace or delete a hook, the URL
//! `POST /hooks/<name>` that takes events from outside signed with its secret.
//! workflow_list shows the hooks and their newest deliveries.

use super::params::Parameters;
use super::{ToolError, given};
use crate::AgentWorker;
use domain::hooks::{Action, Param, parse_params};
use kernel::hooks::{HookView, NewHook};
use rmcp::{Json, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct HookSetArgs {
    pub name: String,
    /// 16+ chars; never shown.
    #[serde(default)]
    #[schemars(with = "String")]
    pub secret: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub file: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub tag: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub workflow: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub to: Option<String>,
    #[serde(default)]
    pub params: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    #[schemars(with = "u32")]
    pub rate: Option<u32>,
    #[serde(default)]
    pub delete: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct HookOut {
    /// The hook as set (absent after `delete`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook: Option<HookView>,
    /// Where senders post (on this server's address).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// After `delete`: false when there was no such hook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<bool>,
}

impl HookSetArgs {
    /// What a delivery is to do: exactly one of `file` and `workflow`.
    fn action(&self) -> Result<Action, ToolError> {
        let params = parse_params(self.params.as_ref())?;
        match (given(&self.file), given(&self.workflow)) {
            (Some(file), None) => {
                if self.to.is_some() {
                    return Err(ToolError(
                        "to: goes with `workflow` (a post), not `file`".into(),
                    ));
                }
                Ok(Action::Start {
                    file: file.to_owned(),
                    params,
                    tag: given(&self.tag).map(Param::parse),
                    sha256: None,
                })
            }
            (None, Some(workflow)) => {
                if self.tag.is_some() {
                    return Err(ToolError(
                        "tag: goes with `file` (a start), not `workflow`".into(),
                    ));
                }
                Ok(Action::Post {
                    workflow: workflow.to_owned(),
                    to: given(&self.to).map(|t| t.trim_start_matches('@').to_owned()),
                    params,
                })
            }
            _ => Err(ToolError(
                "give `file` (a workflow YAML each delivery starts) or `workflow` (an instance \
                 whose channel it posts in), not both"
                    .into(),
            )),
        }
    }
}

#[tool_router(router = hook_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Take events signed with `secret` at POST /hooks/<`name`>: each starts `file` (`params`,
    /// `tag` from the payload: "$.a.b") or posts in `workflow` (to `to`). `delete` removes it.
    #[tool(
        title = "Set a hook",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = true
        )
    )]
    async fn hook_set(
        &self,
        Parameters(a): Parameters<HookSetArgs>,
    ) -> Result<Json<HookOut>, ToolError> {
        let hooks = &self.kernel.hooks;
        if a.delete {
            let others = [&a.secret, &a.file, &a.workflow, &a.to, &a.tag];
            if others.iter().any(|o| o.is_some()) || a.params.is_some() || a.rate.is_some() {
                return Err(ToolError(
                    "delete: true removes the hook; give only `name` with it".into(),
                ));
            }
            return Ok(Json(HookOut {
                hook: None,
                path: None,
                deleted: Some(hooks.hook_delete(a.name.trim()).await?),
            }));
        }
        let Some(secret) = a.secret.clone() else {
            return Err(ToolError(
                "secret: required; make one with `openssl rand -hex 32` and give the sender the same"
                    .into(),
            ));
        };
        let name = a.name.trim().to_owned();
        let hook = hooks
            .hook_set(NewHook {
                name: name.clone(),
                secret,
                action: a.action()?,
                rate: a.rate,
            })
            .await?;
        Ok(Json(HookOut {
            hook: Some(hook),
            path: Some(format!("/hooks/{name}")),
            deleted: None,
        }))
    }
}

/// Its secret is never printed, not even in a log.
impl std::fmt::Debug for HookSetArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookSetArgs")
            .field("name", &self.name)
            .field("secret", &"<set>")
            .finish_non_exhaustive()
    }
}
