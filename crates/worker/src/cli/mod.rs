//! CLI backends: the worker as a thin wrapper around a coding-agent CLI.
//!
//! For each run the worker writes the CLI's MCP configuration (pointing at the
//! kernel, with the run's token), spawns the CLI in the agent's working directory
//! with the system prompt and the task, reads its JSON event stream, and turns it
//! into progress, usage, a session id to resume, and the outcome. Each CLI's module
//! knows only its own command line ([`Invocation`]) and its own events ([`Events`]).
//!
//! The token reaches a CLI through the environment (`AW_AGENT_TOKEN`), never on its
//! command line, where other local users could read it: Codex, Cursor and OpenCode
//! expand it from their config, Claude Code gets a private 0600 config file.

mod claude;
mod codex;
mod cursor;
mod gemini;
pub mod locate;
mod opencode;
mod skills;
mod workspace;

pub use workspace::WorkspaceFile;

use super::protocol::{ErrorClass, RunConfig};
use super::{Failure, Reporter, Run};
use domain::backends::Backend;
use os::process::{self, Finished, Group, Limits};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// The MCP server name CLIs see for the kernel (tools appear as `mcp__team__...`).
pub const SERVER: &str = super::protocol::TEAM_SERVER;
/// The environment variable holding the run's token for the CLI.
pub const TOKEN_ENV: &str = "AW_AGENT_TOKEN";
/// Environment a CLI must not inherit: the run config (it holds the token in a form
/// the CLI has no use for) and markers that make a nested Claude Code refuse to run.
/// Backtrace switches would make a Rust CLI (Codex) end its error with a backtrace.
/// `GITHUB_SHA` or `SURFACE` (a CI's) put Gemini CLI in its strict env mode, where
/// its hooks and MCP servers lose the run's token.
const SCRUBBED_ENV: &[&str] = &[
    super::protocol::RUN_ENV,
    // The CLI continues the backend's span (set below), not the worker's parent.
    telemetry::TRACEPARENT_ENV,
    telemetry::TRACESTATE_ENV,
    telemetry::WORKER_ENV,
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "RUST_BACKTRACE",
    "RUST_LIB_BACKTRACE",
    "GITHUB_SHA",
    "SURFACE",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Claude,
    Codex,
    Cursor,
    Gemini,
    OpenCode,
}

/// A CLI backend.
pub struct Cli {
    pub kind: Kind,
}

/// What to spawn.
pub struct Invocation {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Files written into the workspace for this run, restored afterwards.
    pub files: Vec<WorkspaceFile>,
}

/// A CLI's event stream, folded into the run.
pub trait Events: Send {
    /// One JSON line from the CLI.
    fn event(&mut self, v: &Value, report: &Reporter);
    /// The outcome once the CLI has exited: the final text or a classified failure.
    fn finish(self: Box<Self>, done: &Finished) -> Result<Option<String>, Failure>;
}

/// The agent's own MCP servers its backend is given: all but those its
/// permissions deny whole.
pub fn own_servers(cfg: &RunConfig) -> Vec<(&String, &super::protocol::McpServer)> {
    let hidden = domain::permissions::backends::hidden_servers(&cfg.permissions);
    cfg.mcp_servers
        .iter()
        .filter(|(n, _)| !hidden.contains(n))
        .collect()
}

/// The environment variable that carries one secret of an agent's own server
/// (`key` of its env or headers) to a CLI that expands variables in its config:
/// config files name the variable, never the value.
pub fn secret_var(server: &str, key: &str) -> String {
    let clean = |s: &str| {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect::<String>()
    };
    format!("AW_MCP_{}_{}", clean(server), clean(key))
}

/// `values` (a server's env or headers) as the CLI's config writes them: each value
/// replaced by a reference to the environment variable that carries it (`refer`
/// spells the CLI's syntax, e.g. `${VAR}`), the pair added to `env`.
pub fn secret_refs(
    server: &str,
    values: &std::collections::BTreeMap<String, String>,
    refer: impl Fn(&str) -> String,
    env: &mut Vec<(String, String)>,
) -> serde_json::Map<String, Value> {
    values
        .iter()
        .map(|(k, v)| {
            let var = secret_var(server, k);
            env.push((var.clone(), v.clone()));
            (k.clone(), Value::String(refer(&var)))
        })
        .collect()
}

/// What a tool call is about, for a refusal: the first of `keys` the input has
/// (its command, path, URL…), else the whole input; clipped.
pub fn call_detail(input: &Value, keys: &[&str]) -> String {
    let detail = keys
        .iter()
        .find_map(|k| input[*k].as_str())
        .map_or_else(|| input.to_string(), str::to_owned);
    super::clip(&detail, 500).into_owned()
}

