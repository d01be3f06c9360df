//! The process manager's supervision with real subprocesses (sh scripts): each limit,
//! a worker that ignores SIGTERM, one that forks a grandchild, bad UTF-8 and huge
//! lines, a crash mid-run. After each, no process of the run is alive.

use agent_worker::process::{Ended, Group, Held, Limits, Spawned, proc_stat, supervise};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

struct Run {
    ended: Ended,
    code: Option<i32>,
    signal: Option<i32>,
    killed: bool,
    lines: Vec<String>,
    stderr: String,
    pid: u32,
    took: Duration,
}

fn limits(startup: u64, idle: u64, total: u64) -> Limits {
    Limits {
        startup: Duration::from_millis(startup),
        idle: Duration::from_millis(idle),
        total: Duration::from_millis(total),
        grace: Duration::from_millis(500),
        held: Held::Never,
    }
}

async fn sh(script: &str, limits: Limits, stop: CancellationToken) -> Run {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c").arg(script);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l2 = lines.clone();
    let pid = Arc::new(Mutex::new(0));
    let p2 = pid.clone();
    let t = Instant::now();
    let f = supervise(
        cmd,
        limits,
        Group::Own,
        stop,
        move |s: Spawned| *p2.lock().unwrap() = s.pid,
        move |l| l2.lock().unwrap().push(l),
    )
    .await
    .unwrap();
    let pid = *pid.lock().unwrap();
    Run {
        ended: f.ended,
        code: f.exit_code(),
        signal: f.signal(),
        killed: f.killed,
        stderr: f.stderr_tail.clone(),
        lines: lines.lock().unwrap().clone(),
        pid,
        took: t.elapsed(),
    }
}

/// Every live process whose process group is `pgid` (the run's group).
fn group_members(pgid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| proc_stat(*pid).is_some_and(|s| s.pgrp == pgid && s.alive()))
        .collect()
}

