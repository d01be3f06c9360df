//! The OS sandbox a worker puts itself in (pure): what the kernel decides from an
//! agent's profile, its folder and its contracts' path rules, as plain data the
//! worker applies before it starts anything (Landlock, resource limits,
//! `no_new_privs`; see the worker's `sandbox.rs`).
//!
//! Landlock only grants: a rule opens a folder and everything beneath it. "Every
//! file but these" is therefore spelt by [`cover`]: the folders on the way down to
//! a hidden path are split into their entries, and every entry not on the way is
//! granted whole. A folder that holds a hidden path cannot be listed, and what is
//! made in it after the run started is not reachable.

pub use crate::mounts::{
    GIT_HELD_WHOLE, GIT_MADE_FIRST, GIT_RUNS, TooMany, git_made, held_by, pins, too_many,
};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Whether a run must be sandboxed: `required` refuses to start it where the
/// machine cannot; `best_effort` runs it with what the machine has; `off` runs it
/// as the user (default: `required` for read and edit, `best_effort` for full).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Required,
    BestEffort,
    Off,
}

impl Mode {
    pub const NAMES: &[&str] = &["required", "best_effort", "off"];

    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "required" => Ok(Mode::Required),
            "best_effort" => Ok(Mode::BestEffort),
            "off" => Ok(Mode::Off),
            other => Err(format!(
                "permissions.sandbox: unknown mode {other:?}: use required, best_effort or off"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Required => "required",
            Mode::BestEffort => "best_effort",
            Mode::Off => "off",
        }
    }
}

/// Where a run may open TCP connections: `any`; `model` (the kernel's port, HTTPS
/// and the ports of the model endpoints it was given); `none` (the kernel's port
/// alone). Landlock sees ports, not hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    Any,
    Model,
    None,
}

impl Network {
    pub const NAMES: &[&str] = &["any", "model", "none"];

    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "any" => Ok(Network::Any),
            "model" => Ok(Network::Model),
            "none" => Ok(Network::None),
            other => Err(format!(
                "permissions.network: unknown value {other:?}: use any, model or none"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Network::Any => "any",
            Network::Model => "model",
            Network::None => "none",
        }
    }
}

/// Resource limits of every process of a run. `processes` counts the run's own
/// (it gets a user namespace of its own, so the count is not the user's); the
/// others are per process, as `setrlimit(2)` has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Limits {
    /// Writable private memory (RLIMIT_DATA), MiB. Not address space: JavaScript
    /// engines reserve far more than they use.
    pub memory_mb: u64,
    pub processes: u64,
    /// The largest file a process may write (RLIMIT_FSIZE), MiB.
    pub file_mb: u64,
    /// CPU time (RLIMIT_CPU), seconds.
    pub cpu_s: u64,
}

impl Default for Limits {
    /// Enough for a CLI, its language servers and a build; a fork bomb stops at
    /// 512 processes and a disk filler at 2 GiB a file.
    fn default() -> Self {
        Self {
            memory_mb: 8 * 1024,
            processes: 512,
            file_mb: 2 * 1024,
            cpu_s: 2 * 3600,
        }
    }
}

/// Limits as given (`permissions.limits`): each left out keeps its default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsArg {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<u64>,
}

impl LimitsArg {
    /// The limits, defaults filled in; a zero is refused, naming the field.
    pub fn read(&self) -> Result<Limits, String> {
        let d = Limits::default();
        let pick = |v: Option<u64>, dflt: u64, name: &str| match v {
            Some(0) => Err(format!(
                "permissions.limits.{name} is 0: give a positive number, or leave it out for {dflt}"
            )),
            v => Ok(v.unwrap_or(dflt)),
        };
        Ok(Limits {
            memory_mb: pick(self.memory_mb, d.memory_mb, "memory_mb")?,
            processes: pick(self.processes, d.processes, "processes")?,
            file_mb: pick(self.file_mb, d.file_mb, "file_mb")?,
            cpu_s: pick(self.cpu_s, d.cpu_s, "cpu_s")?,
        })
    }
}

/// The lowest Landlock ABI a required sandbox needs: 6 scopes signals and
/// abstract unix sockets (4 brought the TCP rules, 5 device ioctls, 2 renames
/// across folders, 3 truncation).
pub const MIN_ABI: u32 = 6;