/// Files and folders private to one run (system prompt, Claude's MCP config),
/// removed when the run ends.
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    fn new(dir: &std::path::Path) -> Result<Self, Failure> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = dir.to_owned();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                Failure::new(
                    ErrorClass::Other,
                    format!("cannot create {}: {e}", dir.display()),
                )
            })?;
        Ok(Self { dir })
    }

    /// Writes a file readable by this user only.
    pub fn write(&self, name: &str, content: &str) -> Result<PathBuf, Failure> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.dir.join(name);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| f.write_all(content.as_bytes()).map(|_| f))
            .map_err(|e| {
                Failure::new(
                    ErrorClass::Other,
                    format!("cannot write {}: {e}", path.display()),
                )
            })?;
        let _ = f.flush();
        Ok(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs a short command (an auth check); its exit success and combined output.
pub async fn probe(program: &str, args: &[&str]) -> Option<(bool, String)> {
    let found = locate::locate(program)?;
    crate::sandbox::counted().ok()?;
    let mut cmd = tokio::process::Command::new(&found.path);
    if let Some(p) = locate::path_with(&found) {
        cmd.env("PATH", p);
    }
    for k in SCRUBBED_ENV {
        cmd.env_remove(k);
    }
    crate::agent_otel(&mut cmd);
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        cmd.args(args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .ok()?
    .ok()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success(), text.trim().to_owned()))
}

pub fn env_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.trim().is_empty())
}

/// Limits for the CLI inside the worker: a little inside the kernel's (the idle one
/// is the agent's own), so the worker can still report a timeout before the kernel
/// kills it.
fn cli_limits(cfg: &RunConfig) -> Limits {
    let k = Limits::default();
    let idle = Duration::from_millis(cfg.idle_ms);
    Limits {
        startup: k.startup.saturating_sub(Duration::from_secs(10)),
        idle: idle.saturating_sub((idle / 10).min(Duration::from_secs(30))),
        total: k.total.saturating_sub(Duration::from_secs(60)),
        grace: Duration::from_secs(3),
        held: process::Held::File(cfg.scratch.join(super::protocol::HELD_FILE)),
    }
}

impl Cli {
    pub fn for_backend(name: &str) -> Option<Self> {
        let kind = match name.parse::<Backend>().ok()? {
            Backend::Claude => Kind::Claude,
            Backend::Codex => Kind::Codex,
            Backend::Cursor => Kind::Cursor,
            Backend::Gemini => Kind::Gemini,
            Backend::OpenCode => Kind::OpenCode,
            Backend::Sdk | Backend::Mock | Backend::External | Backend::Human => return None,
        };
        Some(Self { kind })
    }

    pub fn program(&self) -> &'static str {
        match self.kind {
            Kind::Claude => "claude",
            Kind::Codex => "codex",
            Kind::Cursor => "cursor-agent",
            Kind::Gemini => "gemini",
            Kind::OpenCode => "opencode",
        }
    }

    pub fn install_hint(&self) -> &'static str {
        match self.kind {
            Kind::Claude => "npm install -g @anthropic-ai/claude-code",
            Kind::Codex => "npm install -g @openai/codex",
            Kind::Cursor => "curl https://cursor.com/install -fsS | bash",
            Kind::Gemini => "npm install -g @google/gemini-cli",
            Kind::OpenCode => "npm install -g opencode-ai",
        }
    }

    /// The availability check: the binary is there and has credentials. CLIs that
    /// do not fail fast without credentials (Codex, OpenCode, Cursor) are gated here,
    /// so a missing login is an `auth` error at once instead of minutes of retries.
    pub async fn check(&self, cfg: &RunConfig) -> Result<(), Failure> {
        let program = self.program();
        if locate::locate(program).is_none() {
            return Err(Failure::new(
                ErrorClass::Other,
                format!(
                    "the {} backend needs the `{program}` command, which is not on the PATH nor in the usual \
                     install places (npm's global folder, ~/.local/bin, /opt/homebrew/bin, /usr/local/bin); install \
                     it ({}) or add its folder to the agent's env PATH",
                    cfg.backend,
                    self.install_hint()
                ),
            ));
        }
        // Gemini fails fast on its own (exit 41) and has more ways to log in than
        // a check here can see, so a run does not gate on it.
        if self.kind == Kind::Gemini {
            return Ok(());
        }
        match self.auth_missing().await {
            Some(why) => Err(Failure::new(ErrorClass::Auth, why)),
            None => Ok(()),
        }
    }

    /// Why the CLI has no credentials in this environment, if it has none (the
    /// CLIs that fail fast on their own are trusted to say so when they run).
    pub async fn auth_missing(&self) -> Option<String> {
        match self.kind {
            Kind::Claude => claude::auth_missing().await,
            Kind::Codex => codex::auth_missing().await,
            Kind::Cursor => cursor::auth_missing().await,
            Kind::Gemini => gemini::auth_missing(),
            Kind::OpenCode => opencode::auth_missing(),
        }
    }

    /// Runs the CLI once; if resuming an earlier session fails because that session
    /// is gone, runs once more from a fresh one.
    pub async fn run(&self, run: &Run<'_>) -> Result<Option<String>, Failure> {
        match self.run_once(run, run.cfg.session_id.as_deref()).await {
            Err(f)
                if run.cfg.session_id.is_some()
                    && f.class == ErrorClass::Other
                    && lost_session(&f.message) =>
            {
                run.report
                    .progress("the earlier session is gone; starting a new one");
                self.run_once(run, None).await
            }
            r => r,
        }
    }

    async fn run_once(
        &self,
        run: &Run<'_>,
        session: Option<&str>,
    ) -> Result<Option<String>, Failure> {
        let scratch = Scratch::new(&run.cfg.scratch)?;
        let mut inv = match self.kind {
            Kind::Claude => claude::invocation(run, session, &scratch)?,
            Kind::Codex => codex::invocation(run, session, &scratch)?,
            Kind::Cursor => cursor::invocation(run, session)?,
            Kind::Gemini => gemini::invocation(run, session, &scratch)?,
            Kind::OpenCode => opencode::invocation(run, session, &scratch)?,
        };
        let _placed = skills::place(
            self.kind,
            &run.cfg.skills,
            &run.cfg.cwd,
            &scratch,
            &mut inv,
            run.report,
        )?;
        // Some CLIs take their project folder from PWD, not from their working
        // directory (OpenCode would call the agent's own folder external).
        inv.env
            .push(("PWD".into(), run.cfg.cwd.display().to_string()));
        let events: Box<dyn Events> = match self.kind {
            Kind::Claude => Box::<claude::Stream>::default(),
            Kind::Codex => Box::new(codex::Stream::new(session.and(run.cfg.session_usage))),
            Kind::Cursor => Box::<cursor::Stream>::default(),
            Kind::Gemini => Box::<gemini::Stream>::default(),
            Kind::OpenCode => Box::<opencode::Stream>::default(),
        };
        run.report.progress(format!("starting {}", inv.program));
        drive(run, inv, events).await
    }
}

