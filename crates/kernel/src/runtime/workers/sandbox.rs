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
    pub skills: Vec<PathBuf>,
    pub kernel_url: &'a str,
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
    let hidden = hidden(at, home.as_deref(), &grants);
    let git = worktree_git(spec);
    let mut own = vec![
        at.cwd.to_owned(),
        at.state_dir.to_owned(),
        at.scratch.clone(),
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
    let mut writable = vec![at.state_dir.to_owned(), at.scratch.clone()];
    let beneath_hidden = |p: &Path| hidden.iter().any(|h| p.starts_with(h));
    let (state, files): (Vec<PathBuf>, Vec<PathBuf>) =
        cli_state(spec.backend, home.as_deref(), &env)
            .into_iter()
            .filter(|p| state_place(p, &hidden))
            .partition(|p| p.extension().is_none());
    writable.extend(files);
    match p.profile {
        Profile::Read => {}
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
    let unwritable = match p.profile {
        Profile::Full => hidden.clone(),
        _ => Vec::new(),
    };
    Some(Sandbox {
        mode,
        hidden,
        readable,
        writable,
        unwritable,
        folders: workspace_folders(spec.backend)
            .iter()
            .map(|f| at.cwd.join(f))
            .collect(),
        state,
        devices: DEVICES.iter().map(PathBuf::from).collect(),
        connect: ports(spec, p.network_reach(), at.kernel_url),
        limits: p.sandbox_limits(),
        tmp: at.scratch.join("tmp"),
        abi: needed_abi(spec),
        cgroup: None,
    })
}

/// What no run reads: the kernel's data dir, the other runs' scratch folders,
/// the user's session (`/run/user/<uid>`: its sockets) and the secrets under
/// both the user's real home and the agent's `HOME`, but those a grant names.
fn hidden(at: &Places<'_>, home: Option<&Path>, grants: &[(bool, PathBuf)]) -> Vec<PathBuf> {
    let mut hidden: Vec<PathBuf> = vec![at.data_dir.to_owned()];
    hidden.push(PathBuf::from(format!(
        "/run/user/{}",
        nix::unistd::getuid()
    )));
    let real = nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.dir);
    let mut homes: Vec<&Path> = home.into_iter().collect();
    homes.extend(real.as_deref().filter(|r| Some(*r) != home));
    for h in homes {
        let secrets = SECRETS.iter().map(|s| h.join(s));
        hidden.extend(secrets.filter(|s| !grants.iter().any(|(_, g)| g.starts_with(s))));
    }
    hidden
}

/// Whether a CLI's state place (from the agent's `HOME` or environment) may be
/// granted: a folder of its own, neither beneath a hidden place nor holding one.
fn state_place(p: &Path, hidden: &[PathBuf]) -> bool {
    use std::path::Component;
    let plain = p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    let deep = p.components().count() > 2;
    plain && deep && !hidden.iter().any(|h| p.starts_with(h) || h.starts_with(p))
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

/// Where a CLI keeps its own state and configuration, which it writes as it runs.
fn cli_state(
    backend: Backend,
    home: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<PathBuf> {
    let Some(h) = home else { return Vec::new() };
    let mut out: Vec<PathBuf> = [".cache", ".npm"].iter().map(|d| h.join(d)).collect();
    let own: &[&str] = match backend {
        Backend::Claude => &[
            ".claude",
            ".claude.json",
            ".config/claude",
            ".local/state/claude",
        ],
        Backend::Codex => &[".codex"],
        Backend::Gemini => &[".gemini"],
        Backend::OpenCode => &[
            ".local/share/opencode",
            ".config/opencode",
            ".local/state/opencode",
        ],
        Backend::Cursor => &[".cursor", ".config/cursor"],
        _ => &[],
    };
    out.extend(own.iter().map(|d| h.join(d)));
    for var in ["CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME"] {
        out.extend(env(var).map(PathBuf::from));
    }
    // The CLI's own folder there, not every program's data.
    out.extend(env("XDG_DATA_HOME").map(|d| PathBuf::from(d).join(backend.as_str())));
    out
}

/// The folders in the agent's folder where the worker merges our server into a
/// CLI's workspace configuration (`cli/workspace.rs`).
fn workspace_folders(backend: Backend) -> &'static [&'static str] {
    match backend {
        Backend::Cursor => &[".cursor"],
        Backend::Gemini => &[".gemini"],
        _ => &[],
    }
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_limits_signal_is_named() {
        let check =
            |sig: i32, expect: Option<&str>| assert_eq!(super::limit_hit(sig), expect, "{sig}");
        check(nix::libc::SIGXCPU, Some("CPU time limit (RLIMIT_CPU)"));
        check(nix::libc::SIGXFSZ, Some("file size limit (RLIMIT_FSIZE)"));
        check(nix::libc::SIGKILL, None);
    }
}
