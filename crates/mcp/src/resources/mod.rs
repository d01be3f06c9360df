//! MCP resources: the team's state to read without a tool call, per identity.
//!
//! | URI | what | who |
//! |---|---|---|
//! | `agent-worker://workflows/{name}/{tag}/channel` | the latest 50 messages the caller may see (markdown) | the lead; an agent, its own instance |
//! | `agent-worker://workflows/{name}/{tag}/status` | workflow_status (JSON) | the same |
//! | `agent-worker://workflows/{name}/{tag}/documents/{+file}` | a document, with its MIME type | the same |
//! | `agent-worker://workflows/{name}/{tag}/feedback` | what members reported about their tools and skills (my_feedback), newest first (JSON; listed once there is some) | the same |
//! | `agent-worker://workflows/{name}/{tag}/board` | the task board: counts by state and every task (task_list's shape, JSON; listed once it has a task) | the same |
//! | `agent-worker://workflows/{name}/{tag}/agents/{agent}` | agent_info (JSON) | the lead; an agent, itself |
//! | `agent-worker://workflows/{name}/{tag}/agents/{agent}/inbox` | the inbox, looked at, not read (JSON) | the same |
//! | `agent-worker://workflows/{name}/{tag}/agents/{agent}/diff` | a worktree agent's branch (branch_diff, JSON) | the lead; its teammates |
//! | `agent-worker://runs/{run_id}` | one run: status, final text, error, stderr tail, usage (JSON) | the lead |
//! | `agent-worker://resources/{id}` | a content-addressed resource (resource_create) | everyone |
//! | `agent-worker://backends` | backend_list (JSON) | the lead |
//! | `agent-worker://contracts` | contract_list and approval_list together (JSON) | the lead |
//! | `agent-worker://nodes` | the nodes (kernels) of this store: alive, agents, runs (JSON) | the lead |
//! | `agent-worker://orgs/{name}` | an organisation: members, instances, its contracts, its channel's URI (JSON) | the lead |
//!
//! An organisation's channel and documents are its instance's,
//! `agent-worker://workflows/org.{name}/main/...`: the lead's, and its members'
//! (an agent of an instance run within it whose name is a member's).
//!
//! What a caller may not see reads as unknown, like what does not exist: an agent
//! cannot probe for other instances.

mod instance;
mod templates;

pub use templates::templates;

use domain::names::WorkflowRef;
use kernel::{Caller, Kernel};
use rmcp::ErrorData as McpError;
use rmcp::model::{ReadResourceResult, Resource, ResourceContents};
use std::collections::{BTreeMap, HashMap};

const SCHEME: &str = "agent-worker://";
const JSON: &str = "application/json";

fn resource(uri: String, name: String, description: &str, mime: &str) -> Resource {
    Resource::new(uri, name)
        .with_description(description)
        .with_mime_type(mime)
}

fn base(w: &WorkflowRef) -> String {
    format!("{SCHEME}workflows/{}/{}", w.name, w.tag)
}

/// The workflow instances the caller may see: every one for the lead, its own for
/// an agent.
pub async fn instances(kernel: &Kernel, caller: &Caller) -> Result<Vec<WorkflowRef>, McpError> {
    Ok(match caller {
        Caller::Lead => kernel
            .workflows()
            .workflow_list()
            .await
            .map_err(internal)?
            .into_iter()
            .filter_map(|w| WorkflowRef::parse(&w.workflow).ok())
            .collect(),
        Caller::Agent(a) => vec![a.workflow.clone()],
    })
}

/// The agents of an instance the caller may see: all of them for the lead, itself
/// for an agent (of that instance).
pub async fn agents(
    kernel: &Kernel,
    caller: &Caller,
    w: &WorkflowRef,
) -> Result<Vec<String>, McpError> {
    Ok(match caller {
        Caller::Lead => kernel
            .registry()
            .agent_list(Some(&w.to_string()))
            .await
            .map_err(internal)?
            .into_iter()
            .map(|a| a.name)
            .collect(),
        Caller::Agent(a) if a.workflow == *w => vec![a.name.clone()],
        Caller::Agent(_) => Vec::new(),
    })
}

