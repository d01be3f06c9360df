//! The OS sandbox a worker puts itself in, as the kernel decided it
//! ([`domain::sandbox::Sandbox`]), before its async runtime starts a thread:
//! Landlock restricts the calling thread, and every thread and process made after
//! inherits it, so the CLI, its shells, scripts and interpreters are held by the
//! same rules and none can lift them.
//!
//! In order: a user namespace of the run's own (so that its process limit counts
//! the run's processes, not every process of the user), the resource limits,
//! `no_new_privs`, then the Landlock ruleset (files, TCP connections, signals
//! out); the run's own pids cgroup, where the machine has one, before the
//! worker starts any process ([`counted`]).

use domain::sandbox::{Limits, Mode, Sandbox, cover};
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use std::path::{Path, PathBuf};

/// The ABI whose rights the ruleset names (newer machines keep them; older ones
/// get what they have, or a refusal in required mode).
const ABI_USED: ABI = ABI::V6;

/// Why a sandbox could not be applied; the message names the missing feature.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "sandbox required but {0}: run it on Linux 6.12 or later with Landlock enabled, or set the agent's permissions.sandbox to best_effort or off"
    )]
    Landlock(String),
    #[error(
        "sandbox required but {0}: allow user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces above 0, and on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0; in a container, a seccomp profile allowing unshare) or run the kernel as root, or set the agent's permissions.sandbox to best_effort or off"
    )]
    Mount(String),
    #[error("sandbox: cannot set {what}: {source}")]
    Limit {
        what: &'static str,
        source: std::io::Error,
    },
}

/// The environment that leads to the user's session (an SSH agent, the desktop's
/// bus and display): no sandboxed run inherits it.
const SESSION_ENV: &[&str] = &[
    "SSH_AUTH_SOCK",
    "DBUS_SESSION_BUS_ADDRESS",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XDG_RUNTIME_DIR",
];

/// What was applied, for the run's progress line.
#[derive(Debug, Default)]
pub struct Applied {
    pub landlock: bool,
    pub own_namespace: bool,
    /// What a best-effort sandbox could not hold, in words.
    pub missing: Vec<String>,
}

/// Applies `s` to this process. Call it before any thread exists.
pub fn apply(s: &Sandbox) -> Result<Applied, SandboxError> {
    let mut applied = Applied::default();
    if s.mode == Mode::Off {
        return Ok(applied);
    }
    // The run's pids cgroup, unless the kernel moved this worker into it already:
    // opened now, joined once the sandbox is on, by a thread of its own (a move
    // may wait ~10 ms for the machine's RCU grace period), before the worker
    // starts any process ([`counted`]).
    let procs = match &s.cgroup {
        Some(dir) => os::cgroup::opened(dir).map_err(|source| SandboxError::Limit {
            what: "processes (its pids cgroup)",
            source,
        })?,
        None => None,
    };
    // The user's session: its agents and buses act outside the sandbox.
    for k in SESSION_ENV {
        // SAFETY: as below, no other thread exists yet.
        unsafe { std::env::remove_var(k) };
    }
    // The CLI's own home (kept per agent in the data dir), in place of the
    // user's: the user's `HOME` stays where the worker looks for the CLI.
    let _ = USER_HOME.set(std::env::var_os("HOME").map(PathBuf::from));
    for (k, v) in &s.env {
        // SAFETY: as below, no other thread exists yet.
        unsafe { std::env::set_var(k, v) };
    }
    // The run's own temporary folder, in its scratch folder (in the data dir).
    if std::fs::create_dir_all(&s.tmp).is_ok() {
        // SAFETY: no other thread exists yet (the caller's contract), so nothing
        // reads the environment while it changes.
        unsafe { std::env::set_var("TMPDIR", &s.tmp) };
    }
    for f in &s.folders {
        // Never through a link: `ln -s / .gemini` would grant where it points.
        if std::fs::symlink_metadata(f).is_err() && std::fs::create_dir(f).is_ok() {
            MADE.lock().unwrap().push(f.clone());
        }
    }
    applied.own_namespace = own_user_namespace();
    limits(&s.limits, applied.own_namespace)?;
    mounts(s, &mut applied)?;
    if nix::unistd::geteuid().is_root() {
        // Root, in the machine's namespace or one of its own: no capability
        // survives into the run (one could undo the mounts without Landlock).
        let _ = os::sandbox::no_root_powers();
        if let Err(e) = os::sandbox::drop_capabilities() {
            lacking(
                s,
                &mut applied,
                format!("cannot drop root's capabilities ({e})"),
            )?;
        }
    }
    applied.landlock = landlock(s)?;
    let _ = LANDLOCKED.set(applied.landlock);
    if let Some(f) = procs {
        *JOINING.lock().unwrap() = Some(std::thread::spawn(move || os::cgroup::join(f)));
    }
    Ok(applied)
}

