//! The OS sandbox of a run, decided here from one description: the agent's
//! profile and granted paths, its folder or worktree, the contracts' edit path
//! rules and the kernel's own places ([`domain::sandbox::Sandbox`]). The worker
//! only applies it.

use super::spec::Spec;
use domain::backends::Backend;
use domain::error::{Error, Result};
use domain::permissions::{Permissions, Profile};
use domain::sandbox::{self, DEVICES, MIN_ABI, Mode, Network, SECRETS, Sandbox};
use std::path::{Path, PathBuf};

/// For tests: the Landlock ABI a required sandbox needs, when above the usual,
/// in the agent's environment or the kernel's (asking for one beyond the
/// machine's shows the refusal a machine without Landlock gives). It can only
/// make a sandbox stricter.
pub const ABI_ENV: &str = "SANDBOX_TEST_ABI";

/// The ABI a required sandbox needs.
fn needed_abi(spec: &Spec) -> u32 {
    spec.env
        .get(ABI_ENV)
        .cloned()
        .or_else(|| std::env::var(ABI_ENV).ok())
        .and_then(|v| v.parse().ok())
        .map_or(MIN_ABI, |v: u32| v.max(MIN_ABI))
}

/// Refuses a run whose sandbox is required where this machine cannot give it.
pub(crate) fn check(spec: &Spec) -> Result<()> {
    if spec.config.permissions.sandbox_mode() != Mode::Required {
        return Ok(());
    }
    let (have, need) = (os::sandbox::landlock_abi(), needed_abi(spec));
    if have >= need {
        return Ok(());
    }
    let missing = if have == 0 {
        "Landlock (not in this machine's kernel, or not enabled)".to_owned()
    } else {
        format!("Landlock ABI {need} (this machine has {have})")
    };
    Err(Error::unavailable(format!(
        "{}'s sandbox is required but this machine lacks {missing}: run it on Linux 6.12 or later \
         with Landlock enabled (lsm=...,landlock), or set its permissions.sandbox to best_effort \
         or off (agent_update)",
        spec.name
    )))
}

/// What this machine supports, in words (backend_list's readiness).
pub fn support() -> String {
    let abi = os::sandbox::landlock_abi();
    let ns = match (os::cgroup::root(), os::sandbox::user_namespaces()) {
        (Some(root), _) => format!(
            "a process limit per run by a pids cgroup of its own (in {}), root included",
            root.display()
        ),
        (None, true) => "a process limit per run by RLIMIT_NPROC in a user namespace of its \
                         own (root is exempt: no writable pids cgroup)"
            .to_owned(),
        (None, false) => "no user namespaces and no writable pids cgroup (no process limit)".into(),
    };
    // Probed once per kernel, in a forked child.
    static MOUNTS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ns = if *MOUNTS.get_or_init(os::sandbox::mount_namespaces) {
        ns
    } else {
        format!(
            "{ns}; no mount namespace can be made (allow user namespaces: on Ubuntu sysctl \
             kernel.apparmor_restrict_unprivileged_userns=0), so a required sandbox that holds \
             a path in a writable folder (a repository's .git, a contract's edit glob) is refused"
        )
    };
    match abi {
        0 => format!("no Landlock: required sandboxes are refused; {ns}"),
        a if a < MIN_ABI => {
            format!("Landlock ABI {a}, below {MIN_ABI}: required sandboxes are refused; {ns}")
        }
        a => format!("Landlock ABI {a}; {ns}"),
    }
}

/// The places a run is given.
pub(crate) struct Places<'a> {
    pub cwd: &'a Path,
    pub state_dir: &'a Path,
    pub scratch: PathBuf,
    pub data_dir: &'a Path,
    /// The agent's home of its own for its CLI ([`super::home`]), made.
    pub home: &'a Path,
    pub skills: Vec<PathBuf>,
    pub kernel_url: &'a str,
    /// The path globs the contracts in force refuse the agent's edits.
    pub held: Vec<String>,
}

