//! Traces: OpenTelemetry spans, exported over OTLP/HTTP (protobuf) when an
//! endpoint is set (`--otlp-endpoint`, `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), and nothing at all otherwise: without
//! an endpoint no exporter, thread or span exists, and every [`Span::start`] is one
//! load of an empty cell.
//!
//! The kernel makes a span of every MCP request (continuing the client's
//! `traceparent` from `_meta`) and of every run; a run's context reaches its worker
//! as `TRACEPARENT`/`TRACESTATE` ([`Span::carrier`]), and the worker's spans (the
//! prompt, the backend's process, each MCP call back, whose `_meta` carries the
//! context on) nest under it, as do a CLI's own spans when it continues
//! `TRACEPARENT` (Claude Code, Codex). A run an agent's request set off (its
//! message woke it) is the root of a trace of its own, linked to that request
//! ([`Span::caused`]), so a workflow is linked traces of a few levels each.
//!
//! The exporter's settings are the kernel's: the batch processor's `OTEL_BSP_*`
//! within bounds (`settings`), and a worker never reads its agent's `OTEL_*`
//! ([`agent_env`]). Every span names its host and its process
//! (`service.instance.id`).

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

pub mod agent_env;
mod settings;

pub use opentelemetry::trace::{FutureExt, SpanKind};
pub use opentelemetry::{Context, KeyValue, Value};

/// The variables a run's context travels in to a subprocess (the OpenTelemetry
/// convention for environment carriers).
pub const TRACEPARENT_ENV: &str = "TRACEPARENT";
pub const TRACESTATE_ENV: &str = "TRACESTATE";
/// The base URL of an OTLP/HTTP receiver (`/v1/traces` is added).
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";

static TRACER: OnceLock<SdkTracer> = OnceLock::new();
/// Where this process's spans go.
static TRACES_URL: OnceLock<String> = OnceLock::new();

/// Exports what is left when dropped (within its flush time): keep it until the
/// process ends.
pub struct Guard(SdkTracerProvider, Duration);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Err(e) = self.0.shutdown_with_timeout(self.1) {
            tracing::warn!("traces: the last spans were not exported: {e}");
        }
    }
}

fn set(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The variable a kernel hands its workers the exact traces URL in: a worker
/// exports when, and only when, its kernel does (an agent's own `OTEL_*`
/// variables are for its CLI).
pub const WORKER_ENV: &str = "AGENT_WORKER_TRACES";
/// How long one export may take (a slow collector never holds a run's end long).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(2);

/// Where a kernel's traces go, as the OTLP/HTTP traces URL: `flag` (a base URL:
/// `/v1/traces` is added), else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (as is), else
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL); none when `OTEL_SDK_DISABLED=true`
/// or `OTEL_TRACES_EXPORTER=none`, or for an `https://` endpoint (refused with a
/// warning: the exporter carries no TLS of its own).
pub fn configured(flag: Option<&str>) -> Option<String> {
    let off = set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none");
    if off {
        return None;
    }
    let base = |b: &str| format!("{}/v1/traces", b.trim().trim_end_matches('/'));
    let url = match flag.map(str::trim).filter(|f| !f.is_empty()) {
        Some(f) => base(f),
        None => set(TRACES_ENDPOINT_ENV)
            .map(|u| u.trim().to_owned())
            .or_else(|| set(ENDPOINT_ENV).map(|b| base(&b)))?,
    };
    if url.to_ascii_lowercase().starts_with("https://") {
        tracing::warn!(
            "traces are off: the OTLP exporter carries no TLS of its own; point it at http:// (a local \
             OpenTelemetry collector that forwards over https)"
        );
        return None;
    }
    Some(url)
}

/// Starts exporting spans as `service` to `traces_url` (see [`configured`]);
/// what is left is exported within `flush` when the guard drops. Once per
/// process. An error when the exporter cannot be made. An `OTEL_BSP_*` setting
/// out of its bounds is used at the nearest bound, with a warning.
pub fn init(service: &'static str, traces_url: &str, flush: Duration) -> Result<Guard, String> {
    let (batch, warnings) = settings::batch(set);
    for w in warnings {
        tracing::warn!("traces: {w}");
    }
    start(service, traces_url, flush, batch)
}

fn start(
    service: &'static str,
    traces_url: &str,
    flush: Duration,
    batch: opentelemetry_sdk::trace::BatchConfig,
) -> Result<Guard, String> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(traces_url)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| format!("the OTLP exporter to {traces_url} cannot be made: {e}"))?;
    let processor = opentelemetry_sdk::trace::BatchSpanProcessor::builder(exporter)
        .with_batch_config(batch)
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(settings::resource(service))
        .build();
    if TRACER.set(provider.tracer("agent-worker")).is_err() {
        return Err("traces were started already".into());
    }
    let _ = TRACES_URL.set(traces_url.to_owned());
    Ok(Guard(provider, flush))
}

/// A worker's traces: to where its kernel said ([`WORKER_ENV`]), else none. Its
/// `OTEL_*` environment is its kernel's (the agent's is held: [`agent_env`]),
/// bounded as the kernel's was (which warned already).
pub fn init_worker(flush: Duration) -> Option<Guard> {
    let url = set(WORKER_ENV)?;
    start(
        "agent-worker-worker",
        url.trim(),
        flush,
        settings::batch(set).0,
    )
    .map_err(|e| tracing::warn!("traces are off: {e}"))
    .ok()
}

/// Where this process exports traces, for its workers ([`WORKER_ENV`]).
pub fn traces_url() -> Option<&'static str> {
    TRACES_URL.get().map(String::as_str)
}

/// Whether spans are exported.
pub fn enabled() -> bool {
    TRACER.get().is_some()
}

