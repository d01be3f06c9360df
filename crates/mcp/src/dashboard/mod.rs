//! The team dashboard: an MCP App (the `io.modelcontextprotocol/ui` extension,
//! SEP-1865) that shows a workflow instance live inside the host.
//!
//! It is offered only to a lead whose client declares the extension with our MIME
//! type: such a client lists the `ui://` resource, sees `_meta.ui.resourceUri` on
//! the tools that open it (among them `dashboard_open`, which opens it under its
//! own title), and may call the app-only tool the app polls with
//! (`dashboard_watch`, visibility `["app"]`). Every other client gets exactly
//! what it got before. The person's clicks reach the server as the host's tool
//! calls (approval_decide, team_doc_read), so the rules that govern the lead
//! govern the app.
//!
//! The page is built from `crates/mcp/ui/` with the ext-apps SDK into one
//! self-contained file that the binary embeds; `cargo build` never needs Node.

mod board;
mod tool;
mod view;

use kernel::Caller;
use rmcp::RoleServer;
use rmcp::model::{MetaObject, ReadResourceResult, Resource, ResourceContents, Tool};
use rmcp::service::RequestContext;
use serde_json::json;

pub use view::{Snapshot, WatchArgs};

/// The extension's identifier, as clients declare it.
pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The MIME type of an MCP App's HTML.
pub const MIME: &str = "text/html;profile=mcp-app";
/// The dashboard's resource.
pub const URI: &str = "ui://agent-worker/dashboard";
/// The page, built by `crates/mcp/ui/build` (committed; CI rebuilds and compares).
pub const HTML: &str = include_str!("../../ui/dist/dashboard.html");
/// Tools whose result the dashboard shows: a host renders it beside them.
const OPENED_BY: [&str; 5] = [
    tool::OPEN,
    "workflow_run",
    "workflow_status",
    "agent_ask",
    "workflow_list",
];
/// Tools that exist only for a lead whose host renders the dashboard.
pub const HOSTED: [&str; 2] = [tool::OPEN, tool::WATCH];
/// Of those, the tools only the app calls (the model never sees them).
const APP_ONLY: [&str; 1] = [tool::WATCH];

/// Whether this request's client shows MCP Apps of our MIME type: the extension's
/// settings list it in `mimeTypes`, which its text makes required (a declaration
/// without it names no type this server serves).
pub fn declared(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .and_then(|caps| caps.extensions?.remove(EXTENSION))
        .and_then(|settings| {
            settings
                .get("mimeTypes")
                .and_then(|m| m.as_array())
                .cloned()
        })
        .is_some_and(|types| types.iter().any(|t| t.as_str() == Some(MIME)))
}

/// Whether the dashboard is offered to this request: the lead, from a host that
/// renders it.
pub fn offered(caller: &Caller, ctx: &RequestContext<RoleServer>) -> bool {
    caller.is_lead() && declared(ctx)
}

/// The lead's tools as a host that renders apps sees them: the tools that open
/// the dashboard say so, and the app-only tools are listed for the app.
pub fn decorate(tools: &[Tool]) -> Vec<Tool> {
    tools
        .iter()
        .cloned()
        .map(|mut t| {
            let name = t.name.as_ref();
            if OPENED_BY.contains(&name) {
                t.meta = Some(ui_meta(json!({ "resourceUri": URI })));
            } else if APP_ONLY.contains(&name) {
                // No resourceUri: the tool opens nothing (a host would list it as
                // a second app).
                t.meta = Some(ui_meta(json!({ "visibility": ["app"] })));
            }
            t
        })
        .collect()
}

fn ui_meta(ui: serde_json::Value) -> MetaObject {
    let mut m = MetaObject::default();
    m.0.insert("ui".into(), ui);
    m
}

/// The page's own `_meta.ui`: a content security policy that allows no outside
/// domain (the page loads nothing and connects nowhere; it talks to the host
/// only), and a border, since it is a panel of its own.
fn resource_meta() -> MetaObject {
    ui_meta(json!({
        "csp": {
            "connectDomains": [],
            "resourceDomains": [],
            "frameDomains": [],
            "baseUriDomains": []
        },
        "prefersBorder": true
    }))
}

/// The dashboard as resources/list shows it.
pub fn listed() -> Resource {
    let mut r = Resource::new(URI, "dashboard")
        .with_title("Team dashboard")
        .with_description(
            "Live view of a workflow instance: channel, task board, agents and runs, approvals, documents",
        );
    r.mime_type = Some(MIME.into());
    r.size = Some(HTML.len() as u64);
    r.meta = Some(resource_meta());
    r
}

/// The dashboard as resources/read returns it.
pub fn read() -> ReadResourceResult {
    ReadResourceResult::new(vec![
        ResourceContents::text(HTML, URI)
            .with_mime_type(MIME)
            .with_meta(resource_meta()),
    ])
}