/// What a worker applies to itself, decided by the kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sandbox {
    pub mode: Mode,
    /// Readable: the whole machine but these (and what they hold)…
    pub hidden: Vec<PathBuf>,
    /// …and these, wherever they are (the run's own folders, granted paths).
    pub readable: Vec<PathBuf>,
    /// Writable: beneath these…
    pub writable: Vec<PathBuf>,
    /// …but not beneath these.
    pub unwritable: Vec<PathBuf>,
    /// Folders the worker makes (when missing) before it applies the sandbox, and
    /// may write: where its CLI's workspace configuration goes (`.cursor`,
    /// `.gemini` in the agent's folder), whatever the profile; their parent may
    /// lose an empty folder, so that the run removes the one it made.
    #[serde(default)]
    pub folders: Vec<PathBuf>,
    /// Device files any process uses (`/dev/null`, ttys): read and write.
    pub devices: Vec<PathBuf>,
    /// TCP ports a run may connect to; `None`: any.
    pub connect: Option<Vec<u16>>,
    pub limits: Limits,
    /// The run's own temporary folder (`TMPDIR` of everything it starts), in its
    /// scratch folder: what it puts there no other run reads.
    pub tmp: PathBuf,
    /// The Landlock ABI the run must have (required mode).
    pub abi: u32,
    /// The run's own pids cgroup, which the worker joins before anything else
    /// (its `pids.max` is the processes limit, root included); `None`: the
    /// machine has no writable one and RLIMIT_NPROC holds the count.
    #[serde(default)]
    pub cgroup: Option<PathBuf>,
    /// Variables the worker sets for itself and all it starts: the CLI's home of
    /// its own (`HOME`, `CODEX_HOME`, `XDG_CONFIG_HOME`…), kept per agent in the
    /// kernel's data dir, so that no setting it writes reaches the user's CLI.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// What the run's own mount namespace holds (Landlock only grants, so a
    /// place inside a writable folder is made read-only by a mount instead).
    #[serde(default)]
    pub mounts: Mounts,
}

/// The mounts a worker makes in a mount namespace of its own before anything
/// else runs: every other process of the machine keeps seeing the real ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mounts {
    /// Read-only bind mounts over these (each as it was at the run's start).
    pub read_only: Vec<PathBuf>,
    /// Folders bound over themselves, writable: a mount point cannot be renamed
    /// or removed, so a repository's `.git` cannot be swapped for one of the
    /// agent's making (whose config would then run).
    pub pinned: Vec<PathBuf>,
    /// A private `/dev/shm` of this size, MiB (0: none).
    pub shm_mb: u64,
    /// The contracts' edit globs matching more than a run can hold (see
    /// [`held_by`]): a required sandbox is refused, naming them.
    #[serde(default)]
    pub unheld: Vec<String>,
}

/// The size of a run's private `/dev/shm`, MiB: a bound (a tmpfs takes memory
/// as it is written), above the 64 MiB a browser's shared memory outgrows.
pub const SHM_MB: u64 = 256;

/// Files no agent reads, whatever its profile, unless its definition grants them:
/// relative to the user's home.
pub const SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".config/gh/hosts.yml",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
];

/// The devices a process expects to open for writing.
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// Rules that open `root` but `hidden`: the smallest set of paths whose subtrees
/// hold everything under `root` except the hidden paths and the folders on the
/// way to them. `list` gives a folder's entries (full paths); a folder it cannot
/// list is left out (nothing beneath it is granted).
pub fn cover(
    root: &Path,
    hidden: &[PathBuf],
    list: &dyn Fn(&Path) -> Vec<PathBuf>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    cover_into(root, hidden, list, &mut out);
    out
}

fn cover_into(
    dir: &Path,
    hidden: &[PathBuf],
    list: &dyn Fn(&Path) -> Vec<PathBuf>,
    out: &mut Vec<PathBuf>,
) {
    if hidden.iter().any(|h| dir.starts_with(h)) {
        return;
    }
    // The names in `dir` on the way to a hidden path: the only entries split
    // further (a crowded folder's other entries are granted without a look).
    let on_the_way: Vec<&std::ffi::OsStr> = hidden
        .iter()
        .filter_map(|h| h.strip_prefix(dir).ok()?.iter().next())
        .collect();
    if on_the_way.is_empty() {
        out.push(dir.to_owned());
        return;
    }
    for entry in list(dir) {
        match entry.file_name() {
            Some(n) if on_the_way.contains(&n) => cover_into(&entry, hidden, list, out),
            _ => out.push(entry),
        }
    }
}