/// Whether a failure says the session to resume is gone, in each CLI's words:
/// Claude `No conversation found with session ID …`, Gemini `Error resuming session:
/// No previous sessions found for this project.`, Codex `thread/resume failed: no
/// rollout found for thread id …`.
fn lost_session(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    [
        "no conversation found",
        "session not found",
        "no session",
        "no previous session",
        "error resuming session",
        "thread not found",
        "no rollout found",
        "resume failed",
        "could not find session",
        "not found",
    ]
    .iter()
    .any(|w| m.contains(w))
        && (m.contains("session") || m.contains("conversation") || m.contains("thread"))
}

/// Spawns the CLI and folds its events; the workspace files are restored after.
async fn drive(
    run: &Run<'_>,
    inv: Invocation,
    mut events: Box<dyn Events>,
) -> Result<Option<String>, Failure> {
    let found = locate::locate(&inv.program).ok_or_else(|| {
        Failure::new(
            ErrorClass::Other,
            format!("{} is no longer installed", inv.program),
        )
    })?;
    crate::sandbox::counted().map_err(|e| Failure::new(ErrorClass::Other, e))?;
    let mut cmd = tokio::process::Command::new(&found.path);
    cmd.args(&inv.args).current_dir(&run.cfg.cwd);
    if let Some(p) = locate::path_with(&found) {
        cmd.env("PATH", p);
    }
    for k in SCRUBBED_ENV {
        cmd.env_remove(k);
    }
    cmd.env(TOKEN_ENV, &run.cfg.token);
    crate::agent_otel(&mut cmd);
    // A CLI that continues TRACEPARENT (Claude Code, Codex) nests its spans here.
    cmd.envs(
        telemetry::current_carrier()
            .into_iter()
            .map(|(k, v)| (k.to_ascii_uppercase(), v)),
    );
    cmd.envs(inv.env.iter().map(|(k, v)| (k, v)));
    let report = run.report;
    let limits = cli_limits(run.cfg);
    let described = limits.clone();
    // Every event of the CLI (text, thinking, a command it runs) is a sign of life,
    // not only the ones we report: without this the kernel's idle limit would stop a
    // CLI that is busy streaming an answer.
    // At most once a second, and well inside a short idle limit.
    let alive_every = (Duration::from_millis(run.cfg.idle_ms) / 4).min(Duration::from_secs(1));
    let mut last_alive: Option<std::time::Instant> = None;
    let done = process::supervise(
        cmd,
        limits,
        Group::Inherit,
        run.stop.clone(),
        |_| {},
        |line| {
            if let Ok(v) = serde_json::from_str::<Value>(line.trim()) {
                events.event(&v, report);
            }
            if last_alive.is_none_or(|t| t.elapsed() >= alive_every) {
                last_alive = Some(std::time::Instant::now());
                report.send(&super::protocol::Report::Alive);
            }
        },
    )
    .await
    .map_err(|e| {
        Failure::new(
            ErrorClass::Other,
            format!("cannot start {}: {e}", inv.program),
        )
    })?;
    drop(inv.files);
    let class = match done.ended {
        process::Ended::Exited => return events.finish(&done),
        process::Ended::Stopped => ErrorClass::Stopped,
        _ => ErrorClass::Timeout,
    };
    Err(Failure::new(
        class,
        format!("{} {}", inv.program, done.ended.describe(&described)),
    ))
}

