//! Launch flags only; everything else is MCP. See `agent_worker::config`.

use agent_worker::config::{Launch, USAGE, parse_args};

// glibc malloc contends on arena locks under many tokio threads; mimalloc does not.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    agent_worker::memory::no_huge_pages();
    // Before anything opens a database (SQLite takes an allocator only before it
    // initialises); the debug build says so if a change ever moves that earlier.
    let sqlite_on_mimalloc = agent_worker::store::sqlite_on_mimalloc();
    debug_assert!(
        sqlite_on_mimalloc,
        "SQLite initialised before main could configure it"
    );
    let launch = match parse_args(std::env::args().skip(1)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("agent-worker: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let opts = match launch {
        // Asked for, so the answer (on stdout, exit 0: `agent-worker --help | less`).
        // No transport runs in such a launch; errors stay on stderr with exit 2.
        Launch::Help => return answer(USAGE),
        Launch::Version => return answer(&format!("agent-worker {}", env!("CARGO_PKG_VERSION"))),
        Launch::Worker => return worker(),
        Launch::Probe(backends) => return probe(&backends),
        Launch::Hook(file) => return hook(&file),
        Launch::Serve(o) => *o,
    };
    // Blocking work (file I/O) is bounded: a burst queues instead of holding hundreds
    // of threads (the store's reads have their own fixed threads).
    let rt = match agent_worker::memory::runtime()
        .max_blocking_threads(32)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("agent-worker: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(agent_worker::server::run(opts)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent-worker: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `--help` or `--version`: the text on stdout, exit 0 (1 if stdout is closed).
fn answer(text: &str) -> std::process::ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(_) => std::process::ExitCode::FAILURE,
    }
}

/// The readiness probe: single-threaded, one JSON line on stdout.
fn probe(backends: &[String]) -> std::process::ExitCode {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return std::process::ExitCode::FAILURE;
    };
    let code = rt.block_on(agent_worker::worker::probe::main(backends));
    std::process::ExitCode::from(code as u8)
}

/// The inbox hook: what arrived for the agent, as Claude Code reads a hook's answer.
fn hook(file: &std::path::Path) -> std::process::ExitCode {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return std::process::ExitCode::SUCCESS;
    };
    match rt.block_on(agent_worker::worker::hook::main(file)) {
        Some(line) => answer(&line),
        None => std::process::ExitCode::SUCCESS,
    }
}

/// A worker run: small, single-threaded, logging to stderr (the kernel keeps its tail).
fn worker() -> std::process::ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AGENT_WORKER_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .try_init();
    // Read, and the sandbox applied, before the runtime makes any thread.
    let config = agent_worker::worker::configure();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("agent-worker worker: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // Traces (the kernel's OTLP endpoint reaches a worker by its environment); the
    // guard exports what is left before the worker exits.
    let traces = agent_worker::telemetry::init_worker(std::time::Duration::from_secs(1));
    let code = rt.block_on(agent_worker::worker::main(config));
    drop(traces);
    std::process::ExitCode::from(code as u8)
}
