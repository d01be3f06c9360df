//! Launch options: the only command-line surface (MCP is the only interface).
//!
//! ```text
//! agent-worker                          stdio MCP server (+ a loopback HTTP port for workers)
//! agent-worker --http 127.0.0.1:PORT    streamable HTTP at /mcp (PORT 0 picks one)
//!   --data-dir DIR    state directory (default: the OS data dir; AGENT_WORKER_HOME overrides)
//!   --token TOKEN     admin token (default: AGENT_WORKER_TOKEN, else created in the data dir)
//!   --store STORE     sqlite (default: a file in the data dir) or a postgres:// URL
//!                     (default: AGENT_WORKER_STORE)
//!   --node NAME       this kernel's node name (default: AGENT_WORKER_NODE, else the host name)
//!   --labels A,B      what this node offers to agents placed by labels (default: AGENT_WORKER_LABELS)
//!   --log LEVEL       error, warn, info (default), debug, trace
//! agent-worker --token-env NAME         stdio as an agent (its agent_join token in $NAME)
//! ```

use std::net::SocketAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use store::Location;

pub const ADMIN_TOKEN_FILE: &str = "admin.token";
pub const ADMIN_TOKEN_PREFIX: &str = "awadmin_";

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub http: Option<SocketAddr>,
    pub data_dir: Option<PathBuf>,
    pub token: Option<String>,
    /// `--store`: `sqlite` or a PostgreSQL URL (else `AGENT_WORKER_STORE`).
    pub store: Option<String>,
    /// `--node`: this kernel's node name (else `AGENT_WORKER_NODE`, else the host name).
    pub node: Option<String>,
    /// `--labels`: what this node offers (else `AGENT_WORKER_LABELS`), as given.
    pub labels: Option<String>,
    pub log: Option<String>,
    /// How long a background kernel waits without clients, with nothing owed,
    /// before it stops (None: never). Default 10 minutes.
    pub idle_exit: Option<std::time::Duration>,
    /// stdio: serve in this process (the kernel ends with the client), as before.
    pub foreground: bool,
    /// Internal: this process is the background kernel a stdio launch started.
    pub background_kernel: bool,
    /// Whether `--idle-exit` was given (its default applies otherwise).
    pub idle_exit_given: bool,
    /// `--token-env NAME`: stdio, relayed as the agent whose token (from agent_join)
    /// is in the environment variable NAME, instead of as the lead.
    pub token_env: Option<String>,
    /// `--otlp-endpoint`: where traces go (else `OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub otlp_endpoint: Option<String>,
}

/// Where a running kernel says where it is (its URL, pid and local lead
/// credential), in the data dir: read by every stdio launch that relays to it.
pub const KERNEL_JSON: &str = "kernel.json";

/// The internal flag of the background kernel a stdio launch starts.
pub const BACKGROUND_KERNEL: &str = "--background-kernel";

pub use kernel::{AGENT_TOKEN_ENV, PORT_FILE};
pub use store::STORE_ENV;

/// The environment variable that names the node when `--node` does not.
pub const NODE_ENV: &str = "AGENT_WORKER_NODE";
/// The environment variable that gives the node's labels when `--labels` does not.
pub const LABELS_ENV: &str = "AGENT_WORKER_LABELS";

/// The default of `--idle-exit`.
pub const DEFAULT_IDLE_EXIT: std::time::Duration = std::time::Duration::from_secs(600);

pub const USAGE: &str = "agent-worker: a multi-agent orchestration kernel that is an MCP server

usage:
  agent-worker [--data-dir DIR] [--token TOKEN] [--log LEVEL]        serve MCP on stdio (relayed to a
                                                                     kernel in the background)
  agent-worker --http 127.0.0.1:PORT [--data-dir DIR] [--token TOKEN] serve streamable HTTP at /mcp
  agent-worker [--data-dir DIR] --token-env NAME                     serve MCP on stdio as the agent
                                                                     whose agent_join token is in $NAME

