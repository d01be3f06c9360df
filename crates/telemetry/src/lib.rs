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
//! `TRACEPARENT` (Claude Code, Codex).

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

pub use opentelemetry::trace::{FutureExt, SpanKind};
pub use opentelemetry::{Context, KeyValue, Value};

/// The variables a run's context travels in to a subprocess (the OpenTelemetry
/// convention for environment carriers).
pub const TRACEPARENT_ENV: &str = "TRACEPARENT";
pub const TRACESTATE_ENV: &str = "TRACESTATE";
/// The base URL of an OTLP/HTTP receiver (`/v1/traces` is added).
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// How long exporting what is left may take when the process ends.
const FLUSH: Duration = Duration::from_secs(3);

static TRACER: OnceLock<SdkTracer> = OnceLock::new();
/// The endpoint given by flag, which the process's subprocesses are told.
static FLAG_ENDPOINT: OnceLock<String> = OnceLock::new();

/// Exports what is left when dropped: keep it until the process ends.
pub struct Guard(SdkTracerProvider);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Err(e) = self.0.shutdown_with_timeout(FLUSH) {
            tracing::warn!("traces: the last spans were not exported: {e}");
        }
    }
}

fn set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.trim().is_empty())
}

/// Starts exporting spans as `service` when an endpoint is set (`flag`, else the
/// environment); `None` (and nothing running) otherwise, or when
/// `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. Once per process.
pub fn init(service: &'static str, flag: Option<&str>) -> Option<Guard> {
    let off = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
        || std::env::var("OTEL_TRACES_EXPORTER").is_ok_and(|v| v.trim() == "none");
    let flag = flag.map(str::trim).filter(|f| !f.is_empty());
    if off || (flag.is_none() && !set(ENDPOINT_ENV) && !set(TRACES_ENDPOINT_ENV)) {
        return None;
    }
    let effective = flag.map(str::to_owned).or_else(|| {
        [TRACES_ENDPOINT_ENV, ENDPOINT_ENV]
            .into_iter()
            .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
    });
    if effective.is_some_and(|e| e.trim_start().starts_with("https://")) {
        tracing::warn!(
            "traces are off: the OTLP exporter carries no TLS of its own; point it at http:// (a local \
             OpenTelemetry collector that forwards over https)"
        );
        return None;
    }
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary);
    if let Some(base) = flag {
        exporter = exporter.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')));
        let _ = FLAG_ENDPOINT.set(base.to_owned());
    }
    let exporter = match exporter.build() {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!("traces are off: the OTLP exporter cannot be made: {e}");
            return None;
        }
    };
    let mut resource = opentelemetry_sdk::Resource::builder()
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if !set("OTEL_SERVICE_NAME") {
        resource = resource.with_service_name(service);
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    if TRACER.set(provider.tracer("agent-worker")).is_err() {
        return None;
    }
    Some(Guard(provider))
}

/// Whether spans are exported.
pub fn enabled() -> bool {
    TRACER.get().is_some()
}

/// The endpoint given by flag, for subprocesses (which read the environment).
pub fn flag_endpoint() -> Option<&'static str> {
    FLAG_ENDPOINT.get().map(String::as_str)
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

/// The current context, when traces are exported and it is in a span.
pub fn current_span() -> Option<Context> {
    if !enabled() {
        return None;
    }
    let cx = Context::current();
    cx.span().span_context().is_valid().then_some(cx)
}

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
