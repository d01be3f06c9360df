//! Backend readiness: the worker's probe mode, run with the environment an agent
//! would get (the kernel's, plus the agent's own `env`), answers for each backend
//! whether its command is there and logged in, and what to do if not.

use crate::runtime::Runtime;
use domain::error::{Error, Result};
use domain::protocol::{BackendReport, PROBE_MODE};
use std::collections::BTreeMap;
use std::time::Duration;

/// The probes start the CLIs themselves; node-based ones take a second or two.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);
/// Most of the probe's answer that is read.
const MAX_ANSWER: usize = 1024 * 1024;

impl Runtime {
    /// Probes `backends` (all when empty) in the environment `env` adds to the
    /// kernel's (the admin token is never passed on).
    pub async fn probe_backends(
        &self,
        backends: &[&str],
        env: &BTreeMap<String, String>,
    ) -> Result<Vec<BackendReport>> {
        let mut cmd = tokio::process::Command::new(self.workers.exe());
        cmd.arg(PROBE_MODE)
            .args(backends)
            .current_dir(self.base.data_dir.as_path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .process_group(0);
        crate::runtime::workers::scrub_env(&mut cmd);
        // As a run's worker gets them: the agent's `OTEL_*` held from the probe's
        // own process, given back to the CLI checks it starts.
        cmd.envs(telemetry::agent_env::for_worker(env));
        let child = cmd
            .spawn()
            .map_err(|e| Error::internal(format!("cannot start the backend probe: {e}")))?;
        let out = tokio::time::timeout(PROBE_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| Error::internal("the backend probe did not answer within 60 s"))?
            .map_err(|e| Error::internal(format!("the backend probe failed: {e}")))?;
        let text = &out.stdout[..out.stdout.len().min(MAX_ANSWER)];
        serde_json::from_slice(text).map_err(|e| {
            Error::internal(format!(
                "the backend probe answered something unreadable: {e}"
            ))
        })
    }
}

impl Runtime {
    /// What a person should know about an agent that is registered but may not
    /// run as it is: its backend missing or not logged in (with the fix), or a
    /// choice that needs saying. None when it is ready.
    pub async fn readiness_warning(
        &self,
        backend: &str,
        env: &BTreeMap<String, String>,
        permissions: &domain::permissions::Permissions,
    ) -> Option<String> {
        if backend
            .parse()
            .is_ok_and(domain::backends::Backend::needs_nothing_here)
        {
            return None;
        }
        let mut notes = Vec::new();
        match self.probe_backends(&[backend], env).await {
            Ok(r) => {
                if let Some(r) = r.into_iter().find(|r| r.backend == backend)
                    && !r.ready
                {
                    notes.push(format!(
                        "the {backend} backend is not ready here: {}. The agent is registered; its runs will fail until this is fixed",
                        r.fix.unwrap_or_else(|| "see backend_list".into())
                    ));
                }
            }
            Err(e) => notes.push(format!("could not check the {backend} backend: {e}")),
        }
        notes.extend(domain::permissions::backends::notes(
            backend,
            permissions,
            nix::unistd::Uid::effective().is_root(),
        ));
        (!notes.is_empty()).then(|| notes.join("; "))
    }
}
