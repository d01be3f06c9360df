//! The worker: one run of one agent, as a subprocess of the kernel.
//!
//! It reads its [`RunConfig`] from `AW_RUN`, connects to the kernel's MCP endpoint
//! with the run's token, reads its inbox, the recent channel and the main document,
//! builds the prompt (the kernel never does), runs the backend, and reports progress,
//! usage and the outcome as JSON lines on stdout (see [`protocol`]). Final text stays
//! private: only the backend's own `channel_send` calls reach the channel.
//!
//! Layout: `client.rs` (MCP client), `context.rs` (what the run reads first),
//! `prompt.rs`, `classify.rs` (error classes), one file per backend: `mock.rs`,
//! `sdk/` (direct API loops), `cli/` (Claude Code, Codex, Cursor, Gemini, OpenCode).

pub mod classify;
pub mod cli;
pub mod client;
pub mod context;
pub mod hook;
pub mod mock;
pub mod probe;
pub mod prompt;
pub use domain::protocol;
pub mod sandbox;
pub mod sdk;

use domain::backends::Backend;
use protocol::{ErrorClass, Outcome, Report, RunConfig, Usage};
use std::io::Write;
use std::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// Writes reports to stdout, one line each, flushed at once (the kernel's idle
/// timer and agent_ask's progress depend on them arriving promptly).
#[derive(Default)]
pub struct Reporter {
    usage: Mutex<Usage>,
}

impl Reporter {
    pub fn send(&self, r: &Report) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", r.line());
        let _ = out.flush();
    }

    pub fn progress(&self, message: impl Into<String>) {
        let message = clip(&message.into(), 500).into_owned();
        self.send(&Report::Progress { message });
    }

    /// Adds to the run's usage and reports the new total.
    pub fn add_usage(&self, u: Usage) {
        let total = {
            let mut t = self.usage.lock().unwrap();
            t.add(u);
            *t
        };
        self.send(&Report::Usage(total));
    }

    /// Replaces the run's usage (backends that report running totals).
    pub fn set_usage(&self, u: Usage) {
        *self.usage.lock().unwrap() = u;
        self.send(&Report::Usage(u));
    }

    /// The run's usage so far.
    pub fn usage(&self) -> Usage {
        *self.usage.lock().unwrap()
    }

    pub fn session(&self, id: &str) {
        self.send(&Report::Session { id: id.to_owned() });
    }

    pub fn session_total(&self, u: Usage) {
        self.send(&Report::SessionTotal(u));
    }
}

/// The most of a run's final text that is kept (it is a private note, not a channel).
pub const FINAL_TEXT_BYTES: usize = 64 * 1024;
/// The most of an error message that is kept.
pub const ERROR_BYTES: usize = 8 * 1024;

/// `s` cut to at most `max` bytes at a character boundary, with `…` when cut.
pub fn clip(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return s.into();
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &s[..cut]).into()
}

/// Why a run failed, classified.
#[derive(Debug, Clone)]
pub struct Failure {
    pub class: ErrorClass,
    pub message: String,
}

impl Failure {
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        Self {
            class,
            message: message.into(),
        }
    }

    /// Classifies a message from a provider or CLI by its words.
    pub fn classified(message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            class: classify::classify(&message),
            message,
        }
    }
}

/// Everything a backend gets for one run.
pub struct Run<'a> {
    pub cfg: &'a RunConfig,
    pub client: &'a client::KernelClient,
    pub context: &'a context::Context,
    pub report: &'a Reporter,
    /// Cancelled when the kernel stops the run (SIGTERM): a CLI gets its own grace
    /// period and the run's workspace files are put back before the worker exits.
    pub stop: &'a CancellationToken,
}