/// The run's sandbox (None when its agent's is off). Reads the file system a
/// little (the scratch folders beside this run's): call it off the async threads.
///
/// Every place comes from the kernel's records or the agent's definition, never
/// from a file in the agent's folder (which it may have rewritten last run).
pub(crate) fn plan(spec: &Spec, p: &Permissions, at: &Places<'_>) -> Option<Sandbox> {
    let mode = p.sandbox_mode();
    if mode == Mode::Off {
        return None;
    }
    let env = |k: &str| spec.env.get(k).cloned().or_else(|| std::env::var(k).ok());
    let home = env("HOME").map(PathBuf::from);
    let tilde = |s: &str| match (s.strip_prefix("~/"), &home) {
        (Some(rest), Some(h)) => h.join(rest),
        _ => PathBuf::from(s),
    };
    let grants: Vec<(bool, PathBuf)> = p
        .granted_paths()
        .map(|(w, path)| (w, tilde(path)))
        .collect();
    let homes = user_homes(home.as_ref());
    let hidden = hidden(at, &homes, &grants);
    let git = worktree_git(spec);
    let mut own = vec![
        at.cwd.to_owned(),
        at.state_dir.to_owned(),
        at.scratch.clone(),
        at.home.to_owned(),
    ];
    let mut readable = own.clone();
    readable.extend(at.skills.iter().cloned());
    // The repository's git folder is read; written are its objects and this
    // worktree's own folder, never its config, hooks or refs (which the
    // kernel's own git would then obey outside any sandbox).
    let mut git_writable = Vec::new();
    if let Some((git_dir, common)) = &git {
        readable.push(common.clone());
        git_writable.extend([common.join("objects"), git_dir.clone()]);
    }
    // The CLI writes its state in its own home, at every profile: the user's
    // is not writable, not even at full (a setting planted there would run
    // later in the user's own CLI, outside any sandbox).
    let mut writable = vec![at.state_dir.to_owned(), at.scratch.clone()];
    let beneath_hidden = |p: &Path| hidden.iter().any(|h| p.starts_with(h));
    match p.profile {
        Profile::Read => writable.push(at.home.to_owned()),
        Profile::Edit => writable.extend(own.drain(..).chain(git_writable)),
        Profile::Full => writable.extend(
            [PathBuf::from("/")]
                .into_iter()
                .chain(own)
                .chain(git_writable),
        ),
    }
    // A grant beneath a hidden place grants nothing (the worker splits one
    // that holds a hidden place around it).
    for (write, path) in grants.into_iter().filter(|(_, p)| !beneath_hidden(p)) {
        readable.push(path.clone());
        if write {
            writable.push(path);
        }
    }
    // The contracts' edit path rules stay with the edit tools and the command
    // patterns: Landlock cannot keep a folder writable but a folder inside it.
    // The user's CLI state is not writable even where a grant or the agent's
    // folder holds it; below full, nor are the shell's start-up files and the
    // places the user's tools run from.
    let below_full = (p.profile != Profile::Full).then_some(STARTUP).into_iter();
    let startup = below_full.flat_map(|s| in_homes(&homes, s));
    let mut unwritable: Vec<PathBuf> = user_cli_state(&homes, &env)
        .chain(startup)
        .filter(|p| state_place(p, &hidden))
        .collect();
    if p.profile == Profile::Full {
        unwritable.extend(hidden.iter().cloned());
        if let Some((git_dir, common)) = &git {
            unwritable.extend(repository_held(common, git_dir));
        }
    }
    let folders = workspace_folders(spec.backend, at.cwd, &hidden, &unwritable);
    Some(Sandbox {
        mode,
        hidden,
        readable,
        writable,
        unwritable,
        folders,
        devices: DEVICES.iter().map(PathBuf::from).collect(),
        connect: ports(spec, p.network_reach(), at.kernel_url),
        limits: p.sandbox_limits(),
        tmp: at.scratch.join("tmp"),
        abi: needed_abi(spec),
        cgroup: None,
        env: super::home::env(at.home, &env),
        mounts: mounts(p.profile, at, git.is_some()),
    })
}

/// The user's homes: the agent's `HOME` (its environment's, or the kernel's)
/// and the real one, from the user database.
fn user_homes(home: Option<&PathBuf>) -> Vec<PathBuf> {
    let real = nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.dir);
    let mut homes: Vec<PathBuf> = home.into_iter().cloned().collect();
    homes.extend(real.filter(|r| Some(r) != home));
    homes
}

