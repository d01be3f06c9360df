//! A span for each MCP request the server serves, when traces are exported:
//! named as the Python SDK names them (`tools/call agent_ask`), continuing the
//! client's context from `_meta` (`traceparent`, `tracestate`: SEP-414), else
//! from the HTTP headers of that name (Claude Code sends those), else a new
//! trace. The work runs in the span's context, so a run it starts nests under it
//! (a run an agent's request starts is the root of a trace linked to it).

use super::caller;
use kernel::Caller;
use rmcp::{ErrorData as McpError, RoleServer, service::RequestContext};
use telemetry::{FutureExt, KeyValue, Span, SpanKind};

/// The request's span: `None` when traces are not exported.
pub(crate) fn start(
    ctx: &RequestContext<RoleServer>,
    method: &'static str,
    name: Option<&str>,
) -> Option<Span> {
    if !telemetry::enabled() {
        return None;
    }
    let headers = ctx
        .extensions
        .get::<::http::request::Parts>()
        .map(|p| &p.headers);
    let header = |k: &str| headers.and_then(|h| h.get(k)).and_then(|v| v.to_str().ok());
    let parent = telemetry::remote(ctx.meta.get_traceparent(), ctx.meta.get_tracestate())
        .or_else(|| telemetry::remote(header("traceparent"), header("tracestate")))
        .unwrap_or_default();
    let caller = caller(ctx);
    let who = match &caller {
        Ok(Caller::Lead) => "lead".to_owned(),
        Ok(Caller::Agent(a)) => format!("{}@{}:{}", a.name, a.workflow.name, a.workflow.tag),
        Err(_) => "unauthenticated".to_owned(),
    };
    let mut attributes = vec![
        KeyValue::new("mcp.method.name", method),
        KeyValue::new("jsonrpc.request.id", format!("{}", ctx.id)),
        KeyValue::new("agent_worker.caller", who),
    ];
    if let Some(v) = ctx.protocol_version() {
        attributes.push(KeyValue::new("mcp.protocol.version", v.to_string()));
    }
    let span_name = match name {
        Some(n) => {
            if method == "tools/call" {
                attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
                attributes.push(KeyValue::new("gen_ai.tool.name", n.to_owned()));
            }
            format!("{method} {n}")
        }
        None => method.to_owned(),
    };
    let span = Span::start(span_name, SpanKind::Server, Some(&parent), attributes)?;
    // A run an agent's request sets off (a message it sends wakes one) starts a
    // trace of its own, linked to this span.
    Some(match caller {
        Ok(Caller::Agent(_)) => span.from_agent(),
        _ => span,
    })
}

/// Runs `work` in `span`'s context and ends the span with its outcome; a
/// request cancelled or dropped before its end ends its span as cancelled.
pub(crate) async fn run<T>(
    span: Option<Span>,
    work: impl Future<Output = Result<T, McpError>>,
) -> Result<T, McpError> {
    let Some(span) = span else {
        return work.await;
    };
    let mut open = Open(Some(span.clone()));
    let r = work.with_context(span.context().clone()).await;
    open.0 = None;
    if let Err(e) = &r {
        span.set("error.type", e.code.0.to_string());
        span.set("rpc.response.status_code", e.code.0.to_string());
        span.fail(domain::redact::shown(&e.message));
    }
    span.end();
    r
}

/// A request's span while its work runs: if the work is dropped (the request
/// cancelled, the client gone), the span ends saying so.
struct Open(Option<Span>);

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(span) = self.0.take() {
            span.set("error.type", "cancelled");
            span.fail("cancelled before it ended");
            span.end();
        }
    }
}
