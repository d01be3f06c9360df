//! The background kernel: a stdio launch relays to a kernel that outlives it.
//!
//! MCP clients start a stdio server per window and stop it when they close. The
//! team's work (workers, schedules, waiting messages) must not end with them, so
//! a stdio launch does not serve the data dir itself: it finds the kernel running
//! there, or starts one in the background (its own session, no terminal, logs in
//! the data dir), and relays to it ([`crate::bridge`]). That kernel stops by itself
//! once no client has called for `--idle-exit` and nothing is owed (see
//! [`kernel::runtime::idle`]); if it dies while a client is attached, the
//! relay starts another and carries on.
//!
//! `--foreground` (or `AGENT_WORKER_FOREGROUND=1`) keeps the old behaviour: the
//! kernel runs in the stdio process and ends with it.

use crate::config::{BACKGROUND_KERNEL, KERNEL_JSON, Options};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a new background kernel may take to be ready.
const START_LIMIT: Duration = Duration::from_secs(20);

/// Starts (or finds) the data dir's kernel.
#[derive(Clone)]
pub struct Launcher {
    dir: PathBuf,
    opts: Options,
    /// The agent token this launch relays with (`--token-env`), instead of the
    /// lead credential in kernel.json: what agent_join hands out, so it works with
    /// whichever kernel serves the data dir.
    agent_token: Option<String>,
}

/// Where a kernel is: its URL and the credential to relay with (the lead's from
/// kernel.json, or the launch's agent token).
pub type Target = (String, String);

impl Launcher {
    pub fn new(opts: &Options, dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            opts: opts.clone(),
            agent_token: None,
        }
    }

    /// This launch relays as the agent whose token this is.
    pub fn as_agent(mut self, token: String) -> Self {
        self.agent_token = Some(token);
        self
    }

    /// Whether this launch relays as an agent (with its agent_join token).
    pub fn is_agent(&self) -> bool {
        self.agent_token.is_some()
    }

    /// Whether the data dir's kernel (as its kernel.json names it) is running.
    pub fn kernel_alive(&self) -> bool {
        self.running().is_ok_and(|t| t.is_some())
    }

    /// The idle limit this launch gives a kernel it starts (None: never).
    pub fn idle_exit(&self) -> Option<Duration> {
        self.opts.idle_exit
    }

    /// The running kernel, started in the background first if none runs. Blocking
    /// (it may wait for a new kernel to come up): call it off the async runtime.
    pub fn ensure(&self) -> Result<Target, String> {
        if let Some(t) = self.running()? {
            return Ok(t);
        }
        let child = self.spawn()?;
        let deadline = Instant::now() + START_LIMIT;
        let mut exited_at = None;
        while Instant::now() < deadline {
            if let Some(t) = self.running()? {
                return Ok(t);
            }
            // Ours stopped: another launch's kernel may have taken the data dir first
            // (give it a moment to say where it is), or ours failed.
            if child.exited.load(Ordering::Relaxed) {
                let at = *exited_at.get_or_insert_with(Instant::now);
                if at.elapsed() < Duration::from_secs(3) {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                return Err(format!(
                    "the background kernel for {} stopped as it started; see {}",
                    self.dir.display(),
                    self.dir.join("logs").join("agent-worker.log").display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "the background kernel for {} did not come up within {} s; see {}",
            self.dir.display(),
            START_LIMIT.as_secs(),
            self.dir.join("logs").join("agent-worker.log").display()
        ))
    }

    /// The kernel serving the data dir, once it has said where it is. (Never by
    /// probing the data dir's lock: a kernel starting at that instant would find it
    /// taken and give up.)
    fn running(&self) -> Result<Option<Target>, String> {
        let Ok(text) = std::fs::read_to_string(self.dir.join(KERNEL_JSON)) else {
            return Ok(None);
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            return Ok(None);
        };
        // A kernel.json a crashed kernel left names a process that is gone.
        let alive = v["pid"]
            .as_i64()
            .and_then(|p| i32::try_from(p).ok())
            .is_some_and(pid_alive);
        let (Some(url), true) = (v["url"].as_str(), alive) else {
            return Ok(None);
        };
        crate::config::check_store(&self.opts, &self.dir, v["store"].as_str())?;
        crate::config::check_node(&self.opts, &self.dir, v["node"].as_str())?;
        if let Some(t) = &self.agent_token {
            return Ok(Some((url.to_owned(), t.clone())));
        }
        let token = v["token"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| crate::config::existing_admin_token(&self.opts, &self.dir))
            .ok_or_else(|| {
                format!(
                    "the kernel running on {} did not leave its credential in {KERNEL_JSON}: stop it and \
                     start it again with this version, or give this launch its --token",
                    self.dir.display()
                )
            })?;
        Ok(Some((url.to_owned(), token)))
    }

    fn spawn(&self) -> Result<Spawned, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.arg("--data-dir").arg(&self.dir).arg(BACKGROUND_KERNEL);
        cmd.arg("--idle-exit").arg(match self.opts.idle_exit {
            Some(d) => format!("{}ms", d.as_millis()),
            None => "never".into(),
        });
        if let Some(l) = &self.opts.log {
            cmd.arg("--log").arg(l);
        }
        if let Some(t) = &self.opts.token {
            cmd.arg("--token").arg(t);
        }
        if let Some(n) = &self.opts.node {
            cmd.arg("--node").arg(n);
        }
        if let Some(l) = &self.opts.labels {
            cmd.arg("--labels").arg(l);
        }
        if let Some(e) = &self.opts.otlp_endpoint {
            cmd.arg("--otlp-endpoint").arg(e);
        }
        // By environment, not on the command line: a URL may carry a password.
        if let Some(s) = &self.opts.store {
            cmd.env(crate::config::STORE_ENV, s);
        }
        cmd.env_remove("AGENT_WORKER_FOREGROUND")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // Its own session: no terminal, and no signal meant for the client's.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start the background kernel: {e}"))?;
        tracing::info!(pid = child.id(), "started a background kernel");
        // Reaped here when it ends, so it never lingers as a zombie of this launch.
        let exited = Arc::new(AtomicBool::new(false));
        let flag = exited.clone();
        std::thread::spawn(move || {
            let _ = child.wait();
            flag.store(true, Ordering::Relaxed);
        });
        Ok(Spawned { exited })
    }
}

/// Whether a process runs: it exists and is not a zombie (a kernel killed a moment
/// ago that this launch has not reaped yet is gone for our purposes).
fn pid_alive(pid: i32) -> bool {
    if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_none_or(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

struct Spawned {
    exited: Arc<AtomicBool>,
}

/// Resolves when a background kernel should stop: no client request for `idle`,
/// and nothing owed; or its data dir is gone (deleted under it: nothing it keeps
/// can outlive it, and no client can find it again).
pub async fn idle_exit(kernel: Arc<kernel::Kernel>, idle: Duration) {
    let check = (idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(10));
    let dir = kernel.data_dir().to_path_buf();
    loop {
        tokio::time::sleep(check).await;
        if !tokio::fs::try_exists(&dir).await.unwrap_or(true) {
            tracing::warn!(dir = %dir.display(), "the data dir is gone: the background kernel stops");
            return;
        }
        if kernel.runtime().client_idle_for() >= idle
            && kernel.owes_nothing().await.unwrap_or(false)
        {
            tracing::info!(idle = ?idle, "no client and nothing owed: the background kernel stops");
            return;
        }
    }
}