/// The user's `HOME`, as the worker was started with it ([`apply`] gives the
/// run a home of its own).
static USER_HOME: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();

/// The user's `HOME` (where the CLIs are installed), whatever home the run has.
pub fn user_home() -> Option<PathBuf> {
    USER_HOME
        .get()
        .cloned()
        .unwrap_or_else(|| std::env::var_os("HOME").map(PathBuf::from))
}

/// Whether [`apply`] put this process under Landlock (required, or a
/// best_effort the machine could honour).
static LANDLOCKED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Whether the run's files rules hold this process and everything it starts.
pub fn landlocked() -> bool {
    LANDLOCKED.get().copied().unwrap_or(false)
}

/// The run's home of its own (the agent's, which [`apply`] put in `HOME`), when
/// it has one: none with its sandbox off, where `HOME` is the user's.
pub fn own_home() -> Option<PathBuf> {
    let user = USER_HOME.get()?.clone();
    let home = std::env::var_os("HOME").map(PathBuf::from)?;
    (Some(&home) != user.as_ref()).then_some(home)
}

/// The run's mount namespace ([`domain::sandbox::Mounts`]): `.git` pinned
/// first, then the read-only binds over it and the contracts' held paths, and a
/// private `/dev/shm`. Before Landlock, which then forbids any change of mounts.
fn mounts(s: &Sandbox, applied: &mut Applied) -> Result<(), SandboxError> {
    let m = &s.mounts;
    for glob in &m.unheld {
        lacking(s, applied, domain::sandbox::too_many(glob))?;
    }
    if m.read_only.is_empty() && m.pinned.is_empty() && m.shm_mb == 0 {
        return Ok(());
    }
    if let Err(e) = os::sandbox::own_mount_namespace() {
        let why = format!("cannot make a mount namespace of its own ({e})");
        // A private /dev/shm alone is best effort: with nothing inside a
        // writable folder to hold, the run shares the machine's (and says so).
        if m.read_only.is_empty() && m.pinned.is_empty() {
            applied.missing.push(why);
            return Ok(());
        }
        return lacking(s, applied, why);
    }
    let steps = m
        .pinned
        .iter()
        .map(|p| (p, "pin", os::sandbox::pin(p)))
        .collect::<Vec<_>>();
    let binds = m
        .read_only
        .iter()
        .map(|p| (p, "hold read-only", os::sandbox::bind_read_only(p)));
    for (p, what, r) in steps.into_iter().chain(binds) {
        // Gone since the plan was made: nothing left to hold.
        if let Err(e) = r
            && e.kind() != std::io::ErrorKind::NotFound
        {
            lacking(s, applied, format!("cannot {what} {} ({e})", p.display()))?;
        }
    }
    let shm = Path::new("/dev/shm");
    // A machine without one has nothing to share there.
    if m.shm_mb > 0
        && shm.is_dir()
        && let Err(e) = os::sandbox::private_tmpfs(shm, m.shm_mb)
    {
        lacking(s, applied, format!("cannot make a private /dev/shm ({e})"))?;
    }
    Ok(())
}

/// What [`apply`] could not hold of a best-effort sandbox, until the run says so.
pub static MISSING: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// A part of the sandbox this machine cannot give: refused when it is required,
/// said in the run when it is best effort.
fn lacking(s: &Sandbox, applied: &mut Applied, why: String) -> Result<(), SandboxError> {
    if s.mode == Mode::Required {
        return Err(SandboxError::Mount(why));
    }
    applied.missing.push(why);
    Ok(())
}

/// The thread joining the run's pids cgroup, until [`counted`] waited for it.
static JOINING: std::sync::Mutex<Option<std::thread::JoinHandle<std::io::Result<()>>>> =
    std::sync::Mutex::new(None);
static JOIN_FAILED: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Waits until this worker is in its run's pids cgroup (at once after the
/// first time): call it before starting any process, so that the run's
/// processes limit counts it.
pub fn counted() -> Result<(), String> {
    let mut joining = JOINING.lock().unwrap();
    if let Some(t) = joining.take() {
        let r = t
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("panicked")));
        if let Err(e) = r {
            let _ = JOIN_FAILED.set(format!("sandbox: cannot join its pids cgroup: {e}"));
        }
    }
    JOIN_FAILED.get().map_or(Ok(()), |e| Err(e.clone()))
}

/// A user namespace mapping the user to itself: files look the same, and
/// RLIMIT_NPROC counts this namespace's processes (Linux 5.14+), not the user's.
fn own_user_namespace() -> bool {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    if nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER).is_err() {
        return false;
    }
    let _ = std::fs::write("/proc/self/setgroups", "deny");
    let _ = std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"));
    let _ = std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"));
    true
}

