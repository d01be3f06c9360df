//! Interop with the official Python MCP SDK (`mcp` on PyPI, pinned in
//! tests/python/requirements.txt): tests/python/sdk_check.py drives the real
//! binary over stdio and streamable HTTP, in legacy (2025-11-25, initialize)
//! and auto (negotiates 2026-07-28, stateless) mode. scripts/py-env sets up
//! the virtualenv at .venv (idempotent, locked against concurrent callers).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_agent-worker");
const REPO: &str = env!("CARGO_MANIFEST_DIR");
/// Per sdk_check.py run; the script has its own 120 s limit inside.
const CHECK_TIMEOUT: Duration = Duration::from_secs(180);

/// The venv's python, set up once per test binary (py-env also locks across processes).
fn python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        let out = Command::new(Path::new(REPO).join("scripts/py-env"))
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/py-env (needs bash and python3 with venv)");
        assert!(
            out.status.success(),
            "scripts/py-env failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let py = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
        assert!(
            py.is_file(),
            "scripts/py-env did not print the venv python on its last line: {stdout:?}"
        );
        py
    })
}

/// Runs sdk_check.py with `args`; Err carries a report with its output.
fn sdk_check(args: &[&str]) -> Result<String, String> {
    let script = Path::new(REPO).join("tests/python/sdk_check.py");
    let mut child = Command::new(python())
        .arg(&script)
        .args(args)
        .current_dir(REPO)
        .env("AW_CONTEXT_TOOLS", crate::common::CONTEXT_TOOLS.join(","))
        .env("AW_LEAD_TOOLS", crate::common::lead_tools().join(","))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sdk_check.py");
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let deadline = Instant::now() + CHECK_TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(50));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    let report = format!(
        "sdk_check.py {}: {}\n--- stdout\n{out}--- stderr\n{err}",
        args.join(" "),
        match status {
            Some(s) => s.to_string(),
            None => format!("timed out after {CHECK_TIMEOUT:?}"),
        }
    );
    match status {
        Some(s) if s.success() => Ok(report),
        _ => Err(report),
    }
}

fn drain(mut r: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Runs every check, prints each report, and fails listing all failures.
fn run_all(runs: Vec<Vec<String>>, context: impl Fn() -> String) {
    let mut failures = Vec::new();
    for args in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match sdk_check(&args) {
            Ok(report) => println!("{report}"),
            Err(report) => {
                eprintln!("{report}");
                failures.push(report);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} Python SDK checks failed:\n\n{}\n{}",
        failures.len(),
        runs.len(),
        failures.join("\n"),
        context()
    );
}

#[test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the Python SDK's virtualenv (AGENT_WORKER_HEAVY=1, scripts/py-env)"
)]
fn python_sdk_over_stdio() {
    // Each mode gets its own data dir, so its own stdio kernel.
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let runs = ["legacy", "auto"]
        .iter()
        .zip(&dirs)
        .map(|(mode, dir)| {
            vec![
                "stdio".to_owned(),
                mode.to_string(),
                BIN.to_owned(),
                dir.path().to_str().unwrap().to_owned(),
            ]
        })
        .collect();
    run_all(runs, String::new);
}

/// The binary serving HTTP on an ephemeral loopback port; killed on drop.
struct HttpServer {
    child: Child,
    url: String,
    admin: String,
    stderr: Arc<Mutex<String>>,
}

impl HttpServer {
    fn start(data_dir: &Path) -> Self {
        let mut child = Command::new(BIN)
            .args(["--http", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agent-worker --http");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        // Read up to the URL line on a thread, so a silent server cannot hang the test.
        let (tx, rx) = std::sync::mpsc::channel();
        let log = stderr.clone();
        thread::spawn(move || {
            let mut tx = Some(tx);
            // Keep draining after the URL so the server never blocks on a full pipe.
            while let Some(Ok(line)) = lines.next() {
                if let Some(rest) = line.split("serving MCP at ").nth(1)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_owned());
                }
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let mut server = Self {
            child,
            url: String::new(),
            admin: String::new(),
            stderr,
        };
        server.url = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| {
                panic!(
                    "server did not print its URL within 20 s; stderr:\n{}",
                    server.stderr.lock().unwrap()
                )
            });
        server.admin = std::fs::read_to_string(data_dir.join("admin.token"))
            .expect("read <data-dir>/admin.token")
            .trim()
            .to_owned();
        server
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the Python SDK's virtualenv (AGENT_WORKER_HEAVY=1, scripts/py-env)"
)]
fn python_sdk_over_http() {
    // Both modes against one server and data dir: the script's agent names carry the mode.
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::start(dir.path());
    println!("server at {}", server.url);
    let runs = ["legacy", "auto"]
        .iter()
        .map(|mode| {
            vec![
                "http".to_owned(),
                mode.to_string(),
                server.url.clone(),
                server.admin.clone(),
            ]
        })
        .collect();
    run_all(runs, || {
        format!("--- server stderr\n{}", server.stderr.lock().unwrap())
    });
}
