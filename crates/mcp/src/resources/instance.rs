//! Reading an instance's resources: its channel, status, documents, and each
//! agent's info, inbox and branch.

use super::{JSON, channel_markdown, decode, internal, may_see_agent, mime_of, unknown_resource};
use kernel::{Caller, Kernel, Scope};
use rmcp::ErrorData as McpError;
use rmcp::model::{ReadResourceResult, ResourceContents};

/// `uri`, a resource of the instance `w` (`what` is the rest of its path).
pub(super) async fn read(
    kernel: &Kernel,
    caller: &Caller,
    uri: &str,
    w: &str,
    what: &[&str],
) -> Result<ReadResourceResult, McpError> {
    let unknown = || unknown_resource(uri);
    let text = |body: String, mime: &str| {
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(body, uri).with_mime_type(mime),
        ]))
    };
    let json = |v: serde_json::Result<String>| text(v.map_err(|e| internal(e.to_string()))?, JSON);
    // An agent outside its instance, or an instance that does not exist: unknown.
    let scope = kernel
        .registry()
        .scope(caller, Some(w))
        .await
        .map_err(|_| unknown())?;
    match what {
        ["channel"] => {
            let r = kernel
                .messaging()
                .channel_read(&scope, None, Some(50))
                .await
                .map_err(internal)?;
            text(channel_markdown(w, &r.messages), "text/markdown")
        }
        ["status"] => {
            let r = kernel
                .workflows()
                .workflow_status(w)
                .await
                .map_err(internal)?;
            json(serde_json::to_string_pretty(&r))
        }
        ["feedback"] => {
            let all = domain::feedback::KEEP_PER_INSTANCE as usize;
            let r = kernel
                .feedback_summary(caller, w, all)
                .await
                .map_err(internal)?;
            json(serde_json::to_string_pretty(&r))
        }
        ["board"] => {
            let r = kernel.tasks().board_view(&scope).await.map_err(internal)?;
            json(serde_json::to_string_pretty(&r))
        }
        ["documents", file] => {
            let file = decode(file).ok_or_else(unknown)?;
            let d = kernel.context().doc_read(&scope, Some(&file)).await;
            match d {
                Ok(d) if d.exists => text(d.content, mime_of(&file)),
                _ => Err(unknown()),
            }
        }
        ["agents", agent, "diff"] => {
            let args = kernel::runtime::worktrees::DiffArgs {
                agent,
                against: None,
                file: None,
                content: false,
                max_bytes: None,
            };
            let r = kernel
                .branch_diff(&scope, args)
                .await
                .map_err(|_| unknown())?;
            json(serde_json::to_string_pretty(&r))
        }
        ["agents", agent, rest @ ..] if may_see_agent(caller, agent) => {
            let target = format!("{agent}{w}");
            match rest {
                [] => {
                    let r = kernel.agent_info(&target).await.map_err(|_| unknown())?;
                    json(serde_json::to_string_pretty(&r))
                }
                ["inbox"] => {
                    let info = kernel.agent_get(&target).await.map_err(|_| unknown())?;
                    let as_agent = Scope {
                        me: info.view.name,
                        lead: false,
                        run_id: None,
                        ..scope
                    };
                    let r = kernel
                        .messaging()
                        .inbox_peek(&as_agent, 50)
                        .await
                        .map_err(internal)?;
                    json(serde_json::to_string_pretty(&r))
                }
                _ => Err(unknown()),
            }
        }
        _ => Err(unknown()),
    }
}