/// The end of a stream in Claude Code's shape (Cursor's imitates it): a final
/// `result` event with `is_error`, `subtype` and the final text in `result`.
#[derive(Default)]
pub struct ResultEnd {
    pub result: Option<Value>,
    /// The last assistant text, if no result carries one.
    pub last_text: Option<String>,
    pub errors: Vec<String>,
}

impl ResultEnd {
    pub fn finish(self, done: &Finished, program: &str) -> Result<Option<String>, Failure> {
        let mut errors = self.errors;
        match &self.result {
            None => {
                if let Some(t) = self.last_text {
                    errors.insert(0, t);
                }
            }
            Some(r) => {
                let ok = r["is_error"] != Value::Bool(true)
                    && str_at(r, &["subtype"]) == Some("success");
                if ok && done.success() {
                    return Ok(str_at(r, &["result"]).map(str::to_owned).or(self.last_text));
                }
                // Claude puts the reason in `errors` and only a code in `subtype`
                // (`error_during_execution`).
                let listed: Vec<String> = r["errors"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.as_str().map(str::to_owned))
                    .collect();
                if !listed.is_empty() {
                    errors.splice(0..0, listed);
                } else if let Some(what) = str_at(r, &["result"]).or(str_at(r, &["subtype"])) {
                    errors.insert(0, what.to_owned());
                }
            }
        }
        Err(failure_from(&errors, done, program))
    }
}

/// A failure from whatever the CLI said: its error events first, then stderr.
pub fn failure_from(errors: &[String], done: &Finished, program: &str) -> Failure {
    let mut msg = errors.join("; ");
    if msg.trim().is_empty() {
        msg = stderr_words(&done.stderr_tail);
    }
    if msg.trim().is_empty() {
        msg = format!(
            "{program} exited with {} and printed no error",
            match (done.exit_code(), done.signal()) {
                (_, Some(s)) => format!("signal {s}"),
                (c, _) => format!("code {}", c.unwrap_or(-1)),
            }
        );
    }
    Failure::classified(msg)
}

/// What a CLI's stderr says went wrong: its last lines that mention an error, or
/// else its last lines (a backtrace or a progress bar after the error says nothing).
fn stderr_words(tail: &str) -> String {
    let lines: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
    let errors: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.to_ascii_lowercase().contains("error"))
        .collect();
    let chosen = if errors.is_empty() { &lines } else { &errors };
    chosen[chosen.len().saturating_sub(5)..].join("\n")
}

/// The number at `path` in a JSON value, as u64 (0 when absent).
pub fn num(v: &Value, path: &[&str]) -> u64 {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(x) => cur = x,
            None => return 0,
        }
    }
    cur.as_u64().unwrap_or(0)
}

pub fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str()
}

#[cfg(test)]
mod tests {
    use super::{lost_session, stderr_words};

    #[test]
    fn the_error_in_stderr_is_kept_over_a_backtrace_after_it() {
        let codex = "Error: thread/resume failed: no rollout found for thread id 0199\n\
                     \nStack backtrace:\n   0: <unknown>\n   1: <unknown>\n   2: <unknown>\n\
                     \x20  3: <unknown>\n   4: <unknown>\n   5: <unknown>\n";
        assert_eq!(
            stderr_words(codex),
            "Error: thread/resume failed: no rollout found for thread id 0199"
        );
        assert_eq!(stderr_words("a\nb\nc\nd\ne\nf\n"), "b\nc\nd\ne\nf");
        assert_eq!(stderr_words(""), "");
    }

    #[test]
    fn a_resume_of_a_vanished_session_is_recognised_in_each_clis_words() {
        for said in [
            "No conversation found with session ID: 4f1c0b1e-0000-4000-8000-000000000000",
            "Error resuming session: No previous sessions found for this project.",
            "thread/resume failed: no rollout found for thread id 0199a3b2-7c1d-7e00-9000-000000000000",
        ] {
            assert!(lost_session(said), "{said}");
        }
        for said in [
            "API Error: 401 invalid x-api-key",
            "command not found",
            "rate limit exceeded",
        ] {
            assert!(!lost_session(said), "{said}");
        }
    }
}
