//! Supervising a subprocess: its own process group, a null stdin (or what the
//! caller gives it to read, then closed), stdout read as lines by a decoder that
//! never fails, stderr kept (bounded) for diagnostics,
//! startup / idle / total timeouts, and a stop that reaches every descendant.
//!
//! Used by the kernel (one worker per run) and by the worker (one CLI per run).
//!
//! Why each piece is here:
//! - `process_group(0)`: `kill_on_drop` and `start_kill` reach only the direct child;
//!   `killpg` reaches the grandchildren a CLI forks (shells, language servers).
//! - [`LossyLines`]: a codec error ends a `FramedRead`; if the reader then stops, the
//!   child blocks forever on a full pipe. This decoder turns bad UTF-8 into U+FFFD and
//!   a line longer than the limit into a marker, and never errors.
//! - stdout EOF is not exit: the deadline still applies while we wait for the child.
//! - After the child exits, whatever is left of its group is killed (the sweep), so
//!   no descendant outlives the run.

pub use crate::group::Group;
use bytes::BytesMut;
use futures::StreamExt;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio::time::Instant;
use tokio_util::codec::{Decoder, FramedRead};
use tokio_util::sync::CancellationToken;

/// Longest stdout line kept; longer ones become a marker line.
pub const MAX_LINE: usize = 1024 * 1024;
/// How much of the end of stderr is kept.
pub const STDERR_TAIL: usize = 16 * 1024;

/// Time limits for one supervised process.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Until the first stdout line.
    pub startup: Duration,
    /// Between two stdout lines.
    pub idle: Duration,
    /// For the whole run.
    pub total: Duration,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// While this says the process is held (waiting for a person's approval), its
    /// silence is not idleness: the idle limit waits. The total limit still holds.
    pub held: Held,
}

/// Whether a supervised process is waiting on someone else: a flag the kernel sets
/// for a run, or a file it creates in the run's scratch folder (seen by the worker,
/// which supervises its CLI in another process).
#[derive(Debug, Clone, Default)]
pub enum Held {
    #[default]
    Never,
    Flag(std::sync::Arc<std::sync::atomic::AtomicBool>),
    File(std::path::PathBuf),
}

impl Held {
    pub fn is_held(&self) -> bool {
        match self {
            Held::Never => false,
            Held::Flag(f) => f.load(std::sync::atomic::Ordering::Relaxed),
            Held::File(p) => p.exists(),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            startup: Duration::from_secs(60),
            idle: Duration::from_secs(10 * 60),
            total: Duration::from_secs(60 * 60),
            grace: Duration::from_secs(5),
            held: Held::Never,
        }
    }
}

/// Why supervision ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The process exited on its own.
    Exited,
    StartupTimeout,
    IdleTimeout,
    TotalTimeout,
    /// The caller cancelled (pause, delete, shutdown).
    Stopped,
}

impl Ended {
    /// A short reason for logs and run records.
    pub fn describe(self, limits: &Limits) -> String {
        let d = |d: Duration| humantime::format_duration(d).to_string();
        match self {
            Ended::Exited => "exited".into(),
            Ended::StartupTimeout => format!("printed nothing within {}", d(limits.startup)),
            Ended::IdleTimeout => format!("was silent for {}", d(limits.idle)),
            Ended::TotalTimeout => format!("ran longer than {}", d(limits.total)),
            Ended::Stopped => "was stopped".into(),
        }
    }
}

/// The outcome of a supervised process.
#[derive(Debug)]
pub struct Finished {
    pub ended: Ended,
    /// The exit status (after our signals, when we had to send them).
    pub status: Option<ExitStatus>,
    /// Whether SIGKILL was needed after the grace period.
    pub killed: bool,
    /// The last [`STDERR_TAIL`] bytes of stderr, lossily decoded.
    pub stderr_tail: String,
}

impl Finished {
    pub fn exit_code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    pub fn signal(&self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        self.status.and_then(|s| s.signal())
    }

    pub fn success(&self) -> bool {
        self.ended == Ended::Exited && self.status.is_some_and(|s| s.success())
    }
}

/// The identity of a spawned process: pid plus its start time, so that a pid reused
/// by an unrelated process after a restart is never mistaken for our worker.
#[derive(Debug, Clone, Copy)]
pub struct Spawned {
    pub pid: u32,
    pub start_time: Option<u64>,
}