/// The URLs in a CLI's configuration given as JSON in the agent's environment
/// (OpenCode's `OPENCODE_CONFIG_CONTENT`: a provider's `baseURL`, a server's
/// `url`): every string that is an http(s) URL, at most 64, 32 levels deep.
pub fn config_urls(json: &str) -> Vec<String> {
    fn walk(v: &serde_json::Value, depth: usize, out: &mut Vec<String>) {
        if depth > 32 || out.len() >= 64 {
            return;
        }
        match v {
            serde_json::Value::String(s)
                if s.starts_with("http://") || s.starts_with("https://") =>
            {
                out.push(s.clone())
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, depth + 1, out)),
            serde_json::Value::Object(o) => o.values().for_each(|v| walk(v, depth + 1, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(json) {
        walk(&v, 0, &mut out);
    }
    out
}

/// The ports of the URLs among `values` (an agent's environment: `*_BASE_URL`,
/// an OTLP endpoint, its HTTP servers), with the scheme's default.
pub fn url_ports<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<u16> {
    let mut out = Vec::new();
    for v in values {
        let (default, rest) = if let Some(r) = v.strip_prefix("https://") {
            (443, r)
        } else if let Some(r) = v.strip_prefix("http://") {
            (80, r)
        } else {
            continue;
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host_port = authority.rsplit('@').next().unwrap_or("");
        let port_text = match host_port.strip_prefix('[') {
            Some(v6) => v6.split_once("]:").map(|(_, p)| p),
            None => host_port.split_once(':').map(|(_, p)| p),
        };
        let port = port_text.and_then(|p| p.parse().ok()).unwrap_or(default);
        if !out.contains(&port) {
            out.push(port);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> impl Fn(&Path) -> Vec<PathBuf> {
        let dirs: &[(&str, &[&str])] = &[
            ("/", &["bin", "home", "tmp", "usr"]),
            ("/home", &["u"]),
            ("/home/u", &[".ssh", ".bashrc", "data", "src"]),
            ("/home/u/data", &["kernel", "other"]),
        ];
        move |p: &Path| {
            dirs.iter()
                .find(|(d, _)| Path::new(d) == p)
                .map(|(d, es)| es.iter().map(|e| Path::new(d).join(e)).collect())
                .unwrap_or_default()
        }
    }

    fn check(hidden: &[&str], expect: &[&str]) {
        let hidden: Vec<PathBuf> = hidden.iter().map(PathBuf::from).collect();
        let got = cover(Path::new("/"), &hidden, &tree());
        let got: Vec<String> = got.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(got, expect, "hidden {hidden:?}");
    }

    #[test]
    fn cover_opens_everything_but_the_hidden_and_the_way_to_them() {
        check(&[], &["/"]);
        check(&["/tmp"], &["/bin", "/home", "/usr"]);
        check(
            &["/tmp", "/home/u/.ssh", "/home/u/data/kernel"],
            &[
                "/bin",
                "/home/u/.bashrc",
                "/home/u/data/other",
                "/home/u/src",
                "/usr",
            ],
        );
        check(&["/"], &[]);
    }

    #[test]
    fn a_cli_configs_urls_are_found_at_any_depth() {
        let check = |json: &str, expect: &[&str]| assert_eq!(config_urls(json), expect, "{json}");
        check(
            r#"{"provider":{"fake":{"options":{"baseURL":"http://127.0.0.1:4010/v1"}}}}"#,
            &["http://127.0.0.1:4010/v1"],
        );
        check(
            r#"{"mcp":{"a":{"url":"https://x.test:8443/mcp","headers":{"k":"v"}}},"m":["ftp://no"]}"#,
            &["https://x.test:8443/mcp"],
        );
        check("not json", &[]);
        check(r#"{"instructions":["/tmp/a.md"]}"#, &[]);
    }

    #[test]
    fn url_ports_take_the_port_or_the_schemes_default() {
        let cases: &[(&[&str], &[u16])] = &[
            (&["http://127.0.0.1:4000/v1"], &[4000]),
            (&["https://api.example.com", "http://h"], &[443, 80]),
            (
                &["http://u:p@[::1]:81/x", "not a url", "http://[::1]/"],
                &[81, 80],
            ),
        ];
        for (values, ports) in cases {
            assert_eq!(url_ports(values.iter().copied()), *ports, "{values:?}");
        }
    }
}