options:
  --http ADDR      loopback address to serve HTTP on; port 0 picks a free port (printed on stderr)
  --data-dir DIR   where state lives (default: the OS data dir; env AGENT_WORKER_HOME overrides)
  --token TOKEN    admin bearer token for HTTP (default: env AGENT_WORKER_TOKEN, else the
                   admin.token file in the data dir, created on first start)
  --store STORE    where the kernel's state lives: sqlite (default, a file in the data dir)
                   or postgres://USER:PASSWORD@HOST:PORT/DATABASE (default: env
                   AGENT_WORKER_STORE, the better place for a password)
  --node NAME      this kernel's name among the nodes that share a store; it runs the agents
                   leased to it (default: env AGENT_WORKER_NODE, else the host name)
  --labels A,B     labels this node offers: agents placed with node: {labels: [..]} run only
                   on nodes with all of theirs (default: env AGENT_WORKER_LABELS, else none)
  --log LEVEL      error | warn | info | debug | trace (default info); logs go to stderr and
                   DATA_DIR/logs/agent-worker.log
  --idle-exit D    stdio: the background kernel stops after D without clients once nothing is
                   owed (default 10m; `never` for a service)
  --foreground     stdio: run the kernel in this process; it stops when the client goes
                   (also AGENT_WORKER_FOREGROUND=1)
  --token-env NAME stdio: act as the agent whose token (from agent_join) is in the environment
                   variable NAME, relayed to the data dir's kernel (started if none runs)
  --otlp-endpoint URL  export traces over OTLP/HTTP to http://HOST:PORT (/v1/traces is added;
                   default: env OTEL_EXPORTER_OTLP_ENDPOINT; none: no traces, no cost)
  --help, --version";

/// What the command line asked for.
#[derive(Debug)]
pub enum Launch {
    Serve(Box<Options>),
    /// The internal worker mode the kernel starts for each run (not for people:
    /// its input is the `AW_RUN` environment variable).
    Worker,
    /// The internal readiness probe (the kernel's backend_list): backends to check.
    Probe(Vec<String>),
    /// The internal inbox hook Claude Code runs after a tool call: its file.
    Hook(PathBuf),
    Help,
    Version,
}

pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Launch, String> {
    let mut o = Options::default();
    let mut it = args.into_iter().peekable();
    if it.peek().map(String::as_str) == Some(kernel::runtime::workers::WORKER_MODE) {
        return Ok(Launch::Worker);
    }
    if it.peek().map(String::as_str) == Some(worker::probe::PROBE_MODE) {
        return Ok(Launch::Probe(it.skip(1).collect()));
    }
    if it.peek().map(String::as_str) == Some(worker::hook::HOOK_MODE) {
        let file = it.nth(1).ok_or("the hook mode needs its file")?;
        return Ok(Launch::Hook(PathBuf::from(file)));
    }
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (a.clone(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{name} needs a value; see --help"))
        };
        match flag.as_str() {
            "--http" => o.http = Some(http_address(&value("--http")?)?),
            "--data-dir" => o.data_dir = Some(PathBuf::from(value("--data-dir")?)),
            "--token" => o.token = Some(value("--token")?),
            "--store" => {
                let v = value("--store")?;
                Location::parse(&v, Path::new("."))?;
                o.store = Some(v);
            }
            "--node" => {
                let v = value("--node")?;
                kernel::runtime::nodes::validate_name(&v).map_err(|e| format!("--node: {e}"))?;
                o.node = Some(v);
            }
            "--labels" => {
                let v = value("--labels")?;
                split_labels("--labels", &v)?;
                o.labels = Some(v);
            }
            "--log" => o.log = Some(log_level(value("--log")?)?),
            "--idle-exit" => {
                o.idle_exit = idle_exit(&value("--idle-exit")?)?;
                o.idle_exit_given = true;
            }
            "--foreground" => o.foreground = true,
            "--token-env" => o.token_env = Some(token_env(value("--token-env")?)?),
            "--otlp-endpoint" => o.otlp_endpoint = Some(otlp_endpoint(value("--otlp-endpoint")?)?),
            BACKGROUND_KERNEL => o.background_kernel = true,
            "-h" | "--help" => return Ok(Launch::Help),
            "-V" | "--version" => return Ok(Launch::Version),
            other => return Err(format!("unknown argument {other:?}; see --help")),
        }
    }
    finish(o)
}