/// One page of the concrete resources the caller may read, in the order of their
/// URIs, and the cursor of the next page (None: the last). The cursor is the last
/// URI given: a page starts after it, so resources added or removed between pages
/// never shift the rest (none is given twice, none skipped but the removed).
pub async fn list(
    kernel: &Kernel,
    caller: &Caller,
    cursor: Option<&str>,
) -> Result<(Vec<Resource>, Option<String>), McpError> {
    let after = cursor.map(read_cursor).transpose()?;
    let beyond = |uri: &str| after.as_deref().is_none_or(|a| uri > a);
    let mut out = Vec::new();
    // These sort before every workflows/ URI (b, c, n < w).
    if caller.is_lead() {
        out.extend(lead_resources().into_iter().filter(|r| beyond(&r.uri)));
    }
    let mut instances = instances(kernel, caller).await?;
    // No prefix is another's ('/' ends each, names have none): instances in this
    // order give their URIs in order.
    instances.sort_by_cached_key(|w| format!("{}/", base(w)));
    for w in &instances {
        if out.len() > PAGE {
            break;
        }
        let prefix = format!("{}/", base(w));
        // Every URI of this instance sorts before the cursor: nothing to read.
        if after
            .as_deref()
            .is_some_and(|a| a > prefix.as_str() && !a.starts_with(&prefix))
        {
            continue;
        }
        let mut items = instance_resources(kernel, caller, w).await?;
        items.sort_by(|a, b| a.uri.cmp(&b.uri));
        out.extend(items.into_iter().filter(|r| beyond(&r.uri)));
    }
    // The lead's skill (skill:// sorts after every agent-worker:// URI).
    let skill = lead_skill();
    if caller.is_lead() && out.len() <= PAGE && beyond(&skill.uri) {
        out.push(skill);
    }
    if out.len() <= PAGE {
        return Ok((out, None));
    }
    out.truncate(PAGE);
    let next = out.last().map(|r| format!("{CURSOR}{}", r.uri));
    Ok((out, next))
}

/// Most resources on one page of resources/list.
pub const PAGE: usize = 100;
/// What a cursor starts with (then the last URI of the page before).
const CURSOR: &str = "after:";

fn read_cursor(cursor: &str) -> Result<String, McpError> {
    cursor
        .strip_prefix(CURSOR)
        .filter(|uri| uri.starts_with(SCHEME) && uri.len() <= super::subscriptions::budget::MAX_URI)
        .map(str::to_owned)
        .ok_or_else(|| {
            let shown: String = cursor.chars().take(200).collect();
            McpError::invalid_params(
                format!(
                    "invalid cursor {shown:?}: pass the nextCursor of the previous resources/list page, \
                     or no cursor for the first page"
                ),
                None,
            )
        })
}

/// The lead's skill as a resource, for clients without the Skills extension.
fn lead_skill() -> Resource {
    resource(
        format!("skill://{}/SKILL.md", crate::skills::LEAD_SKILL),
        crate::skills::LEAD_SKILL.into(),
        "How to run teams well: patterns, the worktree and merge flow, a contracts cookbook.",
        "text/markdown",
    )
}

/// The store-wide resources only the lead lists, in URI order.
fn lead_resources() -> Vec<Resource> {
    vec![
        resource(
            format!("{SCHEME}backends"),
            "backends".into(),
            "Every backend: found, version, logged in, the fix, what each profile becomes.",
            JSON,
        ),
        resource(
            contracts_uri(),
            "contracts".into(),
            "The contracts in force (each as a sentence), the built-in guards, the latest decisions and the approvals.",
            JSON,
        ),
        resource(
            nodes_uri(),
            "nodes".into(),
            "The nodes (kernels) keeping their state in this store: which one answers, alive or not, agents leased to each, runs in progress.",
            JSON,
        ),
    ]
}

/// An instance's resources the caller may read: channel, status, each agent's
/// info and inbox (`alice@review:pr-1 info`), its documents.
async fn instance_resources(
    kernel: &Kernel,
    caller: &Caller,
    w: &WorkflowRef,
) -> Result<Vec<Resource>, McpError> {
    let mut out = vec![
        resource(
            channel_uri(w),
            format!("{w} channel"),
            "The latest 50 messages you may see.",
            "text/markdown",
        ),
        resource(
            status_uri(w),
            format!("{w} status"),
            "Status, agents, runs and usage.",
            JSON,
        ),
    ];
    let given = kernel.feedback_summary(caller, &w.to_string(), 0).await;
    if given.is_ok_and(|f| !f.is_empty()) {
        out.push(resource(
            feedback_uri(w),
            format!("{w} feedback"),
            "What its members reported about their tools and skills.",
            JSON,
        ));
    }
    let scope = kernel
        .registry()
        .scope(caller, Some(&w.to_string()))
        .await
        .map_err(internal)?;
    if kernel
        .tasks()
        .board(scope.workflow_id)
        .await
        .is_ok_and(|b| !b.is_empty())
    {
        out.push(resource(
            board_uri(w),
            format!("{w} board"),
            "The task board: counts by state and its tasks.",
            JSON,
        ));
    }
    for a in agents(kernel, caller, w).await? {
        // The instance's own `@` joins the agent's name: alice@review:pr-1.
        out.push(resource(
            agent_uri(w, &a),
            format!("{a}{w} info"),
            "Configuration, state, inbox counts, recent runs.",
            JSON,
        ));
        out.push(resource(
            inbox_uri(w, &a),
            format!("{a}{w} inbox"),
            "Unacknowledged messages.",
            JSON,
        ));
    }
    if let Ok(docs) = kernel.context().doc_list(&scope).await {
        for d in docs.files {
            out.push(resource(
                document_uri(w, &d.file),
                format!("{} {}", w, d.file),
                "A document of the instance.",
                mime_of(&d.file),
            ));
        }
    }
    Ok(out)
}

