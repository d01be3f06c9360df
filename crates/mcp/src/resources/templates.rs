//! The resource templates every client can fill in.

use super::JSON;
use kernel::Caller;
use rmcp::model::ResourceTemplate;

/// The templates every client can fill in (what the caller may read of them is
/// decided when it reads).
pub fn templates(caller: &Caller) -> Vec<ResourceTemplate> {
    let t = |uri: &str, name: &str, description: &str, mime: &str| {
        ResourceTemplate::new(uri, name)
            .with_description(description)
            .with_mime_type(mime)
    };
    let mut v = vec![
        t(
            "agent-worker://workflows/{name}/{tag}/channel",
            "channel",
            "A workflow instance's channel: the latest 50 messages you may see.",
            "text/markdown",
        ),
        t(
            "agent-worker://workflows/{name}/{tag}/status",
            "status",
            "A workflow instance's status, agents, runs and usage (workflow_status).",
            JSON,
        ),
        t(
            "agent-worker://workflows/{name}/{tag}/feedback",
            "feedback",
            "What the instance's members reported about their tools and skills (my_feedback).",
            JSON,
        ),
        t(
            "agent-worker://workflows/{name}/{tag}/board",
            "board",
            "A workflow instance's task board: counts by state and its tasks (task_list).",
            JSON,
        ),
        t(
            "agent-worker://workflows/{name}/{tag}/documents/{+file}",
            "document",
            "A document of the instance.",
            "text/markdown",
        ),
        t(
            "agent-worker://workflows/{name}/{tag}/agents/{agent}",
            "agent",
            "An agent: configuration, state, inbox counts, recent runs (agent_info).",
            JSON,
        ),
        t(
            "agent-worker://workflows/{name}/{tag}/agents/{agent}/inbox",
            "inbox",
            "An agent's unacknowledged messages (looking does not mark them read).",
            JSON,
        ),
        t(
            "agent-worker://workflows/{name}/{tag}/agents/{agent}/diff",
            "diff",
            "A worktree agent's branch against the one it was made from: files, counts, patch \
             (branch_diff); updated at each of its commits.",
            JSON,
        ),
        t(
            "agent-worker://resources/{id}",
            "resource",
            "A content-addressed resource (resource_create).",
            "text/plain",
        ),
    ];
    if caller.is_lead() {
        v.push(t(
            "agent-worker://runs/{run_id}",
            "run",
            "One run: trigger, status, final text, error, stderr tail, usage, denials.",
            JSON,
        ));
        v.push(t(
            "agent-worker://orgs/{name}",
            "organisation",
            "An organisation: its members, the instances run within it, its contracts and its \
             channel's URI.",
            JSON,
        ));
    }
    v
}