fn limits(l: &Limits, own_namespace: bool) -> Result<(), SandboxError> {
    use nix::sys::resource::{Resource, setrlimit};
    const MIB: u64 = 1024 * 1024;
    let mut set = vec![
        (
            "memory (RLIMIT_DATA)",
            Resource::RLIMIT_DATA,
            l.memory_mb * MIB,
        ),
        (
            "file size (RLIMIT_FSIZE)",
            Resource::RLIMIT_FSIZE,
            l.file_mb * MIB,
        ),
        ("CPU time (RLIMIT_CPU)", Resource::RLIMIT_CPU, l.cpu_s),
    ];
    // Without a namespace of its own the count would be every process of the
    // user, the kernel's included: a limit then would fail other runs' forks.
    if own_namespace {
        set.push((
            "processes (RLIMIT_NPROC)",
            Resource::RLIMIT_NPROC,
            l.processes,
        ));
    }
    for (what, r, v) in set {
        // Never above what the worker was given (a soft limit may not pass the hard).
        let (_, hard) = nix::sys::resource::getrlimit(r).unwrap_or((v, v));
        let v = v.min(hard);
        // CPU: SIGXCPU at the soft limit says which limit it was; SIGKILL comes
        // at the hard one, a little later, for a process that ignores it.
        let h = if r == Resource::RLIMIT_CPU {
            v.saturating_add(5).min(hard)
        } else {
            v
        };
        setrlimit(r, v, h).map_err(|e| SandboxError::Limit {
            what,
            source: e.into(),
        })?;
    }
    Ok(())
}

fn landlock(s: &Sandbox) -> Result<bool, SandboxError> {
    let level = match s.mode {
        Mode::Required => CompatLevel::HardRequirement,
        _ => CompatLevel::BestEffort,
    };
    let err = |e: landlock::RulesetError| SandboxError::Landlock(e.to_string());
    if s.mode == Mode::Required {
        let have = domain_abi();
        if have < s.abi {
            return Err(SandboxError::Landlock(format!(
                "this machine's Landlock ABI is {have}, below the {} it needs",
                s.abi
            )));
        }
    }
    let mut rs = Ruleset::default()
        .set_compatibility(level)
        .handle_access(AccessFs::from_all(ABI_USED))
        .map_err(err)?;
    if s.connect.is_some() {
        rs = rs.handle_access(AccessNet::ConnectTcp).map_err(err)?;
    }
    // Signals to processes outside the sandbox (the kernel, other runs) and their
    // abstract unix sockets (a desktop's bus, an X server): where the machine has
    // it, whatever the mode.
    rs = rs
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(err)?
        .set_compatibility(level);
    let mut rules = rs.create().map_err(err)?;
    let read = AccessFs::from_read(ABI_USED);
    let all = AccessFs::from_all(ABI_USED);
    // Symbolic links are left out: a rule on one would open where it points
    // (Landlock judges a path where it lands, so a link to an open place works).
    let list = |p: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(p)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| !t.is_symlink()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    };
    let (readable, writable) = split(s, &list);
    let grants = readable
        .iter()
        .map(|p| (p, read))
        .chain(writable.iter().chain(&s.devices).map(|p| (p, all)));
    for (path, access) in grants {
        // A path that is not there (a device this machine lacks) grants nothing.
        let Ok(fd) = PathFd::new(path) else { continue };
        // Asked of the open file: no second walk of the path.
        let is_dir = nix::sys::stat::fstat(std::os::fd::AsFd::as_fd(&fd)).map_or(true, |st| {
            st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFDIR
        });
        let mut access = if is_dir {
            access
        } else {
            access & AccessFs::from_file(ABI_USED)
        };
        // No terminal ioctl on the controlling tty (TIOCSTI types into a shell).
        if path.as_path() == Path::new("/dev/tty") {
            access &= !AccessFs::IoctlDev;
        }
        rules = rules.add_rule(PathBeneath::new(fd, access)).map_err(err)?;
    }
    // The run that made a workspace folder removes it again when empty: its
    // parent lets empty folders go (and nothing else).
    for parent in real_dirs(&s.folders).filter_map(|f| f.parent()) {
        let Ok(fd) = PathFd::new(parent) else {
            continue;
        };
        rules = rules
            .add_rule(PathBeneath::new(fd, AccessFs::RemoveDir))
            .map_err(err)?;
    }
    for port in s.connect.iter().flatten() {
        rules = rules
            .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
            .map_err(err)?;
    }
    let status = rules.restrict_self().map_err(err)?;
    Ok(status.ruleset != RulesetStatus::NotEnforced)
}

