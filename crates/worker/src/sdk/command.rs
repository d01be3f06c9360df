//! The sdk backend's `run_command`: one shell command in the agent's folder.
//!
//! It runs as `sh -c` in its own process group with no stdin, under a time limit,
//! and whatever it leaves running is killed with its group when it ends (or when
//! the run is stopped). Its output is bounded: the start and the end are kept, the
//! middle of a long output is cut with a note. The group is reported to the kernel
//! as well, so that even a worker killed outright leaves nothing behind.

use crate::Reporter;
use domain::protocol::Report;
use os::process::{self, Ended, Group, Limits};
use std::path::Path;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Output kept: this much of the start and of the end of stdout.
const KEEP_HEAD: usize = 8 * 1024;
const KEEP_TAIL: usize = 24 * 1024;

/// Runs `command` in `dir`; the text the model gets back, or why it could not run.
pub async fn run_command(
    dir: &Path,
    command: &str,
    timeout: Option<u64>,
    stop: &CancellationToken,
    report: &Reporter,
) -> Result<String, String> {
    let limit = timeout
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT)
        .clamp(Duration::from_secs(1), MAX_TIMEOUT);
    crate::sandbox::counted()?;
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c").arg(command).current_dir(dir);
    // The worker's own secrets are not the command's business.
    for k in [domain::protocol::RUN_ENV, crate::cli::TOKEN_ENV] {
        cmd.env_remove(k);
    }
    crate::agent_otel(&mut cmd);
    let limits = Limits {
        startup: limit,
        idle: limit,
        total: limit,
        grace: Duration::from_secs(2),
        held: Default::default(),
    };
    let mut head = String::new();
    let mut tail = std::collections::VecDeque::<String>::new();
    let (mut tail_len, mut cut) = (0usize, 0usize);
    let done = process::supervise(
        cmd,
        limits,
        Group::Own,
        stop.child_token(),
        |s| {
            report.send(&Report::Group {
                pid: s.pid,
                start_time: s.start_time,
            })
        },
        |line| {
            if head.len() + line.len() < KEEP_HEAD {
                head.push_str(&line);
                head.push('\n');
                return;
            }
            tail_len += line.len() + 1;
            tail.push_back(line);
            while tail_len > KEEP_TAIL {
                let Some(l) = tail.pop_front() else { break };
                tail_len -= l.len() + 1;
                cut += 1;
            }
        },
    )
    .await
    .map_err(|e| format!("cannot start sh: {e}"))?;
    let mut out = head;
    if cut > 0 {
        out.push_str(&format!("… ({cut} lines cut) …\n"));
    }
    for l in tail {
        out.push_str(&l);
        out.push('\n');
    }
    let status = match done.ended {
        Ended::Exited => match (done.exit_code(), done.signal()) {
            (Some(c), _) => format!("exit code {c}"),
            (_, Some(s)) => format!("killed by signal {s}"),
            _ => "exited".into(),
        },
        Ended::Stopped => "stopped: the run is ending".into(),
        _ => format!(
            "stopped after {} (its time limit; pass timeout_seconds up to {} for longer)",
            humantime::format_duration(limit),
            MAX_TIMEOUT.as_secs()
        ),
    };
    let stderr = done.stderr_tail.trim_end();
    let mut text = format!("{status}\n");
    if !out.trim().is_empty() {
        text.push_str(&format!("stdout:\n{out}"));
    }
    if !stderr.is_empty() {
        text.push_str(&format!("stderr (end):\n{stderr}\n"));
    }
    Ok(text)
}
