//! A short command run to its end within bounds, for commands whose stdout is an
//! answer (a workflow's setup step, git): [`supervise`]d in its own process group
//! with one timeout (then SIGTERM, SIGKILL and the sweep), at most so much stdout,
//! and the last lines of its stderr in the error.

use crate::process::{Ended, Group, Limits, supervise};
use std::time::Duration;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

/// Lines of stderr quoted in a failure.
const STDERR_LINES: usize = 10;

/// Why a command did not succeed: its exit code when it exited with one, and the
/// reason in words ("exited with status 1: <stderr>", "timed out after 30s",
/// "printed more than 1024 KiB: …").
#[derive(Debug)]
pub struct Failed {
    pub code: Option<i32>,
    pub reason: String,
    /// What it printed before it failed by exiting (within the bound).
    pub stdout: String,
}

/// Runs `cmd` to its end: its trimmed stdout, or why it failed in words.
pub async fn output(cmd: Command, timeout: Duration, max_output: usize) -> Result<String, String> {
    run(cmd, timeout, max_output).await.map_err(|f| f.reason)
}

/// [`output`], with the exit code of a command that failed by exiting (for
/// commands whose exit code is the answer, such as `git diff --quiet`).
pub async fn run(cmd: Command, timeout: Duration, max_output: usize) -> Result<String, Failed> {
    match bounded(cmd, timeout, max_output, false).await? {
        (_, true) => Err(Failed {
            code: None,
            stdout: String::new(),
            reason: format!(
                "printed more than {} KiB: write large output to a file and pass its path instead",
                max_output / 1024
            ),
        }),
        (out, false) => Ok(out.trim().to_owned()),
    }
}

/// Runs `cmd` to its end keeping the first `max_output` bytes of its stdout as
/// printed (cut at a line's end; then it is stopped): the output and whether it
/// was cut. For output that is read, not parsed (a patch, a file).
pub async fn head(
    cmd: Command,
    timeout: Duration,
    max_output: usize,
) -> Result<(String, bool), Failed> {
    bounded(cmd, timeout, max_output, true).await
}

async fn bounded(
    cmd: Command,
    timeout: Duration,
    max_output: usize,
    keep_head: bool,
) -> Result<(String, bool), Failed> {
    let words = |reason: String| Failed {
        code: None,
        reason,
        stdout: String::new(),
    };
    let program = cmd.as_std().get_program().to_string_lossy().into_owned();
    let limits = Limits {
        startup: timeout,
        idle: timeout,
        total: timeout,
        grace: Duration::from_secs(1),
        held: Default::default(),
    };
    let stop = CancellationToken::new();
    let mut out = String::new();
    let mut too_long = false;
    let finished = supervise(
        cmd,
        limits,
        Group::Own,
        stop.clone(),
        |_| {},
        |line| {
            if too_long {
                return;
            }
            // supervise turns a line over its own limit (1 MiB) into this marker: that
            // much output is too long anyway.
            let marker = line.starts_with("<line too long: ") && line.ends_with(" bytes>");
            if marker || out.len() + line.len() + 1 > max_output {
                too_long = true;
                if !keep_head {
                    out.clear();
                }
                stop.cancel();
                return;
            }
            out.push_str(&line);
            out.push('\n');
        },
    )
    .await
    .map_err(|e| words(format!("could not start `{program}`: {e}")))?;
    if too_long {
        return Ok((out, true));
    }
    match finished.ended {
        Ended::Exited => {}
        Ended::StartupTimeout | Ended::IdleTimeout | Ended::TotalTimeout => {
            return Err(words(format!(
                "timed out after {}{}",
                humantime::format_duration(timeout),
                stderr_suffix(&finished.stderr_tail)
            )));
        }
        Ended::Stopped => return Err(words("was stopped".into())),
    }
    if finished.success() {
        return Ok((out, false));
    }
    let how = match (finished.exit_code(), finished.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        (None, None) => "ended without an exit status".to_owned(),
    };
    Err(Failed {
        code: finished.exit_code(),
        reason: format!("{how}{}", stderr_suffix(&finished.stderr_tail)),
        stdout: out,
    })
}

/// `: <the last lines of stderr>`, or nothing if it printed none.
fn stderr_suffix(tail: &str) -> String {
    let lines: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let last = lines[lines.len().saturating_sub(STDERR_LINES)..].join("\n");
    let last: String = if last.chars().count() > 2000 {
        let skip = last.chars().count() - 2000;
        format!("…{}", last.chars().skip(skip).collect::<String>())
    } else {
        last
    };
    format!(": {last}")
}