/// The readable and the writable places, each grant split around the hidden
/// places it holds (a folder of its own inside one, such as the run's state in
/// the data dir, stays whole).
fn split(s: &Sandbox, list: &dyn Fn(&Path) -> Vec<PathBuf>) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let within = |p: &PathBuf, extra: &[PathBuf]| -> Vec<PathBuf> {
        let inside: Vec<PathBuf> = s
            .hidden
            .iter()
            .chain(extra)
            .filter(|h| h.starts_with(p))
            .cloned()
            .collect();
        cover(p, &inside, list)
    };
    let readable: Vec<PathBuf> = cover(Path::new("/"), &s.hidden, list)
        .into_iter()
        .chain(s.readable.iter().flat_map(|p| within(p, &[])))
        .collect();
    let writable: Vec<PathBuf> = s
        .writable
        .iter()
        .flat_map(|w| within(w, &s.unwritable))
        .chain(real_dirs(&s.folders).flat_map(|p| within(p, &s.unwritable)))
        .collect();
    (readable, writable)
}

/// The folders among `paths` that are folders themselves, not links to one.
fn real_dirs(paths: &[PathBuf]) -> impl Iterator<Item = &PathBuf> {
    paths
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
}

/// Where a CLI's workspace configuration folder `name` (`.gemini`, `.cursor`)
/// goes: in the run's folder `cwd`, unless its sandbox leaves that one out (the
/// run's folder is the user's home, whose `.gemini` is the user's CLI's own), then
/// in the run's own home, where the CLI reads it as its user-level configuration.
pub fn workspace_dir(cwd: &Path, sandbox: Option<&Sandbox>, name: &str) -> PathBuf {
    let at = cwd.join(name);
    let Some(s) = sandbox.filter(|s| s.mode != Mode::Off && !s.folders.contains(&at)) else {
        return at;
    };
    s.env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map_or(at, |(_, home)| Path::new(home).join(name))
}

/// The folders [`apply`] made for a CLI's workspace configuration.
static MADE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Whether [`apply`] made this folder (the run that merges into it then removes it
/// when it is empty again, as if it had made it).
pub fn made(dir: &Path) -> bool {
    MADE.lock().unwrap().iter().any(|m| m == dir)
}

/// Removes the folders [`apply`] made that are still empty (a run that never
/// reached its workspace configuration).
pub fn tidy() {
    for dir in MADE.lock().unwrap().iter() {
        let _ = std::fs::remove_dir(dir);
    }
}

/// This machine's Landlock ABI (0 without Landlock).
pub fn domain_abi() -> u32 {
    os::sandbox::landlock_abi()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(mode: Mode, folders: &[&str], unwritable: &[&str]) -> Sandbox {
        let paths = |v: &[&str]| v.iter().map(PathBuf::from).collect();
        Sandbox {
            mode,
            hidden: Vec::new(),
            readable: Vec::new(),
            writable: Vec::new(),
            unwritable: paths(unwritable),
            folders: paths(folders),
            devices: Vec::new(),
            connect: None,
            limits: Limits::default(),
            tmp: "/d/scratch/run-1/tmp".into(),
            abi: 6,
            cgroup: None,
            env: vec![("HOME".into(), "/d/homes/agent-7".into())],
            mounts: Default::default(),
        }
    }

    #[test]
    fn a_workspace_folder_the_kernel_left_out_goes_to_the_runs_home() {
        let check = |cwd: &str, s: Option<Sandbox>, expect: &str| {
            let got = workspace_dir(Path::new(cwd), s.as_ref(), ".gemini");
            assert_eq!(got, Path::new(expect), "{cwd}");
        };
        let granted = || sandbox(Mode::Required, &["/srv/a/.gemini"], &[]);
        check("/srv/a", Some(granted()), "/srv/a/.gemini");
        check("/srv/a", None, "/srv/a/.gemini");
        check(
            "/home/u",
            Some(sandbox(Mode::Off, &[], &[])),
            "/home/u/.gemini",
        );
        let left_out = Some(sandbox(Mode::Required, &[], &["/home/u/.gemini"]));
        check("/home/u", left_out, "/d/homes/agent-7/.gemini");
    }

    #[test]
    fn a_workspace_folder_is_granted_around_what_it_holds_unwritable() {
        let s = sandbox(Mode::Required, &["/tmp"], &["/tmp/held"]);
        let list = |p: &Path| -> Vec<PathBuf> {
            match p.to_str() {
                Some("/tmp") => vec!["/tmp/held".into(), "/tmp/open".into()],
                _ => Vec::new(),
            }
        };
        let (_, writable) = split(&s, &list);
        assert_eq!(writable, vec![PathBuf::from("/tmp/open")]);
    }
}