fn assert_nothing_left(r: &Run) {
    assert!(r.pid > 0);
    // The sweep is synchronous, but give the kernel a moment to reap.
    for _ in 0..50 {
        if group_members(r.pid).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("processes of the run are alive: {:?}", group_members(r.pid));
}

#[tokio::test]
async fn a_clean_exit_with_lines_and_stderr() {
    let r = sh(
        "echo '{\"event\":\"started\"}'; echo oops >&2; echo done; exit 3",
        limits(5000, 5000, 10000),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(r.ended, Ended::Exited);
    assert_eq!(r.code, Some(3));
    assert_eq!(r.lines, vec!["{\"event\":\"started\"}", "done"]);
    assert_eq!(r.stderr, "oops");
    assert_nothing_left(&r);
}

#[tokio::test]
async fn startup_timeout_when_nothing_is_printed() {
    let r = sh(
        "sleep 30",
        limits(300, 5000, 10000),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(r.ended, Ended::StartupTimeout);
    assert!(r.took < Duration::from_secs(5), "{:?}", r.took);
    assert_eq!(r.signal, Some(15), "SIGTERM was enough");
    assert!(!r.killed);
    assert_nothing_left(&r);
}

#[tokio::test]
async fn idle_timeout_after_the_first_line() {
    let r = sh(
        "echo hi; sleep 30",
        limits(5000, 300, 10000),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(r.ended, Ended::IdleTimeout);
    assert_eq!(r.lines, vec!["hi"]);
    assert_nothing_left(&r);
}

/// While held (waiting for an approval) silence is not idleness; once the hold
/// ends, the idle limit applies again. The total limit holds throughout.
#[tokio::test]
async fn a_held_process_is_not_idle_until_the_hold_ends() {
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let f2 = flag.clone();
    // Held three times the idle limit: unheld, it would have ended a third in.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(60)).await;
        f2.store(false, std::sync::atomic::Ordering::Relaxed);
    });
    let mut l = limits(5000, 20, 10000);
    l.held = Held::Flag(flag);
    let r = sh("echo hi; sleep 30", l, CancellationToken::new()).await;
    assert_eq!(r.ended, Ended::IdleTimeout);
    assert!(
        r.took >= Duration::from_millis(60) && r.took < Duration::from_secs(5),
        "held for 0.06 s, then idle after 0.02 s: took {:?}",
        r.took
    );
    assert_nothing_left(&r);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("held");
    std::fs::write(&file, "").unwrap();
    let mut l = limits(5000, 300, 1500);
    l.held = Held::File(file);
    let r = sh("echo hi; sleep 30", l, CancellationToken::new()).await;
    assert_eq!(
        r.ended,
        Ended::TotalTimeout,
        "a hold never outlasts the total limit"
    );
    assert_nothing_left(&r);
}

#[tokio::test]
async fn total_timeout_even_while_chatty() {
    let r = sh(
        "while true; do echo tick; sleep 0.05; done",
        limits(5000, 5000, 600),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(r.ended, Ended::TotalTimeout);
    assert!(r.lines.len() >= 3);
    assert_nothing_left(&r);
}

#[tokio::test]
async fn total_timeout_after_stdout_is_closed() {
    // Closing stdout is not exiting: the deadline still holds.
    let r = sh(
        "exec >/dev/null; sleep 30",
        limits(5000, 5000, 500),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(r.ended, Ended::TotalTimeout);
    assert_nothing_left(&r);
}

#[tokio::test]
async fn a_worker_that_ignores_sigterm_is_killed() {
    let r = sh(
        "trap '' TERM; echo ready; while true; do sleep 0.1; done",
        limits(5000, 300, 10000),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(r.ended, Ended::IdleTimeout);
    assert!(r.killed, "needed SIGKILL");
    assert_eq!(r.signal, Some(9));
    assert_nothing_left(&r);
}

#[tokio::test]
async fn a_forked_grandchild_does_not_outlive_the_run() {
    // The grandchild keeps running (and holds stdout) after its parent exits.
    let r = sh(
        "(trap '' TERM; sleep 60) & echo forked; exit 0",
        limits(5000, 5000, 10000),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(r.ended, Ended::Exited);
    assert_eq!(r.code, Some(0));
    assert_eq!(r.lines, vec!["forked"]);
    assert!(
        r.took < Duration::from_secs(5),
        "did not wait for the grandchild: {:?}",
        r.took
    );
    assert_nothing_left(&r);
}

#[tokio::test]
async fn a_stop_kills_the_whole_group() {
    let (stop, dir) = (CancellationToken::new(), tempfile::tempdir().unwrap());
    let started = dir.path().join("started");
    let (s2, seen) = (stop.clone(), started.clone());
    // Stopped once both children run.
    tokio::spawn(async move {
        let end = Instant::now() + Duration::from_secs(10);
        while !seen.exists() && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        s2.cancel();
    });
    let script = format!(
        "sleep 60 & sleep 60 & touch '{}'; echo two; wait",
        started.display()
    );
    let r = sh(&script, limits(5000, 5000, 10000), stop).await;
    assert_eq!(r.ended, Ended::Stopped);
    assert_nothing_left(&r);
}

#[tokio::test]
async fn bad_utf8_and_huge_lines_do_not_stop_the_reader() {
    // 3 MiB without a newline, then bad UTF-8, then a normal line: the reader keeps
    // going (a stalled reader would block the child on a full pipe until the limit).
    let r = sh(
        "head -c 3145728 /dev/zero | tr '\\0' x; echo; printf '\\377\\376 bad\\n'; echo '{\"b\":2}'; exit 4",
        limits(5000, 5000, 20000),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(r.ended, Ended::Exited);
    assert_eq!(r.code, Some(4));
    assert_eq!(
        r.lines,
        vec![
            "<line too long: 3145728 bytes>".to_owned(),
            "\u{FFFD}\u{FFFD} bad".to_owned(),
            "{\"b\":2}".to_owned()
        ]
    );
    assert_nothing_left(&r);
}

#[tokio::test]
async fn a_crash_mid_run_is_reported_with_its_signal() {
    let r = sh(
        "echo '{\"event\":\"started\"}'; kill -SEGV $$",
        limits(5000, 5000, 10000),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(r.ended, Ended::Exited);
    assert_eq!(r.signal, Some(11));
    assert_eq!(r.code, None);
    assert_nothing_left(&r);
}

#[tokio::test]
async fn huge_stderr_is_kept_bounded() {
    let r = sh(
        "head -c 1048576 /dev/zero | tr '\\0' e >&2; echo end >&2",
        limits(5000, 5000, 10000),
        CancellationToken::new(),
    )
    .await;
    assert!(r.stderr.len() <= agent_worker::process::STDERR_TAIL + 4);
    assert!(r.stderr.ends_with("end"));
    assert_nothing_left(&r);
}