/// The launch's defaults and the checks across flags.
fn finish(mut o: Options) -> Result<Launch, String> {
    if !o.idle_exit_given {
        o.idle_exit = Some(DEFAULT_IDLE_EXIT);
    }
    if o.token_env.is_some() {
        // An agent's launch relays; the kernel it reaches serves the data dir.
        if o.http.is_some() || o.foreground || o.background_kernel {
            return Err(
                "--token-env is a stdio launch relayed as an agent: it cannot go with --http or \
                 --foreground"
                    .into(),
            );
        }
        return Ok(Launch::Serve(Box::new(o)));
    }
    if std::env::var("AGENT_WORKER_FOREGROUND").is_ok_and(|v| v == "1") {
        o.foreground = true;
    }
    Ok(Launch::Serve(Box::new(o)))
}

/// `--otlp-endpoint`: the base URL of an OTLP/HTTP receiver, `http://HOST[:PORT]`
/// (the exporter carries no TLS of its own; `/v1/traces` is added; no user or
/// password, which would reach a command line and workers' environments).
fn otlp_endpoint(v: String) -> Result<String, String> {
    let bad = |why: &str| {
        format!(
            "--otlp-endpoint: {why}; write http://HOST:PORT (the receiver's base URL; for https, point \
             it at a local OpenTelemetry collector that forwards)"
        )
    };
    let rest = match v.get(..7) {
        Some(s) if s.eq_ignore_ascii_case("http://") => &v[7..],
        _ => return Err(bad("not an http:// URL")),
    };
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    // A host name is at most 253 characters; nothing longer is repeated anywhere.
    if authority.len() > 253 + 8 {
        return Err(bad("a host of at most 253 characters and a port"));
    }
    if !path.is_empty() {
        return Err(bad("no path: /v1/traces is added"));
    }
    if authority.contains(['@', '?', '#']) || authority.contains(char::is_whitespace) {
        return Err(bad("a host and a port only"));
    }
    let (host, port) = authority.rsplit_once(':').unwrap_or((authority, "80"));
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(bad("a host and a port (1-65535)"));
    }
    Ok(format!("http://{authority}"))
}

/// `--http`: a loopback address only.
fn http_address(v: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = v.parse().map_err(|_| {
        format!("--http {v:?} is not an address: write it as 127.0.0.1:PORT (PORT 0 picks one)")
    })?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "--http {addr}: agent-worker serves only loopback addresses (127.0.0.1 or [::1]); \
             put a reverse proxy with TLS in front to reach it from elsewhere"
        ));
    }
    Ok(addr)
}

fn log_level(v: String) -> Result<String, String> {
    if !["error", "warn", "info", "debug", "trace"].contains(&v.as_str()) {
        return Err(format!(
            "--log {v:?}: use error, warn, info, debug or trace"
        ));
    }
    Ok(v)
}

/// `--idle-exit`: a duration, or `never` (None).
fn idle_exit(v: &str) -> Result<Option<std::time::Duration>, String> {
    match v.trim() {
        "never" => Ok(None),
        t => humantime::parse_duration(t).map(Some).map_err(|_| {
            format!("--idle-exit {v:?}: write a duration such as 10m or 1h, or never")
        }),
    }
}

fn token_env(v: String) -> Result<String, String> {
    if v.is_empty() || v.contains('=') {
        return Err(format!(
            "--token-env {v:?}: name the environment variable that holds the agent's token, \
             e.g. --token-env {AGENT_TOKEN_ENV}"
        ));
    }
    Ok(v)
}