/// The run's configuration, read before anything else (see [`read_config`]), in
/// its sandbox: call it before any thread exists, so that every thread and
/// process of the run is held by the sandbox ([`sandbox::apply`]).
pub fn configure() -> Result<RunConfig, String> {
    let cfg = read_config()?;
    if let Some(s) = &cfg.sandbox {
        let applied = sandbox::apply(s).map_err(|e| e.to_string())?;
        *sandbox::MISSING.lock().unwrap() = applied.missing;
    }
    Ok(cfg)
}

/// The worker mode's entry point, given its configuration ([`configure`]).
/// Returns the process exit code.
pub async fn main(config: Result<RunConfig, String>) -> i32 {
    let report = Reporter::default();
    // The kernel stops a run with SIGTERM to the worker's process group. Without a
    // handler the worker would die at once and leave its CLI's workspace files and
    // scratch folder behind; with one, it winds down and still reports.
    let stop = CancellationToken::new();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            let stop = stop.clone();
            tokio::spawn(async move {
                term.recv().await;
                stop.cancel();
            });
        }
        Err(e) => report.progress(format!("cannot watch for SIGTERM: {e}")),
    }
    report.send(&Report::Started);
    for m in sandbox::MISSING.lock().unwrap().drain(..) {
        report.progress(format!("sandbox (best effort): {m}"));
    }
    let outcome = match config {
        Err(e) => Err(Failure::new(ErrorClass::Other, e)),
        Ok(cfg) => in_span(worker_span(&cfg), run(&cfg, &report, &stop)).await,
    };
    // Bounded, so the result stays one line the kernel reads (lines over 1 MiB are not).
    let (code, outcome) = match outcome {
        Ok(final_text) => (
            0,
            Outcome {
                ok: true,
                final_text: final_text.map(|t| clip(&t, FINAL_TEXT_BYTES).into_owned()),
                ..Default::default()
            },
        ),
        Err(f) => (
            1,
            Outcome {
                ok: false,
                error_class: Some(f.class),
                error: Some(clip(&f.message, ERROR_BYTES).into_owned()),
                ..Default::default()
            },
        ),
    };
    sandbox::tidy();
    report.send(&Report::Result(outcome));
    code
}

/// `work`, or a `stopped` failure as soon as the kernel stops the run.
pub(crate) async fn or_stop<T>(
    stop: &CancellationToken,
    work: impl Future<Output = Result<T, Failure>>,
) -> Result<T, Failure> {
    tokio::select! {
        r = work => r,
        _ = stop.cancelled() => Err(Failure::new(ErrorClass::Stopped, "stopped by the kernel (SIGTERM)")),
    }
}

async fn run(
    cfg: &RunConfig,
    report: &Reporter,
    stop: &CancellationToken,
) -> Result<Option<String>, Failure> {
    // Check that the backend can run at all before reading the inbox: a run that
    // cannot start must leave the messages pending, untouched.
    let backend = cli::Cli::for_backend(&cfg.backend);
    if let Some(b) = &backend {
        or_stop(stop, b.check(cfg)).await?;
    }
    let client = or_stop(stop, client::KernelClient::connect(&cfg.url, &cfg.token)).await?;
    let fetch = context::Context::fetch(&client);
    let fetch = in_span(span("read_context", Vec::new()), fetch);
    let context = match or_stop(stop, fetch).await {
        Ok(c) => c,
        Err(f) => {
            client.close().await;
            return Err(f);
        }
    };
    report.progress(format!(
        "{} read {} inbox message(s)",
        cfg.agent,
        context.inbox.len()
    ));
    let run = Run {
        cfg,
        client: &client,
        context: &context,
        report,
        stop,
    };
    let backend_span = span(
        format!("backend {}", cfg.backend),
        vec![telemetry::KeyValue::new(
            "agent_worker.backend",
            cfg.backend.clone(),
        )],
    );
    let work = async {
        match (cfg.backend.parse::<Backend>(), backend) {
            (Ok(Backend::Mock), _) => or_stop(stop, mock::run(&run)).await,
            // Answers a stop itself, keeping its conversation first.
            (Ok(Backend::Sdk), _) => sdk::run(&run).await,
            // Supervises its CLI with `stop` itself, so the CLI gets a grace period.
            (_, Some(b)) => b.run(&run).await,
            (_, None) => Err(Failure::new(
                ErrorClass::Other,
                format!("unknown backend {:?}", cfg.backend),
            )),
        }
    };
    let result = in_span(backend_span, work).await;
    client.close().await;
    result
}

