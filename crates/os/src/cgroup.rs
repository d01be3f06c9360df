//! A process limit that holds for root too: a `pids` cgroup of each run's own
//! (RLIMIT_NPROC does not apply to root, and counts every process of a user
//! elsewhere). The kernel makes `agent-worker-<kernel>/<run>` where a pids
//! cgroup is writable (cgroup v1's `pids` hierarchy, or a v2 subtree delegated
//! to this process with `pids` enabled), the worker joins it before its sandbox
//! applies, and the kernel kills what is left in it and removes it when the run
//! is settled; [`Pids::sweep`] removes what a killed kernel left.

use std::path::{Path, PathBuf};

/// Where this kernel's runs' cgroups go (`<root>/agent-worker-<kernel>`).
#[derive(Debug, Clone)]
pub struct Pids {
    base: PathBuf,
}

/// cgroup v1's pids hierarchy, where most machines with v1 mount it.
const V1: &str = "/sys/fs/cgroup/pids";

/// A writable folder of the pids controller new cgroups can be made in, if any.
pub fn root() -> Option<PathBuf> {
    let writable = |p: &Path| nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok();
    let v1 = Path::new(V1);
    if v1.join("cgroup.procs").exists() && writable(v1) {
        return Some(v1.to_owned());
    }
    delegated_v2().filter(|p| writable(p))
}

/// This process's own v2 cgroup, when `pids` is enabled for its children
/// (a delegated subtree: its children get `pids.max`).
fn delegated_v2() -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .iter()
        .map(|m| Path::new(m).join(rel.trim_start_matches('/')))
        .find(|d| {
            std::fs::read_to_string(d.join("cgroup.subtree_control"))
                .is_ok_and(|s| s.split_whitespace().any(|c| c == "pids"))
        })
}

impl Pids {
    /// The cgroups of the kernel named `kernel` (unique per data dir), when this
    /// machine has a writable pids cgroup, swept of what a killed kernel left
    /// (made by the first run).
    pub fn open(kernel: &str) -> Option<Self> {
        let p = Self {
            base: root()?.join(format!("agent-worker-{kernel}")),
        };
        p.sweep();
        Some(p)
    }

    /// A run's cgroup (made by [`Self::make`]).
    pub fn dir(&self, run: &str) -> PathBuf {
        self.base.join(run)
    }

    /// A run's cgroup, made with at most `max` processes.
    pub fn make(&self, run: &str, max: u64) -> std::io::Result<PathBuf> {
        let dir = self.dir(run);
        // Once more if the kernel's folder went in between ([`Self::close`]).
        std::fs::create_dir_all(&dir).or_else(|_| std::fs::create_dir_all(&dir))?;
        std::fs::write(dir.join("pids.max"), max.to_string())?;
        Ok(dir)
    }

    /// Removes this kernel's folder when no run's cgroup is left in it (after
    /// each run, so that a kernel that is not stopped leaves nothing either).
    pub fn close(&self) {
        let _ = std::fs::remove_dir(&self.base);
    }

    /// Kills what is left of every run's cgroup and removes them (the leftovers
    /// of a kernel that was killed).
    pub fn sweep(&self) {
        let Ok(dir) = std::fs::read_dir(&self.base) else {
            return;
        };
        for e in dir.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove(&e.path());
            }
        }
    }
}

/// The cgroup `dir`'s process list, opened to [`join`] it later (from a
/// sandbox that can no longer open it); `None` when this process is in it
/// already ([`enter`] from its parent).
pub fn opened(dir: &Path) -> std::io::Result<Option<std::fs::File>> {
    let tail: Vec<_> = dir.iter().rev().take(2).collect();
    let tail = match tail[..] {
        [run, kernel] => Path::new(kernel).join(run),
        _ => dir.to_owned(),
    };
    let inside = std::fs::read_to_string("/proc/self/cgroup").is_ok_and(|c| {
        c.lines()
            .any(|l| Path::new(l.rsplit(':').next().unwrap_or("")).ends_with(&tail))
    });
    if inside {
        return Ok(None);
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))?;
    Ok(Some(f))
}

/// Joins this process to the cgroup whose process list is `procs` (its
/// children are born in it).
pub fn join(mut procs: std::fs::File) -> std::io::Result<()> {
    use std::io::Write;
    procs.write_all(std::process::id().to_string().as_bytes())
}

/// Moves the process `pid` into the cgroup `dir`. A move can wait ~10 ms for the
/// machine's RCU grace period: the kernel moves a worker as soon as it spawned
/// it, while the worker starts, and the worker [`join`]s too unless moved.
pub fn enter(dir: &Path, pid: u32) -> std::io::Result<()> {
    std::fs::write(dir.join("cgroup.procs"), pid.to_string())
}

/// The processes in the cgroup `dir`.
pub fn procs(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// How many forks the cgroup `dir` refused at its `pids.max`.
pub fn refused_forks(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("pids.events"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("max "))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Kills every process in the cgroup `dir` until none is left (one killed while
/// it forks may leave a child: another round gets it; a process with a pending
/// SIGKILL forks no more).
pub fn kill_all(dir: &Path) {
    for _ in 0..1000 {
        let pids = procs(dir);
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Kills what is in the cgroup `dir` and removes it.
pub fn remove(dir: &Path) {
    kill_all(dir);
    // The last processes killed may take a moment to be reaped.
    for _ in 0..200 {
        match std::fs::remove_dir(dir) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_missing_cgroup_has_no_processes_and_refused_nothing() {
        let d = tempfile::tempdir().unwrap();
        assert!(super::procs(d.path()).is_empty());
        assert_eq!(super::refused_forks(d.path()), 0);
        std::fs::write(d.path().join("pids.events"), "max 7\n").unwrap();
        assert_eq!(super::refused_forks(d.path()), 7);
    }
}