/// What the run's mount namespace holds read-only inside its writable folder:
/// a plain repository's git folder's parts that run code or hold other git
/// folders (`hooks` and `info` made first when missing), a worktree's `.git`
/// file, and what the contracts refuse its edits, each folder above them pinned
/// in place; a private `/dev/shm` always.
fn mounts(profile: Profile, at: &Places<'_>, worktree: bool) -> sandbox::Mounts {
    let mut m = sandbox::Mounts {
        shm_mb: sandbox::SHM_MB,
        ..Default::default()
    };
    if profile == Profile::Read {
        return m;
    }
    let meta = |p: &Path| std::fs::symlink_metadata(p).ok();
    let exists = |p: &Path| meta(p).is_some_and(|m| !m.file_type().is_symlink());
    let git = at.cwd.join(".git");
    match meta(&git) {
        Some(d) if d.is_dir() && profile == Profile::Edit && !worktree => {
            // Missing, they could be made in the run and not held: made empty now.
            for f in sandbox::GIT_MADE_FIRST {
                let _ = std::fs::create_dir(git.join(f));
            }
            let runs = sandbox::GIT_RUNS.iter().chain(sandbox::GIT_HELD_WHOLE);
            m.read_only
                .extend(runs.map(|r| git.join(r)).filter(|p| exists(p)));
            m.pinned.push(git);
        }
        Some(f) if f.is_file() => m.read_only.push(git),
        _ => {}
    }
    let list = |p: &Path| -> Vec<PathBuf> {
        let Ok(d) = std::fs::read_dir(p) else {
            return Vec::new();
        };
        d.flatten()
            .filter(|e| e.file_type().is_ok_and(|t| !t.is_symlink()))
            .map(|e| e.path())
            .collect()
    };
    for glob in &at.held {
        let Ok(held) = sandbox::held_by(at.cwd, glob, &exists, &list) else {
            m.unheld.push(glob.clone());
            continue;
        };
        for p in held {
            if !m.read_only.contains(&p) {
                m.read_only.push(p);
            }
        }
    }
    for p in sandbox::pins(at.cwd, &m.read_only) {
        if !m.pinned.contains(&p) {
            m.pinned.push(p);
        }
    }
    m.pinned.sort();
    m
}

/// What no run reads: the kernel's data dir, the other runs' scratch folders,
/// the user's session (`/run/user/<uid>`: its sockets) and the secrets under
/// both the user's real home and the agent's `HOME`, but those a grant names.
fn hidden(at: &Places<'_>, homes: &[PathBuf], grants: &[(bool, PathBuf)]) -> Vec<PathBuf> {
    let mut hidden: Vec<PathBuf> = vec![at.data_dir.to_owned()];
    hidden.push(PathBuf::from(format!(
        "/run/user/{}",
        nix::unistd::getuid()
    )));
    for h in homes {
        let secrets = SECRETS.iter().map(|s| h.join(s));
        hidden.extend(secrets.filter(|s| !grants.iter().any(|(_, g)| g.starts_with(s))));
    }
    hidden
}

/// Whether a place of the user's CLI state (from the agent's `HOME` or
/// environment) is held as such: a folder of its own (not `/`), neither
/// beneath a hidden place (hidden already) nor holding one.
fn state_place(p: &Path, hidden: &[PathBuf]) -> bool {
    use std::path::Component;
    let plain = p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    let deep = p.components().count() > 2;
    plain && deep && !hidden.iter().any(|h| p.starts_with(h) || h.starts_with(p))
}

