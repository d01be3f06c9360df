//! Is a backend ready here? The worker's probe mode (`agent-worker __probe
//! [backend…]`), which the kernel starts with the environment an agent would get
//! and reads one JSON line from: for each backend, whether its command was found
//! (where, which version) and whether it has credentials (the same checks a run
//! makes before it starts), and what to do if not.
//!
//! It runs as a subprocess because these checks start the CLIs themselves
//! (`claude auth status`, `codex login status`…) in the agent's environment, and
//! the kernel never runs a CLI or takes on an agent's env itself.

use super::cli::{self, locate};
use domain::backends::Backend;
use domain::permissions::backends;

pub use domain::backends::BACKENDS;
pub use domain::protocol::{BackendReport, PROBE_MODE};

fn report(backend: &str) -> BackendReport {
    BackendReport {
        backend: backend.to_owned(),
        ready: true,
        path: None,
        on_path: None,
        version: None,
        logged_in: None,
        fix: None,
        profiles: backends::profiles(backend),
    }
}

/// Probes one backend in this process's environment.
pub async fn probe(backend: &str) -> BackendReport {
    let mut r = report(backend);
    match backend.parse::<Backend>() {
        Ok(Backend::Mock) => {}
        Ok(Backend::External) => {
            r.fix = Some("no worker: connect a client to act as the agent (agent_join)".into());
        }
        Ok(Backend::Human) => {
            r.fix = Some(
                "a person: no worker; they act through an MCP client of their own (agent_join) and decide \
                 approvals with approval_decide"
                    .into(),
            );
        }
        Ok(Backend::Sdk) => {
            let has = |k: &str| cli::env_set(k);
            let ok = has("ANTHROPIC_API_KEY")
                || has("ANTHROPIC_AUTH_TOKEN")
                || has("OPENAI_API_KEY")
                || has("OPENAI_BASE_URL");
            r.logged_in = Some(ok);
            r.ready = ok;
            if !ok {
                r.fix = Some(
                    "set ANTHROPIC_API_KEY or OPENAI_API_KEY (or OPENAI_BASE_URL for a local server) in the agent's env"
                        .into(),
                );
            }
        }
        _ => {
            let Some(c) = cli::Cli::for_backend(backend) else {
                r.ready = false;
                r.fix = Some(format!("unknown backend {backend}"));
                return r;
            };
            let Some(found) = locate::locate(c.program()) else {
                r.ready = false;
                r.fix = Some(format!(
                    "`{}` was not found on the PATH or in the usual install places: install it ({})",
                    c.program(),
                    c.install_hint()
                ));
                return r;
            };
            r.path = Some(found.path.display().to_string());
            r.on_path = Some(found.on_path);
            r.version = cli::probe(c.program(), &["--version"])
                .await
                .map(|(_, out)| out.lines().next().unwrap_or_default().trim().to_owned())
                .filter(|v| !v.is_empty());
            let missing = c.auth_missing().await;
            r.logged_in = Some(missing.is_none());
            r.ready = missing.is_none();
            r.fix = missing;
        }
    }
    r
}

/// The probe mode's entry: prints one JSON line with a report per backend asked
/// for (all when none is named). Returns the exit code.
pub async fn main(args: &[String]) -> i32 {
    let asked: Vec<&str> = if args.is_empty() {
        BACKENDS.to_vec()
    } else {
        args.iter().map(String::as_str).collect()
    };
    let reports = futures::future::join_all(asked.iter().map(|b| probe(b))).await;
    match serde_json::to_string(&reports) {
        Ok(line) => {
            println!("{line}");
            0
        }
        Err(_) => 1,
    }
}