/// What `/proc/PID/stat` says of a process (Linux).
#[derive(Debug, Clone, Copy)]
pub struct ProcStat {
    /// `R`, `S`, `Z` (a zombie: dead, not yet reaped), ...
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
    /// Clock ticks since boot.
    pub start_time: u64,
}

impl ProcStat {
    pub fn alive(&self) -> bool {
        self.state != 'Z'
    }
}

pub fn proc_stat(pid: u32) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses; the fields after
    // it start past the last ')': state is field 3, ppid 4, pgrp 5, starttime 22.
    let f: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        start_time: f.get(19)?.parse().ok()?,
    })
}

/// Start time of a process in clock ticks since boot.
pub fn process_start_time(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|s| s.start_time)
}

/// Kills the process group led by `pid` if that process is still the one we started.
/// Used at kernel start for workers a previous kernel left behind.
pub fn kill_stale_group(pid: u32, start_time: Option<u64>) -> bool {
    let same = match (start_time, process_start_time(pid)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    };
    if same {
        let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
    same
}

/// Kills what is left of a process group a run started (led by `pid`, which
/// started at `start_time`): unless `pid` now belongs to another process (its start
/// time differs), in which case the group is not ours any more.
pub fn kill_run_group(pid: u32, start_time: Option<u64>) {
    let reused = match (start_time, process_start_time(pid)) {
        (Some(a), Some(b)) => a != b,
        _ => false,
    };
    if !reused {
        let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
}

/// A command to supervise and what it reads on its stdin, then closed (a plain
/// [`Command`]'s stdin is null): for settings too large for a command line or an
/// environment variable (each at most 128 KiB on Linux).
pub struct Launch {
    pub cmd: Command,
    pub input: Option<Vec<u8>>,
}

impl From<Command> for Launch {
    fn from(cmd: Command) -> Self {
        Self { cmd, input: None }
    }
}

/// Writes `input` to the child's stdin, then closes it, beside the supervision (a
/// child that reads nothing ends the write with a broken pipe, never blocked).
fn feed_stdin(child: &mut tokio::process::Child, input: Option<Vec<u8>>) {
    if let (Some(bytes), Some(mut pipe)) = (input, child.stdin.take()) {
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = pipe.write_all(&bytes).await;
        });
    }
}

/// Spawns `launch` and supervises it until it exits, a limit passes or `stop` fires.
/// `on_spawn` gets the process identity at once; `on_line` gets every stdout line.
pub async fn supervise(
    launch: impl Into<Launch>,
    limits: Limits,
    group: Group,
    stop: CancellationToken,
    on_spawn: impl FnOnce(Spawned),
    mut on_line: impl FnMut(String),
) -> std::io::Result<Finished> {
    let Launch { mut cmd, input } = launch.into();
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    // Only a safety net if this future is dropped: it reaches the child, not the group.
    .kill_on_drop(true);
    group.set(&mut cmd);
    let mut child = cmd.spawn()?;
    feed_stdin(&mut child, input);
    let pid = child.id().unwrap_or(0);
    on_spawn(Spawned {
        pid,
        start_time: process_start_time(pid),
    });
    let target = Pid::from_raw(pid as i32);
    let signal = |sig: Signal| {
        let _ = match group {
            Group::Own | Group::Session => killpg(target, sig),
            Group::Inherit => nix::sys::signal::kill(target, sig),
        };
    };
    let tail = Arc::new(Mutex::new(Tail::default()));
    let stderr_task = child.stderr.take().map(|err| keep_tail(err, tail.clone()));
    let mut lines = child
        .stdout
        .take()
        .map(|out| FramedRead::new(out, LossyLines::new(MAX_LINE)));
    let total_deadline = Instant::now() + limits.total;
    let (mut ended, mut status) = match lines.as_mut() {
        Some(lines) => read_lines(lines, &mut child, &limits, &stop, &mut on_line).await,
        None => (Ended::Exited, None),
    };
    // EOF is not exit: keep the total deadline (and the stop) while waiting.
    if ended == Ended::Exited && status.is_none() {
        tokio::select! {
            s = child.wait() => status = s.ok(),
            _ = tokio::time::sleep_until(total_deadline) => ended = Ended::TotalTimeout,
            _ = stop.cancelled() => ended = Ended::Stopped,
        }
    }
    let mut killed = false;
    if status.is_none() {
        (status, killed) = terminate(&mut child, limits.grace, signal).await;
    }
    // The sweep: descendants still in the group die with the run.
    if group != Group::Inherit {
        let _ = killpg(target, Signal::SIGKILL);
    }
    drop(lines);
    if let Some(t) = stderr_task {
        // Closed once every holder of the pipe is gone, which the sweep ensured;
        // bounded anyway in case a descendant left the group with the pipe.
        let _ = tokio::time::timeout(Duration::from_secs(1), t).await;
    }
    let stderr_tail = tail.lock().unwrap().text();
    Ok(Finished {
        ended,
        status,
        killed,
        stderr_tail,
    })
}

