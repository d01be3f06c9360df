//! What the packaging tests (tests/packaging.rs) stand on: the packages
//! `scripts/package --profile dev` makes from the suite's own debug binary (made
//! once per binary and shared by the tests, under a lock), a private npm registry
//! (verdaccio) on a loopback port, and a user's machine without Rust: a fresh HOME
//! and a PATH of the system's Node alone. The tools come from scripts/packaging-setup
//! (and the Inspector, Claude Code from their own setups); with AGENT_WORKER_HEAVY=1
//! a missing one fails the test.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const REPO: &str = env!("CARGO_MANIFEST_DIR");
/// A user's PATH: the system's Node (node, npm, npx) and the shell's tools.
pub const USER_PATH: &str = "/usr/bin:/bin";

/// The packaging tools' node_modules (verdaccio, mcpb, ajv), or None (skip).
pub fn tools() -> Option<PathBuf> {
    let modules = Path::new(REPO).join(".interop/packaging/node_modules");
    let ready = ["verdaccio", "mcpb"]
        .iter()
        .all(|t| modules.join(".bin").join(t).exists())
        && modules.join("ajv/dist/2020.js").exists()
        && modules.join("ajv-formats").exists();
    if ready {
        return Some(modules);
    }
    super::heavy::missing(
        "the packaging tools (in .interop/packaging)",
        "scripts/packaging-setup",
    );
    None
}

/// The output, or a panic naming what ran and what it said.
pub fn ok(what: &str, out: Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {}\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `dist/` as `scripts/package --profile dev` makes it: made once for the suite's
/// binary as it is now, and shared by the tests (each one is a process of its own).
pub fn dist() -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("packaging");
    std::fs::create_dir_all(&root).unwrap();
    let lock = std::fs::File::create(root.join("lock")).unwrap();
    lock.lock().unwrap();
    let out = root.join("dist");
    // Made again when the binary or what makes the packages changed.
    let meta = std::fs::metadata(super::BIN).unwrap();
    let mut makers = std::hash::DefaultHasher::new();
    for f in [
        "scripts/package",
        "packaging/assemble.mjs",
        "packaging/launcher.js",
        "packaging/release.json",
    ] {
        std::hash::Hash::hash(
            &std::fs::read(Path::new(REPO).join(f)).unwrap(),
            &mut makers,
        );
    }
    let makers = std::hash::Hasher::finish(&makers);
    let stamp = format!("{} {:?} {makers:x}", meta.len(), meta.modified().unwrap());
    let made = std::fs::read_to_string(root.join("stamp")).ok();
    if made.as_deref() == Some(stamp.as_str()) && out.join("SHA256SUMS").exists() {
        return out;
    }
    let _ = std::fs::remove_dir_all(&out);
    let script = Path::new(REPO).join("scripts/package");
    let mut package = Command::new(&script);
    // What cargo sets for this test (CARGO_MANIFEST_DIR, CARGO_PKG_NAME, OUT_DIR..)
    // would reach the script's `cargo build` as changed variables that build
    // scripts watch, and rebuild ring and every crate above it.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let kept = ["CARGO_HOME", "CARGO_INCREMENTAL", "CARGO_TARGET_DIR"];
        if (name.starts_with("CARGO_") && !kept.contains(&name.as_ref())) || name == "OUT_DIR" {
            package.env_remove(name.as_ref());
        }
    }
    let o = package
        .args(["--profile", "dev", "--out"])
        .arg(&out)
        .output()
        .expect("run scripts/package");
    ok("scripts/package --profile dev", o);
    std::fs::write(root.join("stamp"), stamp).unwrap();
    out
}

/// A command as a user without Rust runs it: nothing of this environment but a
/// fresh HOME and the system's PATH (checked to hold no cargo or rustc).
pub fn user_command(program: impl AsRef<std::ffi::OsStr>, home: &Path) -> Command {
    for dir in USER_PATH.split(':') {
        for rust in ["cargo", "rustc", "rustup"] {
            assert!(
                !Path::new(dir).join(rust).exists(),
                "{dir}/{rust}: the user's PATH must hold no Rust"
            );
        }
    }
    let mut c = Command::new(program);
    c.env_clear()
        .env("HOME", home)
        .env("PATH", USER_PATH)
        .env("DISABLE_AUTOUPDATER", "1")
        .env("IS_SANDBOX", "1")
        .current_dir(home);
    c
}

