//! Whether the kernel relayed to still answers: a request waiting past a third of
//! the bridge's timeout has the kernel probed, and what the client is told when it
//! does not answer (see the module above).

use super::Relay;
use serde_json::Value;
use std::time::Duration;

/// The environment variable that sets how long the kernel may leave a waiting
/// request without a sign of life: seconds, or a duration such as `2s`.
pub const TIMEOUT_ENV: &str = "AGENT_WORKER_BRIDGE_TIMEOUT";
/// Its default.
const TIMEOUT: Duration = Duration::from_secs(10);

/// [`TIMEOUT_ENV`], else 10 s (300 ms to an hour).
pub(super) fn timeout() -> Duration {
    let range = Duration::from_millis(300)..=Duration::from_secs(3600);
    domain::clock::env_duration(TIMEOUT_ENV, TIMEOUT, range)
}

/// What a watched wait ended with.
pub(super) enum Watched<T> {
    Done(T),
    /// The kernel did not answer a probe in time: what to tell the client.
    Silent(String),
    /// The kernel is gone (its URL refuses connections).
    Gone,
}

impl Relay {
    /// Waits for `fut` (a request to the kernel at `url`) as long as it takes while
    /// the kernel answers: after a third of the timeout, and every third after,
    /// the kernel is probed (a GET); a probe it leaves unanswered for the rest of
    /// the timeout ends the wait (`Silent`, with what to tell the client), one it
    /// refuses says it is gone.
    pub(super) async fn watched<T>(
        &self,
        url: &str,
        fut: impl std::future::Future<Output = T>,
    ) -> Watched<T> {
        let mut fut = std::pin::pin!(fut);
        let patience = self.timeout / 3;
        loop {
            tokio::select! {
                out = &mut fut => return Watched::Done(out),
                () = tokio::time::sleep(patience) => {}
            }
            let token = self.target.lock().unwrap().1.clone();
            let probe = self
                .http
                .get(url)
                .bearer_auth(&token)
                .timeout(self.timeout - patience)
                .send();
            tokio::select! {
                out = &mut fut => return Watched::Done(out),
                p = probe => match p {
                    Ok(_) => {}
                    Err(e) if e.is_timeout() => return Watched::Silent(self.silent(url).await),
                    Err(e) if e.is_connect() => return Watched::Gone,
                    // Some other failure of the probe itself: the request decides.
                    Err(e) => tracing::debug!("bridge: probing the kernel: {e}"),
                },
            }
        }
    }

    /// What the client is told when the kernel at `url` does not answer.
    async fn silent(&self, url: &str) -> String {
        let within = format!("{} s", domain::clock::secs(self.timeout));
        let (dir, at) = (self.dir.clone(), url.to_owned());
        let found = tokio::task::spawn_blocking(move || {
            kernel_pid(&dir, &at).map(|pid| (pid, process_stopped(pid)))
        })
        .await
        .ok()
        .flatten();
        let Some((pid, stopped)) = found else {
            return format!(
                "the agent-worker kernel at {url} did not answer within {within}: it may be stopped \
                 (SIGSTOP) or hung; resume or end that process, and a new launch starts a new kernel \
                 once it is gone"
            );
        };
        let stopped = if stopped {
            " and is stopped (SIGSTOP, or a debugger holds it)"
        } else {
            ""
        };
        let next = if self.launcher.is_some() {
            "this client's next request (or a new launch) starts a new kernel"
        } else {
            "a new launch starts a new kernel"
        };
        format!(
            "the agent-worker kernel at {url} (pid {pid}) did not answer within {within}{stopped}: \
             `kill -CONT {pid}` resumes a stopped kernel; if it is hung, `kill {pid}` (or \
             `kill -9 {pid}`) ends it, and once it is gone {next} on the data dir {}",
            self.dir.display()
        )
    }
}

/// The pid of the kernel at `url`, as the data dir's kernel.json records it.
fn kernel_pid(dir: &std::path::Path, url: &str) -> Option<i32> {
    let text = std::fs::read_to_string(dir.join(crate::config::KERNEL_JSON)).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    if v["url"].as_str() != Some(url) {
        return None;
    }
    v["pid"].as_i64().and_then(|p| i32::try_from(p).ok())
}

/// Whether process `pid` is stopped (state T: SIGSTOP; t: a debugger).
fn process_stopped(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['T', 't']))
    })
}