/// Keeps the end of a process's stderr in `tail`, until the pipe closes.
fn keep_tail(
    mut err: tokio::process::ChildStderr,
    tail: Arc<Mutex<Tail>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = err.read(&mut buf).await {
            if n == 0 {
                break;
            }
            tail.lock().unwrap().push(&buf[..n]);
        }
    })
}

/// Reads stdout until EOF, the process's exit or a limit: why reading stopped,
/// and the exit status if the process was seen to exit.
async fn read_lines(
    lines: &mut FramedRead<tokio::process::ChildStdout, LossyLines>,
    child: &mut tokio::process::Child,
    limits: &Limits,
    stop: &CancellationToken,
    on_line: &mut impl FnMut(String),
) -> (Ended, Option<ExitStatus>) {
    let started = Instant::now();
    let total_deadline = started + limits.total;
    let mut line_deadline = started + limits.startup;
    let mut first_line = true;
    let mut ended = Ended::Exited;
    let mut status = None;
    loop {
        let deadline = line_deadline.min(total_deadline);
        tokio::select! {
            line = lines.next() => match line {
                Some(Ok(l)) => {
                    first_line = false;
                    line_deadline = Instant::now() + limits.idle;
                    on_line(l);
                }
                _ => break,
            },
            // A descendant may hold stdout open after the process exits: take
            // what is already written, then stop reading.
            s = child.wait() => {
                status = s.ok();
                let drain = Instant::now() + Duration::from_millis(500);
                while let Ok(Some(Ok(l))) = tokio::time::timeout_at(drain, lines.next()).await {
                    on_line(l);
                }
                break;
            }
            _ = tokio::time::sleep_until(deadline) => {
                if deadline != total_deadline && !first_line && limits.held.is_held() {
                    line_deadline = Instant::now() + limits.idle;
                    continue;
                }
                ended = if deadline == total_deadline {
                    Ended::TotalTimeout
                } else if first_line {
                    Ended::StartupTimeout
                } else {
                    Ended::IdleTimeout
                };
                break;
            }
            _ = stop.cancelled() => { ended = Ended::Stopped; break; }
        }
    }
    (ended, status)
}

/// SIGTERM, then SIGKILL after `grace`: the exit status, and whether it was killed.
async fn terminate(
    child: &mut tokio::process::Child,
    grace: Duration,
    signal: impl Fn(Signal),
) -> (Option<ExitStatus>, bool) {
    signal(Signal::SIGTERM);
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(s) => (s.ok(), false),
        Err(_) => {
            signal(Signal::SIGKILL);
            (child.wait().await.ok(), true)
        }
    }
}

/// The end of a byte stream, bounded.
#[derive(Default)]
struct Tail {
    buf: VecDeque<u8>,
    dropped: bool,
}

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        self.buf.extend(bytes);
        if self.buf.len() > STDERR_TAIL {
            let excess = self.buf.len() - STDERR_TAIL;
            self.buf.drain(..excess);
            self.dropped = true;
        }
    }

    fn text(&self) -> String {
        let (a, b) = self.buf.as_slices();
        let mut v = a.to_vec();
        v.extend_from_slice(b);
        let s = String::from_utf8_lossy(&v).trim().to_owned();
        if self.dropped { format!("…{s}") } else { s }
    }
}

/// A line decoder that never fails: bad UTF-8 is replaced, over-long lines become
/// `<line too long: N bytes>` (the rest of the line is skipped, not buffered).
pub struct LossyLines {
    max: usize,
    /// Bytes of an over-long line skipped so far (None = not skipping).
    skipping: Option<usize>,
}