/// This machine's platform as npm names it (`process.platform`-`process.arch`),
/// the suffix of its package and bundle.
pub fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("{}-{arch}", std::env::consts::OS)
}

/// The data dir a launch with no `--data-dir` picks on Linux: the platform's place.
pub fn platform_data_dir(home: &Path) -> PathBuf {
    home.join(".local/share/agent-worker")
}

/// Stops the background kernel of a data dir (its pid in kernel.json) and waits
/// for it to go; returns the path of the program it ran.
pub fn stop_kernel(data: &Path) -> PathBuf {
    let k: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("kernel.json")).unwrap()).unwrap();
    let pid = k["pid"].as_i64().expect("kernel.json names a pid") as i32;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    );
    assert!(
        gone(pid, Duration::from_secs(15)),
        "the kernel {pid} did not stop"
    );
    exe
}

/// Whether the process ends (or is a zombie) within `limit`.
pub fn gone(pid: i32, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    loop {
        let alive = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        });
        if !alive {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// verdaccio on a loopback port, its storage in a folder of its own; stopped when
/// dropped. Anyone may read; publishing takes a user's token (`publish`).
pub struct Registry {
    pub url: String,
    port: u16,
    child: Child,
    dir: tempfile::TempDir,
}

impl Registry {
    pub fn start(tools: &Path) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        // Nothing upstream: what is not published here is not found.
        std::fs::write(
            dir.path().join("config.yaml"),
            "storage: ./storage\nauth:\n  htpasswd:\n    file: ./htpasswd\n    max_users: 10\n\
             uplinks: {}\npackages:\n  '**':\n    access: $all\n    publish: $authenticated\n\
             max_body_size: 500mb\nlog: { type: stdout, format: pretty, level: warn }\n",
        )
        .unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.path().join("verdaccio.log")).unwrap();
        let child = Command::new(tools.join(".bin/verdaccio"))
            .args(["--config", "config.yaml", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start verdaccio");
        let r = Registry {
            url: format!("http://127.0.0.1:{port}/"),
            port,
            child,
            dir,
        };
        let end = Instant::now() + Duration::from_secs(60);
        while !r.http("GET", "/-/ping", "").starts_with("HTTP/1.1 200") {
            assert!(
                Instant::now() < end,
                "verdaccio did not answer: {}",
                r.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        r
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("verdaccio.log")).unwrap_or_default()
    }

    /// One HTTP/1.1 request (the connection closed after it); the whole answer.
    fn http(&self, method: &str, path: &str, body: &str) -> String {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return String::new();
        };
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut answer = String::new();
        if s.write_all(request.as_bytes()).is_ok() {
            let _ = s.read_to_string(&mut answer);
        }
        answer
    }

    /// Publishes the npm packages of `dist`, each platform's before the launcher
    /// (the order of a release), as a user registered here.
    pub fn publish(&self, dist: &Path) {
        let answer = self.http(
            "PUT",
            "/-/user/org.couchdb.user:release",
            r#"{"name":"release","password":"release-password"}"#,
        );
        let token = answer
            .split("\"token\":")
            .nth(1)
            .and_then(|t| t.split('"').nth(1))
            .unwrap_or_else(|| panic!("no token from verdaccio: {answer}"));
        let npmrc = self.dir.path().join("npmrc");
        let auth = self.url.trim_start_matches("http:");
        std::fs::write(&npmrc, format!("{auth}:_authToken={token}\n")).unwrap();
        let mut tarballs: Vec<PathBuf> = std::fs::read_dir(dist.join("npm"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "tgz"))
            .collect();
        // The launcher is agent-worker-VERSION.tgz, the platforms' sort before it.
        tarballs.sort_by_key(|p| !p.to_string_lossy().contains("agent-worker-agent-worker-"));
        assert!(tarballs.len() >= 2, "dist/npm: {tarballs:?}");
        for t in tarballs {
            let o = user_command("npm", self.dir.path())
                .arg("publish")
                .arg(&t)
                .args([
                    "--userconfig",
                    npmrc.to_str().unwrap(),
                    "--registry",
                    &self.url,
                ])
                .output()
                .unwrap();
            ok(&format!("npm publish {}", t.display()), o);
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