/// Whether the caller may read `uri` (without reading it): what subscriptions are
/// checked against. The error is the same "unknown resource" a read gives.
pub async fn authorize(kernel: &Kernel, caller: &Caller, uri: &str) -> Result<(), McpError> {
    authorize_with(kernel, caller, uri, &mut HashMap::new()).await
}

/// [`authorize`], remembering in `instances` which instances the caller may see
/// (for a filter naming many URIs of one instance). A URI not of this server's
/// shapes is refused before anything is looked up.
pub async fn authorize_with(
    kernel: &Kernel,
    caller: &Caller,
    uri: &str,
    instances: &mut HashMap<String, bool>,
) -> Result<(), McpError> {
    let unknown = || unknown_resource(uri);
    if uri.len() > super::subscriptions::budget::MAX_URI {
        return Err(McpError::invalid_params(
            super::subscriptions::budget::Refused::UriTooLong(uri.len()).to_string(),
            None,
        ));
    }
    let rest = uri.strip_prefix(SCHEME).ok_or_else(unknown)?;
    let parts: Vec<&str> = rest.splitn(6, '/').collect();
    match parts.as_slice() {
        ["backends"] | ["contracts"] | ["nodes"] if caller.is_lead() => Ok(()),
        ["runs", id] | ["orgs", id] if caller.is_lead() && is_token(id, 64) => Ok(()),
        ["resources", id] if is_resource_id(id) => Ok(()),
        ["workflows", name, tag, what @ ..] => {
            let key = format!("@{name}:{tag}");
            let visible = match instances.get(&key) {
                Some(v) => *v,
                None => {
                    let v = kernel.registry().scope(caller, Some(&key)).await.is_ok();
                    instances.insert(key, v);
                    v
                }
            };
            if !visible {
                return Err(unknown());
            }
            match what {
                ["channel"] | ["status"] | ["feedback"] | ["board"] => Ok(()),
                ["documents", file] if decode(file).is_some() => Ok(()),
                ["agents", agent, "diff"] if is_token(agent, 64) => Ok(()),
                ["agents", agent] | ["agents", agent, "inbox"] if may_see_agent(caller, agent) => {
                    Ok(())
                }
                _ => Err(unknown()),
            }
        }
        _ => Err(unknown()),
    }
}

