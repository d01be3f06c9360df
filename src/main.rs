//! Launch flags only; everything else is MCP. See `agent_worker::config`.

use agent_worker::config::{Launch, USAGE, parse_args};

// glibc malloc contends on arena locks under many tokio threads; mimalloc does not.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let launch = match parse_args(std::env::args().skip(1)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("agent-worker: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let opts = match launch {
        Launch::Help => {
            eprintln!("{USAGE}");
            return std::process::ExitCode::SUCCESS;
        }
        Launch::Version => {
            eprintln!("agent-worker {}", env!("CARGO_PKG_VERSION"));
            return std::process::ExitCode::SUCCESS;
        }
        Launch::Serve(o) => o,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
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