/// `--data-dir`, else `AGENT_WORKER_HOME`, else the OS data dir.
pub fn data_dir(o: &Options) -> Result<PathBuf, String> {
    if let Some(d) = &o.data_dir {
        return Ok(d.clone());
    }
    if let Some(d) = std::env::var_os("AGENT_WORKER_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    directories::ProjectDirs::from("dev", "agent-worker", "agent-worker")
        .map(|p| p.data_dir().to_owned())
        .ok_or_else(|| "cannot find a home directory for the data dir: pass --data-dir DIR".into())
}

/// `--store`, else `AGENT_WORKER_STORE`, else SQLite in the data dir.
pub fn store(o: &Options, data_dir: &Path) -> Result<Location, String> {
    match o.store.clone().or_else(|| {
        std::env::var(STORE_ENV)
            .ok()
            .filter(|s| !s.trim().is_empty())
    }) {
        Some(s) => Location::parse(&s, data_dir),
        None => Ok(Location::in_data_dir(data_dir)),
    }
}

/// `--node`, else `AGENT_WORKER_NODE`, else the host name.
pub fn node(o: &Options) -> Result<String, String> {
    match o.node.clone().or_else(|| {
        std::env::var(NODE_ENV)
            .ok()
            .filter(|s| !s.trim().is_empty())
    }) {
        Some(n) => {
            let n = n.trim().to_owned();
            kernel::runtime::nodes::validate_name(&n)
                .map_err(|e| format!("--node (or {NODE_ENV}): {e}"))?;
            Ok(n)
        }
        None => Ok(kernel::runtime::nodes::default_name()),
    }
}

/// `--labels`, else `AGENT_WORKER_LABELS`, else none: checked, sorted, unique.
pub fn labels(o: &Options) -> anyhow::Result<Vec<String>> {
    let given = o.labels.clone().or_else(|| std::env::var(LABELS_ENV).ok());
    match given {
        Some(v) => {
            split_labels(&format!("--labels (or {LABELS_ENV})"), &v).map_err(anyhow::Error::msg)
        }
        None => Ok(Vec::new()),
    }
}

/// Labels written `gpu,eu` (spaces allowed around the commas; none for "").
fn split_labels(field: &str, v: &str) -> Result<Vec<String>, String> {
    let parts = v.split(',').map(str::trim).filter(|l| !l.is_empty());
    domain::placement::labels(field, parts)
}

/// A launch that names a node relays only to a kernel of that name (`running`:
/// the node the running kernel wrote in `kernel.json`).
pub fn check_node(o: &Options, data_dir: &Path, running: Option<&str>) -> Result<(), String> {
    let asked = o.node.is_some() || std::env::var(NODE_ENV).is_ok_and(|s| !s.trim().is_empty());
    if !asked {
        return Ok(());
    }
    let wanted = node(o)?;
    match running {
        Some(r) if r != wanted => Err(format!(
            "the kernel running on {} is node {r}, not {wanted}: stop it first, or give this \
             launch another --data-dir",
            data_dir.display()
        )),
        _ => Ok(()),
    }
}

/// A launch that names a store (`--store` or `AGENT_WORKER_STORE`) relays only to a
/// kernel keeping its state there: `running` is what the running kernel wrote in
/// `kernel.json` (its store, shown without a password).
pub fn check_store(o: &Options, data_dir: &Path, running: Option<&str>) -> Result<(), String> {
    let asked = o.store.is_some() || std::env::var(STORE_ENV).is_ok_and(|s| !s.trim().is_empty());
    if !asked {
        return Ok(());
    }
    let wanted = store(o, data_dir)?.to_string();
    match running {
        Some(r) if r != wanted => Err(format!(
            "the kernel running on {} keeps its state in {r}, not in {wanted}: stop it first, or \
             give this launch another --data-dir",
            data_dir.display()
        )),
        _ => Ok(()),
    }
}

/// The agent token a `--token-env` launch relays with (None: it relays as the lead).
pub fn agent_token(o: &Options) -> Result<Option<String>, String> {
    let Some(name) = &o.token_env else {
        return Ok(None);
    };
    match std::env::var(name).map(|t| t.trim().to_owned()) {
        Ok(t) if !t.is_empty() => Ok(Some(t)),
        _ => Err(format!(
            "--token-env {name}: the environment variable {name} is empty or unset; put the token \
             agent_join returned in it (the configs agent_join returns do)"
        )),
    }
}

/// `--token`, else `AGENT_WORKER_TOKEN`, else the token file if it exists; never
/// creates one (for a launch that is not the kernel).
pub fn existing_admin_token(o: &Options, data_dir: &Path) -> Option<String> {
    o.token
        .clone()
        .or_else(|| std::env::var("AGENT_WORKER_TOKEN").ok())
        .or_else(|| std::fs::read_to_string(data_dir.join(ADMIN_TOKEN_FILE)).ok())
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
}

/// `--token`, else `AGENT_WORKER_TOKEN`, else the token file in the data dir (created
/// with mode 0600 on first start).
pub fn admin_token(o: &Options, data_dir: &Path) -> Result<String, String> {
    if let Some(t) = o
        .token
        .clone()
        .or_else(|| std::env::var("AGENT_WORKER_TOKEN").ok())
        .filter(|t| !t.trim().is_empty())
    {
        if t.trim().len() < 16 {
            return Err("the admin token must be at least 16 characters".into());
        }
        return Ok(t.trim().to_owned());
    }
    let path = data_dir.join(ADMIN_TOKEN_FILE);
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => {
            let mode = std::fs::metadata(&path)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0);
            if mode & 0o077 != 0 {
                tracing::warn!(
                    "{} is readable by others (mode {mode:o}); run chmod 600 on it",
                    path.display()
                );
            }
            Ok(t.trim().to_owned())
        }
        _ => {
            let t = kernel::registry::tokens::new_secret(ADMIN_TOKEN_PREFIX);
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&path)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            f.write_all(t.as_bytes())
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(t)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn parse(v: &[&str]) -> Result<Launch, String> {
        parse_args(v.iter().map(|s| s.to_string()))
    }
    /// `--store` takes sqlite or a PostgreSQL URL, and its errors never repeat a
    /// password, whatever shape the value has.
    #[test]
    fn store_flag() {
        let dir = Path::new("/tmp/d");
        let Ok(Launch::Serve(o)) = parse(&["--store", "sqlite"]) else {
            panic!()
        };
        assert_eq!(store(&o, dir).unwrap(), Location::in_data_dir(dir));
        let url = "postgres://aw:s3cret@127.0.0.1:5432/team";
        let Ok(Launch::Serve(o)) = parse(&["--store", url]) else {
            panic!()
        };
        let at = store(&o, dir).unwrap();
        assert_eq!(at, Location::parse(url, dir).unwrap());
        assert!(!format!("{at} {at:?}").contains("s3cret"), "{at}");
        for bad in [
            "mysql://aw:s3cret@h/db",
            "host=h password=s3cret",
            "postgres://aw:s3cret@h:notaport/db",
        ] {
            let err = parse(&["--store", bad]).unwrap_err();
            assert!(err.contains("--store"), "{err}");
            assert!(!err.contains("s3cret"), "{bad}: {err}");
        }
    }

    /// `--otlp-endpoint` takes an OTLP/HTTP receiver's base URL, and its errors
    /// never repeat the value (it could carry a password).
    #[test]
    fn otlp_endpoint_flag() {
        for (given, kept) in [
            ("http://127.0.0.1:4318", "http://127.0.0.1:4318"),
            ("HTTP://collector:4318/", "http://collector:4318"),
            ("http://collector", "http://collector"),
        ] {
            let Ok(Launch::Serve(o)) = parse(&["--otlp-endpoint", given]) else {
                panic!("{given}")
            };
            assert_eq!(o.otlp_endpoint.as_deref(), Some(kept));
        }
        let long = format!("http://{}:4318", "a".repeat(100_000));
        for bad in [
            "https://collector:4318",
            "collector:4318",
            "http://me:s3cret@collector:4318",
            "http://collector:4318/v1/traces",
            "http://collector:43l8",
            "http://:4318",
            long.as_str(),
        ] {
            let err = parse(&["--otlp-endpoint", bad]).unwrap_err();
            assert!(err.starts_with("--otlp-endpoint: "), "{err}");
            assert!(err.len() < 300, "the value is not repeated: {err}");
            assert!(!err.contains("s3cret"), "{bad}: {err}");
        }
    }

    #[test]
    fn flags() {
        let Ok(Launch::Serve(o)) = parse(&["--http", "127.0.0.1:0", "--data-dir=/tmp/x"]) else {
            panic!()
        };
        assert_eq!(o.http.unwrap().port(), 0);
        assert_eq!(o.data_dir.unwrap(), PathBuf::from("/tmp/x"));
        assert!(
            parse(&["--http", "0.0.0.0:80"])
                .unwrap_err()
                .contains("loopback")
        );
        assert!(parse(&["--http"]).unwrap_err().contains("needs a value"));
        assert!(
            parse(&["--bogus"])
                .unwrap_err()
                .contains("unknown argument")
        );
        assert!(matches!(parse(&["--help"]), Ok(Launch::Help)));
        let Ok(Launch::Serve(o)) = parse(&["--token-env", AGENT_TOKEN_ENV]) else {
            panic!()
        };
        assert_eq!(o.token_env.as_deref(), Some(AGENT_TOKEN_ENV));
        assert!(!o.foreground);
        for bad in [
            &["--token-env", "X", "--foreground"][..],
            &["--token-env", "X", "--http", "127.0.0.1:0"],
            &["--token-env", ""],
        ] {
            assert!(parse(bad).unwrap_err().contains("--token-env"), "{bad:?}");
        }
    }
}