/// The context a caller sent (W3C `traceparent`, `tracestate`): `None` when
/// there is none, it is malformed, or nothing is exported.
pub fn remote(traceparent: Option<&str>, tracestate: Option<&str>) -> Option<Context> {
    if !enabled() {
        return None;
    }
    let mut carrier = HashMap::new();
    carrier.insert("traceparent".to_owned(), traceparent?.trim().to_owned());
    if let Some(s) = tracestate {
        carrier.insert("tracestate".to_owned(), s.trim().to_owned());
    }
    let cx = TraceContextPropagator::new().extract(&carrier);
    cx.span().span_context().is_valid().then_some(cx)
}

/// The context the process was started in (`TRACEPARENT`, `TRACESTATE`).
pub fn from_env() -> Option<Context> {
    remote(
        std::env::var(TRACEPARENT_ENV).ok().as_deref(),
        std::env::var(TRACESTATE_ENV).ok().as_deref(),
    )
}

/// The current span as a parent for later work (a context naming it, not
/// holding it: keeping this never keeps the span from ending), when traces are
/// exported and a span is current.
pub fn current_parent() -> Option<Context> {
    if !enabled() {
        return None;
    }
    let cx = Context::current();
    let sc = cx.span().span_context().clone();
    let parent = Context::new().with_remote_span_context(sc.clone());
    let parent = match cx.get::<FromAgent>() {
        Some(_) => parent.with_value(FromAgent),
        None => parent,
    };
    sc.is_valid().then_some(parent)
}

/// Marks a context as a request an agent made (from its run): work it sets off
/// starts a trace of its own ([`Span::caused`]).
#[derive(Clone, Copy, Debug)]
struct FromAgent;

/// `traceparent` and (when not empty) `tracestate` of the current context, for
/// a subprocess to continue (nothing when no span is current).
pub fn current_carrier() -> Vec<(&'static str, String)> {
    if !enabled() {
        return Vec::new();
    }
    carrier_of(&Context::current())
}

fn carrier_of(cx: &Context) -> Vec<(&'static str, String)> {
    if !cx.span().span_context().is_valid() {
        return Vec::new();
    }
    let mut map = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut map);
    ["traceparent", "tracestate"]
        .into_iter()
        .filter_map(|k| map.remove(k).filter(|v| !v.is_empty()).map(|v| (k, v)))
        .collect()
}

/// Sets an attribute on the span of the current context (no span, no effect).
pub fn note(key: &'static str, value: impl Into<Value>) {
    if enabled() {
        Context::current()
            .span()
            .set_attribute(KeyValue::new(key, value));
    }
}

/// A span in progress. It ends with [`Span::end`], or when its last clone (and
/// every context made from it) is dropped.
#[derive(Clone, Debug)]
pub struct Span(Context);

impl Span {
    /// Starts a span under `parent` (the current context when `None`): `None`
    /// when nothing is exported.
    pub fn start(
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        parent: Option<&Context>,
        attributes: Vec<KeyValue>,
    ) -> Option<Span> {
        let tracer = TRACER.get()?;
        let current;
        let parent = match parent {
            Some(p) => p,
            None => {
                current = Context::current();
                &current
            }
        };
        let span = tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(tracer, parent);
        Some(Span(parent.with_span(span)))
    }

    /// Starts a span for work `cause` set off (the current context when `None`):
    /// under it, or, when the cause is a request an agent made ([`Span::from_agent`]),
    /// as the root of a trace of its own with a link to it. So runs that wake each
    /// other are a chain of linked traces, not one trace a level deeper per run.
    pub fn caused(
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        cause: Option<&Context>,
        attributes: Vec<KeyValue>,
    ) -> Option<Span> {
        let tracer = TRACER.get()?;
        let current;
        let cause = match cause {
            Some(c) => c,
            None => {
                current = Context::current();
                &current
            }
        };
        let sc = cause.span().span_context().clone();
        if cause.get::<FromAgent>().is_none() || !sc.is_valid() {
            return Span::start(name, kind, Some(cause), attributes);
        }
        let root = Context::new();
        let span = tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .with_links(vec![opentelemetry::trace::Link::with_context(sc)])
            .start_with_context(tracer, &root);
        Some(Span(root.with_span(span)))
    }

    /// This span, marked as a request an agent made: what it sets off starts a
    /// trace of its own, linked to it ([`Span::caused`]).
    pub fn from_agent(self) -> Span {
        Span(self.0.with_value(FromAgent))
    }

    /// The context to run work in (`FutureExt::with_context`) so that its spans
    /// nest under this one.
    pub fn context(&self) -> &Context {
        &self.0
    }

    pub fn set(&self, key: &'static str, value: impl Into<Value>) {
        self.0.span().set_attribute(KeyValue::new(key, value));
    }

    /// Marks the span failed, with why.
    pub fn fail(&self, why: impl Into<Cow<'static, str>>) {
        self.0
            .span()
            .set_status(opentelemetry::trace::Status::error(why));
    }

    /// Its trace's id, 32 hex digits.
    pub fn trace_id(&self) -> String {
        self.0.span().span_context().trace_id().to_string()
    }

    /// `traceparent` and (when not empty) `tracestate` naming this span as parent.
    pub fn carrier(&self) -> Vec<(&'static str, String)> {
        carrier_of(&self.0)
    }

    pub fn end(&self) {
        self.0.span().end();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn without_an_endpoint_nothing_is_made() {
        // The test process sets no endpoint: no tracer, no span, no context.
        assert!(!super::enabled());
        assert!(super::Span::start("x", super::SpanKind::Internal, None, Vec::new()).is_none());
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert!(super::remote(Some(tp), None).is_none());
    }
}