/// A content-addressed resource's id: `res_` and 32 hex digits.
fn is_resource_id(id: &str) -> bool {
    id.strip_prefix("res_")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// An id of letters, digits, `-` and `_`, at most `max` long.
fn is_token(id: &str, max: usize) -> bool {
    !id.is_empty()
        && id.len() <= max
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

pub(crate) fn unknown_resource(uri: &str) -> McpError {
    McpError::resource_not_found(
        format!(
            "unknown resource {uri}: resources/list and resources/templates/list show what you may read"
        ),
        None,
    )
}

/// The URIs of an instance's parts (what a kernel event touches).
pub fn channel_uri(w: &WorkflowRef) -> String {
    format!("{}/channel", base(w))
}
pub fn status_uri(w: &WorkflowRef) -> String {
    format!("{}/status", base(w))
}
pub fn feedback_uri(w: &WorkflowRef) -> String {
    format!("{}/feedback", base(w))
}
pub fn board_uri(w: &WorkflowRef) -> String {
    format!("{}/board", base(w))
}
pub fn agent_uri(w: &WorkflowRef, agent: &str) -> String {
    format!("{}/agents/{agent}", base(w))
}
pub fn inbox_uri(w: &WorkflowRef, agent: &str) -> String {
    format!("{}/agents/{agent}/inbox", base(w))
}
pub fn diff_uri(w: &WorkflowRef, agent: &str) -> String {
    format!("{}/agents/{agent}/diff", base(w))
}
pub fn document_uri(w: &WorkflowRef, file: &str) -> String {
    format!("{}/documents/{}", base(w), encode(file))
}
pub fn run_uri(id: &str) -> String {
    format!("{SCHEME}runs/{id}")
}
pub fn contracts_uri() -> String {
    format!("{SCHEME}contracts")
}
pub fn nodes_uri() -> String {
    format!("{SCHEME}nodes")
}

/// Reads one resource as the caller.
pub async fn read(
    kernel: &Kernel,
    caller: &Caller,
    uri: &str,
) -> Result<ReadResourceResult, McpError> {
    let unknown = || unknown_resource(uri);
    let rest = uri.strip_prefix(SCHEME).ok_or_else(unknown)?;
    let parts: Vec<&str> = rest.splitn(6, '/').collect();
    let text = |body: String, mime: &str| {
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(body, uri).with_mime_type(mime),
        ]))
    };
    let json = |v: serde_json::Result<String>| text(v.map_err(|e| internal(e.to_string()))?, JSON);
    match parts.as_slice() {
        ["backends"] if caller.is_lead() => {
            let r = kernel
                .probe_backends(&[], &BTreeMap::new())
                .await
                .map_err(internal)?;
            json(serde_json::to_string_pretty(&r))
        }
        ["contracts"] if caller.is_lead() => {
            let list = kernel.contract_list(None, None).await.map_err(internal)?;
            let approvals = kernel.approval_list(caller, None).await.map_err(internal)?;
            json(serde_json::to_string_pretty(&serde_json::json!({
                "contracts": list.contracts,
                "built_in": list.built_in,
                "decisions": list.decisions,
                "approvals": approvals,
            })))
        }
        ["nodes"] if caller.is_lead() => {
            let rt = kernel.runtime();
            let nodes = rt.nodes().node_list().await.map_err(internal)?;
            json(serde_json::to_string_pretty(&serde_json::json!({
                "this": kernel.node(),
                "nodes": nodes,
            })))
        }
        ["runs", id] if caller.is_lead() => {
            let runs = kernel.runtime().workers();
            let r = runs.run_view(id).await.map_err(|_| unknown())?;
            json(serde_json::to_string_pretty(&r))
        }
        ["orgs", name] if caller.is_lead() => {
            let org = kernel
                .registry()
                .org_view(name)
                .await
                .map_err(|_| unknown())?;
            let list = kernel
                .contract_list(None, Some(name))
                .await
                .map_err(internal)?;
            let channel = org
                .channel
                .as_deref()
                .and_then(|c| WorkflowRef::parse(c).ok())
                .map(|w| channel_uri(&w));
            json(serde_json::to_string_pretty(&serde_json::json!({
                "organisation": org,
                "contracts": list.contracts,
                "channel": channel,
            })))
        }
        ["resources", id] => {
            let r = kernel
                .messaging()
                .resource_read(id)
                .await
                .map_err(|_| unknown())?;
            json(serde_json::to_string_pretty(&r))
        }
        ["workflows", name, tag, what @ ..] => {
            instance::read(kernel, caller, uri, &format!("@{name}:{tag}"), what).await
        }
        _ => Err(unknown()),
    }
}

fn may_see_agent(caller: &Caller, agent: &str) -> bool {
    match caller {
        Caller::Lead => true,
        Caller::Agent(a) => a.name.eq_ignore_ascii_case(agent),
    }
}

fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(e.to_string(), None)
}

fn channel_markdown(w: &str, messages: &[kernel::messaging::ChannelMessage]) -> String {
    let mut s = format!("# Channel {w}\n\n");
    if messages.is_empty() {
        s.push_str("(no messages yet)\n");
    }
    for m in messages {
        let to =
            m.to.as_ref()
                .map(|t| format!(" → {t} (direct)"))
                .unwrap_or_default();
        s.push_str(&format!(
            "- **{}**{to} · {} · `{}`\n  {}\n",
            m.from,
            m.created_at,
            m.id,
            m.content.replace('\n', "\n  ")
        ));
    }
    s
}

/// A document's MIME type by its extension (documents are text).
fn mime_of(file: &str) -> &'static str {
    let ext = file
        .rsplit('.')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "diff" | "patch" => "text/x-diff",
        _ => "text/plain",
    }
}

/// Percent-encodes what may not stand in a URI path (the slashes between folders stay).
fn encode(path: &str) -> String {
    let mut s = String::new();
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