impl LossyLines {
    pub fn new(max: usize) -> Self {
        Self {
            max,
            skipping: None,
        }
    }

    fn finish_line(bytes: &[u8]) -> String {
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        String::from_utf8_lossy(bytes).into_owned()
    }
}

impl Decoder for LossyLines {
    type Item = String;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<String>, Self::Error> {
        loop {
            let nl = src.iter().position(|b| *b == b'\n');
            if let Some(skipped) = self.skipping {
                match nl {
                    Some(i) => {
                        let _ = src.split_to(i + 1);
                        self.skipping = None;
                        return Ok(Some(format!("<line too long: {} bytes>", skipped + i)));
                    }
                    None => {
                        self.skipping = Some(skipped + src.len());
                        src.clear();
                        return Ok(None);
                    }
                }
            }
            match nl {
                Some(i) if i <= self.max => {
                    let line = src.split_to(i + 1);
                    return Ok(Some(Self::finish_line(&line[..i])));
                }
                Some(_) | None if src.len() > self.max => {
                    self.skipping = Some(0);
                    continue;
                }
                _ => return Ok(None),
            }
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<String>, Self::Error> {
        if let Some(line) = self.decode(src)? {
            return Ok(Some(line));
        }
        if let Some(skipped) = self.skipping.take() {
            return Ok(Some(format!("<line too long: {skipped} bytes>")));
        }
        if src.is_empty() {
            return Ok(None);
        }
        let rest = src.split_to(src.len());
        Ok(Some(Self::finish_line(&rest)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8], max: usize) -> Vec<String> {
        let mut d = LossyLines::new(max);
        let mut buf = BytesMut::from(input);
        let mut out = vec![];
        while let Some(l) = d.decode(&mut buf).unwrap() {
            out.push(l);
        }
        while let Some(l) = d.decode_eof(&mut buf).unwrap() {
            out.push(l);
        }
        out
    }

    #[test]
    fn lossy_lines_never_fail() {
        let mut input = b"{\"a\":1}\n\xff\xfe bad\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100));
        input.extend(b"\nlast");
        assert_eq!(
            decode_all(&input, 50),
            vec![
                "{\"a\":1}".to_owned(),
                "\u{FFFD}\u{FFFD} bad".to_owned(),
                "<line too long: 100 bytes>".to_owned(),
                "last".to_owned()
            ]
        );
    }

    fn limits() -> Limits {
        Limits {
            startup: Duration::from_secs(20),
            idle: Duration::from_secs(20),
            total: Duration::from_secs(30),
            grace: Duration::from_secs(1),
            held: Held::default(),
        }
    }

    async fn lines_of(launch: impl Into<Launch>) -> (Vec<String>, Finished) {
        let mut out = Vec::new();
        let stop = CancellationToken::new();
        let f = supervise(launch, limits(), Group::Own, stop, |_| {}, |l| out.push(l))
            .await
            .unwrap();
        (out, f)
    }

    /// 1 MiB on stdin, past what one environment variable (128 KiB) or a command
    /// line may carry, reaches the child whole; a child that reads none of it
    /// still ends, and so does the writer.
    #[tokio::test]
    async fn input_reaches_the_child_and_never_holds_it() {
        let big = vec![b'x'; 1 << 20];
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "wc -c"]);
        let (out, f) = lines_of(Launch {
            cmd,
            input: Some(big.clone()),
        })
        .await;
        assert_eq!(
            out.iter().map(|l| l.trim()).collect::<Vec<_>>(),
            ["1048576"]
        );
        assert_eq!(f.ended, Ended::Exited);
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo done"]);
        let (out, f) = lines_of(Launch {
            cmd,
            input: Some(big),
        })
        .await;
        assert_eq!((out, f.ended), (vec!["done".to_owned()], Ended::Exited));
        // Without input, stdin is null: a read ends at once.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "wc -c"]);
        let (out, _) = lines_of(cmd).await;
        assert_eq!(out.iter().map(|l| l.trim()).collect::<Vec<_>>(), ["0"]);
    }

    #[test]
    fn start_time_of_self_is_readable() {
        assert!(process_start_time(std::process::id()).is_some());
        assert!(process_start_time(u32::MAX).is_none());
    }
}