/// The run's configuration, which the kernel writes on stdin and closes; bounded,
/// and read on this thread (no runtime, no other thread yet).
fn read_config() -> Result<RunConfig, String> {
    use std::io::Read;
    if std::env::var(protocol::RUN_ENV).as_deref() != Ok(protocol::RUN_ON_STDIN) {
        return Err(format!(
            "{}={} is not set: the worker mode is started by the kernel, with its run on stdin",
            protocol::RUN_ENV,
            protocol::RUN_ON_STDIN
        ));
    }
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(protocol::MAX_RUN_CONFIG + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the run config on stdin: {e}"))?;
    if bytes.len() as u64 > protocol::MAX_RUN_CONFIG {
        return Err(format!(
            "the run config on stdin passes {} bytes",
            protocol::MAX_RUN_CONFIG
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("bad run config: {e}"))
}

/// The worker's span: a child of its run's (`TRACEPARENT`), when traces are exported.
fn worker_span(cfg: &RunConfig) -> Option<telemetry::Span> {
    use telemetry::KeyValue;
    telemetry::Span::start(
        format!("worker {}", cfg.agent),
        telemetry::SpanKind::Internal,
        Some(&telemetry::from_env().unwrap_or_default()),
        vec![
            KeyValue::new("agent_worker.run_id", cfg.run_id.clone()),
            KeyValue::new("gen_ai.agent.name", cfg.agent.clone()),
            KeyValue::new("agent_worker.backend", cfg.backend.clone()),
            KeyValue::new("agent_worker.trigger", cfg.trigger.as_str()),
        ],
    )
}

/// A span under the current one.
fn span(
    name: impl Into<std::borrow::Cow<'static, str>>,
    attributes: Vec<telemetry::KeyValue>,
) -> Option<telemetry::Span> {
    telemetry::Span::start(name, telemetry::SpanKind::Internal, None, attributes)
}

/// `work` in `span` (when there is one), which ends with its outcome.
async fn in_span<T>(
    span: Option<telemetry::Span>,
    work: impl Future<Output = Result<T, Failure>>,
) -> Result<T, Failure> {
    use telemetry::FutureExt;
    let Some(span) = span else {
        return work.await;
    };
    let r = work.with_context(span.context().clone()).await;
    if let Err(f) = &r {
        span.set("error.type", f.class.as_str());
        span.fail(domain::redact::shown(&f.message));
    }
    span.end();
    r
}

/// Gives a process started for the agent (its CLI, a command, an MCP server) the
/// agent's `OTEL_*` variables under their own names: the kernel hands them to the
/// worker held, so that the worker's own exporter reads only the kernel's. An
/// agent that names an OTLP endpoint of its own is given none of the kernel's
/// exporter headers: a collector's credentials never go where the agent chose.
pub(crate) fn agent_otel(cmd: &mut tokio::process::Command) {
    let held = telemetry::agent_env::held_here();
    let own_endpoint = held
        .iter()
        .any(|(_, n, _)| n.starts_with("OTEL_EXPORTER_OTLP_") && n.contains("ENDPOINT"));
    if own_endpoint {
        for (name, _) in std::env::vars_os() {
            if name
                .to_str()
                .is_some_and(|n| n.starts_with("OTEL_EXPORTER_OTLP_") && n.ends_with("HEADERS"))
            {
                cmd.env_remove(name);
            }
        }
    }
    for (held, name, value) in held {
        cmd.env_remove(held).env(name, value);
    }
}
