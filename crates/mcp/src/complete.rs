//! completion/complete: values for prompt arguments and resource-template
//! variables, as far as the caller may see (an agent: its own instance and name).
//!
//! | reference | argument | values |
//! |---|---|---|
//! | prompt `start-team` | `backends` | the backends |
//! | a `agent-worker://workflows/…` template | `name`, `tag` | instances (`tag` of the `name` already chosen) |
//! | the same | `agent` | the instance's agents |
//! | the same | `file` | the instance's documents |

use domain::names::WorkflowRef;
use kernel::{Caller, Kernel};
use rmcp::ErrorData as McpError;
use rmcp::model::{CompleteRequestParams, CompleteResult, CompletionInfo, Reference};

pub async fn complete(
    kernel: &Kernel,
    caller: &Caller,
    request: &CompleteRequestParams,
) -> Result<CompleteResult, McpError> {
    let arg = &request.argument;
    let given = |k: &str| {
        request
            .context
            .as_ref()
            .and_then(|c| c.arguments.as_ref())
            .and_then(|a| a.get(k))
            .cloned()
    };
    let candidates: Vec<String> = match &request.r#ref {
        Reference::Prompt(p)
            if caller.is_lead() && p.name == "start-team" && arg.name == "backends" =>
        {
            kernel::registry::BACKENDS
                .iter()
                .map(|b| b.to_string())
                .collect()
        }
        Reference::Prompt(_) => Vec::new(),
        Reference::Resource(r) if r.uri.starts_with("agent-worker://workflows/") => {
            let instances = super::resources::instances(kernel, caller).await?;
            let chosen = || -> Option<WorkflowRef> {
                let name = given("name")?;
                let tag = given("tag").unwrap_or_else(|| "main".into());
                instances
                    .iter()
                    .find(|w| w.name == name && w.tag == tag)
                    .cloned()
            };
            match arg.name.as_str() {
                "name" => {
                    let mut v: Vec<String> = instances.iter().map(|w| w.name.clone()).collect();
                    v.dedup();
                    v
                }
                "tag" => instances
                    .iter()
                    .filter(|w| given("name").is_none_or(|n| n == w.name))
                    .map(|w| w.tag.clone())
                    .collect(),
                "agent" => match chosen() {
                    Some(w) => super::resources::agents(kernel, caller, &w).await?,
                    None => Vec::new(),
                },
                "file" => match chosen() {
                    Some(w) => {
                        let scope = kernel
                            .registry()
                            .scope(caller, Some(&w.to_string()))
                            .await
                            .map_err(internal)?;
                        kernel
                            .context()
                            .doc_list(&scope)
                            .await
                            .map(|l| l.files.into_iter().map(|f| f.file).collect())
                            .unwrap_or_default()
                    }
                    None => Vec::new(),
                },
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    };
    let prefix = arg.value.to_lowercase();
    let mut values: Vec<String> = candidates
        .into_iter()
        .filter(|c| c.to_lowercase().starts_with(&prefix))
        .collect();
    values.sort();
    values.dedup();
    let total = values.len();
    values.truncate(CompletionInfo::MAX_VALUES);
    let info = CompletionInfo::with_pagination(
        values,
        Some(total as u32),
        total > CompletionInfo::MAX_VALUES,
    )
    .map_err(internal)?;
    Ok(CompleteResult::new(info))
}

fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(e.to_string(), None)
}