/// What a `full` agent in a worktree may not write of its repository's git
/// folder `common` (as `edit` may not): all of it but its objects and the
/// worktree's own folder `git_dir`. The kernel's own git (the turn's commit, the
/// merge) obeys its config and hooks outside any sandbox, with the kernel's
/// reach (the data dir), which `full` does not have. Entries made later are
/// not held, but the kernel's git names its common dir, so no `commondir` made
/// there sends it elsewhere.
fn repository_held(common: &Path, git_dir: &Path) -> Vec<PathBuf> {
    let list = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .map(|r| r.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let worktrees = common.join("worktrees");
    let mut held: Vec<PathBuf> = list(common)
        .into_iter()
        .filter(|p| *p != common.join("objects") && *p != worktrees)
        .collect();
    held.extend(list(&worktrees).into_iter().filter(|p| p != git_dir));
    held.sort();
    held
}

/// An agent's worktree's git folder and its repository's (`commondir`), as the
/// kernel recorded them when it made the worktree: a plain folder has none.
fn worktree_git(spec: &Spec) -> Option<(PathBuf, PathBuf)> {
    let domain::workspace::Workspace::Worktree(w) = &spec.config.workspace else {
        return None;
    };
    let git_dir = w.git_dir.clone()?;
    let common = domain::workspace::git_common_dir(&git_dir)?;
    Some((git_dir, common))
}

/// A plain repository's git folder, watched over a run for the parts that run
/// code it did not have at the run's start (see [`sandbox::git_made`]).
pub(crate) struct GitWatch {
    git: PathBuf,
    before: Vec<&'static str>,
}

/// What an edit agent's sandboxed run in a plain repository may add to its git
/// folder (None elsewhere: a worktree's git dir is held by Landlock, `read`
/// writes nothing, `full` writes the user's config anyway). Call it before the
/// worker starts.
pub(crate) fn git_watch(spec: &Spec, cwd: &Path) -> Option<GitWatch> {
    let p = &spec.config.permissions;
    if p.sandbox_mode() == Mode::Off || p.profile != Profile::Edit || worktree_git(spec).is_some() {
        return None;
    }
    let git = cwd.join(".git");
    let before = git_present(&git)?;
    Some(GitWatch { git, before })
}

/// Which of [`sandbox::GIT_RUNS`] are in `git`, a real folder (None otherwise).
fn git_present(git: &Path) -> Option<Vec<&'static str>> {
    let meta = std::fs::symlink_metadata(git).ok()?;
    meta.is_dir().then(|| {
        let there = |n: &&str| std::fs::symlink_metadata(git.join(n)).is_ok();
        sandbox::GIT_RUNS.iter().copied().filter(there).collect()
    })
}

/// Removes what the run made of git's code in its git folder, never following a
/// link (a link itself is removed), once the run's processes are gone: the
/// paths removed, relative to the agent's folder.
pub(crate) fn git_sweep(w: &GitWatch) -> Vec<String> {
    let Some(now) = git_present(&w.git) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for name in sandbox::git_made(&w.before, &now) {
        let p = w.git.join(name);
        let gone = match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p),
            Ok(_) => std::fs::remove_file(&p),
            Err(e) => Err(e),
        };
        match gone {
            Ok(()) => removed.push(format!(".git/{name}")),
            Err(e) => tracing::warn!("could not remove {} the run made: {e}", p.display()),
        }
    }
    removed
}

/// The TCP ports a run may connect to: the kernel's, the traces' collector, and
/// for `model` HTTPS and every endpoint in the agent's environment or servers.
fn ports(spec: &Spec, network: Network, kernel_url: &str) -> Option<Vec<u16>> {
    if network == Network::Any {
        return None;
    }
    let mut urls: Vec<String> = vec![kernel_url.to_owned()];
    let endpoint = |k: &str| {
        let k = k.to_ascii_uppercase();
        ["_URL", "_BASE", "_ENDPOINT", "_HOST", "_PROXY"]
            .iter()
            .any(|s| k.ends_with(s))
    };
    let traces = |k: &str| k.to_ascii_uppercase().starts_with("OTEL_EXPORTER");
    let env: Vec<(String, String)> = std::env::vars()
        .chain(spec.env.iter().map(|(k, v)| (k.clone(), v.clone())))
        .collect();
    for (k, v) in &env {
        if traces(k) || (network == Network::Model && endpoint(k)) {
            urls.push(v.clone());
        }
        // OpenCode's providers and servers are in its configuration's JSON.
        if network == Network::Model && k == "OPENCODE_CONFIG_CONTENT" {
            urls.extend(sandbox::config_urls(v));
        }
    }
    if let Some(t) = telemetry::traces_url() {
        urls.push(t.to_owned());
    }
    if network == Network::Model {
        urls.push("https://model".into());
        for s in spec.config.mcp_servers.values() {
            if let domain::protocol::McpServer::Http(h) = s {
                urls.push(h.url.clone());
            }
        }
    }
    Some(sandbox::url_ports(urls.iter().map(String::as_str)))
}

/// What the user's shells and tools run at their next start (start-up files,
/// git's config, the folders commands and services are run from), in a home:
/// none writable by a run below full.
const STARTUP: &[&str] = &[
    ".bashrc",
    ".profile",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".gitconfig",
    ".config/git",
    ".local/bin",
    ".config/systemd/user",
    ".config/autostart",
    ".local/share/claude",
    ".opencode/bin",
];

/// `places` in each of `homes`.
fn in_homes<'a>(homes: &'a [PathBuf], places: &'a [&str]) -> impl Iterator<Item = PathBuf> + 'a {
    homes
        .iter()
        .flat_map(move |h| places.iter().map(move |p| h.join(p)))
}

/// Where the user's CLIs keep their state and configuration, and the caches
/// they run packages from, in each of the user's homes: none writable by a run,
/// whatever its profile.
fn user_cli_state<'a>(
    homes: &'a [PathBuf],
    env: &'a dyn Fn(&str) -> Option<String>,
) -> impl Iterator<Item = PathBuf> + 'a {
    const PLACES: &[&str] = &[
        ".cache",
        ".npm",
        ".claude",
        ".claude.json",
        ".config/claude",
        ".local/state/claude",
        ".codex",
        ".gemini",
        ".local/share/opencode",
        ".config/opencode",
        ".local/state/opencode",
        ".cursor",
        ".config/cursor",
    ];
    let vars = [
        ("CODEX_HOME", ""),
        ("CLAUDE_CONFIG_DIR", ""),
        ("GEMINI_CLI_HOME", ".gemini"),
    ];
    let in_home = in_homes(homes, PLACES);
    let xdg = ["XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"]
        .into_iter()
        .filter_map(|v| env(v).map(PathBuf::from))
        .flat_map(|d| ["claude", "opencode", "cursor"].map(|c| d.join(c)));
    in_home
        .chain(
            vars.into_iter()
                .filter_map(|(v, dot)| env(v).map(|d| PathBuf::from(d).join(dot))),
        )
        .chain(xdg)
}

/// The folders in the agent's folder `cwd` where the worker merges our server
/// into a CLI's workspace configuration (`cli/workspace.rs`). Never one of the
/// places in `hidden` or `unwritable`, beneath one or holding one (the agent's
/// folder is the user's home): the worker then writes it in the agent's home.
fn workspace_folders(
    backend: Backend,
    cwd: &Path,
    hidden: &[PathBuf],
    unwritable: &[PathBuf],
) -> Vec<PathBuf> {
    let names: &[&str] = match backend {
        Backend::Cursor => &[".cursor"],
        Backend::Gemini => &[".gemini"],
        _ => &[],
    };
    let apart = |f: &PathBuf| {
        !hidden
            .iter()
            .chain(unwritable)
            .any(|u| f.starts_with(u) || u.starts_with(f))
    };
    names.iter().map(|n| cwd.join(n)).filter(apart).collect()
}

/// The pids cgroups of this kernel's runs, named after its data dir (two
/// kernels on one machine keep apart, and a kernel's next start sweeps its own).
pub(crate) fn cgroups(data_dir: &Path) -> Option<os::cgroup::Pids> {
    let dir = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_owned());
    // FNV-1a: the same name from one build to the next.
    let h = dir
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
    os::cgroup::Pids::open(&format!("{h:016x}"))
}

/// Watches a run's cgroup until `done`: at the first fork its `pids.max` refused
/// (a fork bomb, a runaway build), kills every process in it and says so.
pub(crate) async fn watch_forks(
    dir: PathBuf,
    max: u64,
    done: tokio_util::sync::CancellationToken,
) -> Option<String> {
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = done.cancelled() => return None,
            _ = tick.tick() => {}
        }
        if os::cgroup::refused_forks(&dir) > 0 {
            let d = dir.clone();
            let _ = tokio::task::spawn_blocking(move || os::cgroup::kill_all(&d)).await;
            return Some(format!(
                "the run reached its sandbox's processes limit ({max}, the pids cgroup's \
                 pids.max): its processes were killed; raise permissions.limits.processes \
                 if it needs more"
            ));
        }
    }
}

/// The limit a signal says a process hit (`setrlimit(2)`), in words.
pub(crate) fn limit_hit(signal: i32) -> Option<&'static str> {
    match signal {
        nix::libc::SIGXCPU => Some("CPU time limit (RLIMIT_CPU)"),
        nix::libc::SIGXFSZ => Some("file size limit (RLIMIT_FSIZE)"),
        _ => None,
    }
}

mod step;

#[cfg(test)]
mod tests;
