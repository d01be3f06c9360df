//! The control channel between the kernel and a worker, both directions.
//!
//! kernel -> worker: one [`RunConfig`] as JSON on the worker's stdin (at most
//! [`MAX_RUN_CONFIG`] bytes, then closed), with `AW_RUN=stdin` in its environment.
//! worker -> kernel: [`Report`]s as JSON lines on stdout. Anything else on stdout is
//! ignored (but still counts as a sign of life for the idle timeout).
//!
//! This module is plain data so that the kernel can depend on it without depending on
//! how a worker runs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The environment variable that says where the run configuration is.
pub const RUN_ENV: &str = "AW_RUN";
/// [`RUN_ENV`]'s value: the configuration is on stdin. (It used to be the
/// variable's value, which a long system prompt or mock rules could push past the
/// 128 KiB one variable may hold: every run then failed with E2BIG.)
pub const RUN_ON_STDIN: &str = "stdin";
/// The most a run configuration may take. Every part of it is bounded where it is
/// set (agent_new, the YAML), well below this; the worker reads no more.
pub const MAX_RUN_CONFIG: u64 = 16 * 1024 * 1024;
/// The name backends see for the kernel's own MCP server (tools `mcp__team__…`).
pub const TEAM_SERVER: &str = "team";

/// A run's private scratch folder (a CLI's system prompt and MCP config, which
/// holds the run's token, and its `TMPDIR`) in the kernel's data dir: hidden from
/// every other run with the data dir, at no cost (hiding one in a crowded `/tmp`
/// took a Landlock rule per entry of `/tmp`). The worker removes it; the kernel
/// removes it again when the run ends, in case the worker was killed first.
pub fn scratch_dir(data_dir: &std::path::Path, run_id: &str) -> PathBuf {
    data_dir.join("scratch").join(format!("run-{run_id}"))
}

/// The file the kernel keeps in a run's scratch folder while the run waits for an
/// approval: the worker's supervision of its CLI then does not count the silence.
pub const HELD_FILE: &str = "held";

/// Everything a worker needs for one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunConfig {
    pub run_id: String,
    pub agent: String,
    /// The workflow instance, e.g. `@review:pr-1`.
    pub workflow: String,
    pub backend: String,
    pub model: Option<String>,
    pub system: Option<String>,
    /// The working directory the backend runs in (already created).
    pub cwd: PathBuf,
    /// The agent's own folder in the data dir (already created), for state that must
    /// not land in a shared working directory (the mock's `times` counters).
    pub state_dir: PathBuf,
    /// The run's scratch folder ([`scratch_dir`]; made by the worker).
    pub scratch: PathBuf,
    /// The kernel stops a run whose worker prints nothing for this long; the worker
    /// keeps its CLI to a little less so it can still say why.
    pub idle_ms: u64,
    /// The kernel's MCP endpoint.
    pub url: String,
    /// The run's own agent token; revoked when the run ends.
    pub token: String,
    /// The backend's conversation to continue, if an earlier run left one.
    pub session_id: Option<String>,
    /// What the backend had counted for that whole conversation when it last ended
    /// (see [`Report::SessionTotal`]).
    #[serde(default)]
    pub session_usage: Option<Usage>,
    /// Why this run started.
    pub trigger: crate::states::Wake,
    /// An extra instruction for this run (a schedule's prompt).
    pub prompt: Option<String>,
    /// The mock backend's rules.
    #[serde(default)]
    pub mock: Vec<MockRule>,
    /// Cap on model turns (sdk) or CLI turns where the CLI has one.
    pub max_steps: u32,
    /// What the agent may do on the machine.
    #[serde(default)]
    pub permissions: crate::permissions::Permissions,
    /// The agent's own MCP servers, given to its backend beside the team server.
    #[serde(default)]
    pub mcp_servers: std::collections::BTreeMap<String, McpServer>,
    /// The agent's skills, read at the run's start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<SkillRef>,
    /// Tool classes (read, edit, shell, web, mcp) a contract governs for this agent:
    /// a CLI with a permission hook brings those requests to the kernel
    /// (permission_request) instead of deciding them by its own rules.
    #[serde(default)]
    pub governed: Vec<String>,
    /// The OS sandbox the worker puts itself in before anything else (None: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::Sandbox>,
}

/// An MCP server of an agent's own: a command it starts (stdio) or a URL.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum McpServer {
    Stdio(StdioServer),
    Http(HttpServer),
}

/// A file a mock rule writes: `path` relative to the agent's folder.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MockWrite {
    pub path: String,
    pub content: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StdioServer {
    /// The program to start (on the agent's PATH, or an absolute path).
    pub command: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment for it (secrets welcome: never shown back or logged).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HttpServer {
    /// Its streamable HTTP endpoint.
    pub url: String,
    /// Headers to send, e.g. Authorization (never shown back or logged).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub headers: std::collections::BTreeMap<String, String>,
}

/// A server as tools show it: what it runs or where it is, and the names (never
/// the values) of its env variables and headers.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct McpServerView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Env variable names (values are not shown).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Header names (values are not shown).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
}

impl From<&McpServer> for McpServerView {
    fn from(s: &McpServer) -> Self {
        match s {
            McpServer::Stdio(s) => Self {
                command: Some(s.command.clone()),
                args: s.args.clone(),
                url: None,
                env: s.env.keys().cloned().collect(),
                headers: Vec::new(),
            },
            McpServer::Http(h) => Self {
                command: None,
                args: Vec::new(),
                url: Some(h.url.clone()),
                env: Vec::new(),
                headers: h.headers.keys().cloned().collect(),
            },
        }
    }
}

impl McpServer {
    /// Checks one server entry; `name` is its key. The error names the field.
    pub fn validate(name: &str, s: &McpServer) -> Result<(), String> {
        let ok = !name.is_empty()
            && name.len() <= 40
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !ok {
            return Err(format!(
                "mcp_servers: {name:?} is not a server name: use 1-40 letters, digits, '_' or '-'"
            ));
        }
        if name.eq_ignore_ascii_case(TEAM_SERVER) {
            return Err(format!(
                "mcp_servers: {name:?} is the team server's name; choose another"
            ));
        }
        match s {
            McpServer::Stdio(s) if s.command.trim().is_empty() => Err(format!(
                "mcp_servers.{name}.command is empty: give the program that starts the server"
            )),
            McpServer::Http(h)
                if !(h.url.starts_with("http://") || h.url.starts_with("https://")) =>
            {
                Err(format!(
                    "mcp_servers.{name}.url must start with http:// or https://"
                ))
            }
            _ => Ok(()),
        }
    }
}

/// A skill a run may use: its name, what it is for, and its folder.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SkillRef {
    pub name: String,
    pub description: String,
    pub dir: PathBuf,
}

/// One rule of the mock backend: the first rule whose `when` matches a message is
/// applied; a rule that only sleeps lets the next matching rule apply too.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MockRule {
    /// Case-insensitive regex on the message text (default: every message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// Wait this long first, e.g. "2s".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep: Option<String>,
    /// Post this to the channel. `{from}` is the sender of the message, `{name}` this
    /// agent, `{message}` the message text with its @ signs removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send: Option<String>,
    /// With `send`: make it a direct message to this member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Append to a shared document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc_append: Option<MockDocAppend>,
    /// Vote on a proposal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vote: Option<MockVote>,
    /// Store this text as a resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Write a file in its folder, as the sdk backend's write_file does (its
    /// permissions and the contracts decide; a refusal fails the run):
    /// {path: "src/retry.rs", content: "..."}.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<MockWrite>,
    /// Start a vote: a proposal with these options, e.g.
    /// {title: "Ship it?", options: [yes, no]}.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propose: Option<MockPropose>,
    /// Claim a task of the board, hold it, then move it:
    /// {hold: "2s", state: done, result: {...}} (see [`MockTask`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<MockTask>,
    /// Fail the run with this error (its deliveries stay pending).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail: Option<String>,
    /// Apply this rule only the first N times it matches (counted in a file in the
    /// agent's own folder in the data dir, so across runs): e.g. fail twice, then succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
    /// The run's private final text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Submit this result for the message (result_submit, naming it); a refusal
    /// fails the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MockDocAppend {
    /// Default notes.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub content: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MockPropose {
    pub title: String,
    /// The choices (at least two).
    pub options: Vec<String>,
    /// plurality (default), majority or unanimous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    /// How many votes close it (default: every member).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<u32>,
}

/// A mock rule's task: task_claim (`id`, or the best task for the agent), then
/// after `hold` task_update to `state` with `result` and `note`; with no `state`
/// the claim is kept. Nothing to claim, or a refused claim, is no failure.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MockTask {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// How long to hold the claim before moving it, e.g. "2s".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<String>,
    /// done, failed or open (give it back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MockVote {
    /// A proposal id such as "prop-1" (default "latest").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<String>,
    pub choice: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

pub const MAX_MOCK_RULES: usize = 50;

impl MockRule {
    /// The compiled `when` (None = every message): case-insensitive, size-bounded.
    pub fn regex(&self) -> Result<Option<regex::Regex>, regex::Error> {
        self.when
            .as_deref()
            .map(|w| {
                regex::RegexBuilder::new(w)
                    .case_insensitive(true)
                    .size_limit(1 << 20)
                    .build()
            })
            .transpose()
    }

    /// Checks a rule list; the error says which rule and what to change.
    pub fn validate_all(rules: &[MockRule]) -> Result<(), String> {
        if rules.len() > MAX_MOCK_RULES {
            return Err(format!("at most {MAX_MOCK_RULES} mock rules"));
        }
        for (i, r) in rules.iter().enumerate() {
            let n = i + 1;
            r.regex()
                .map_err(|e| format!("mock rule {n}: `when` is not a valid regex: {e}"))?;
            for (what, s) in [
                ("sleep", &r.sleep),
                ("task.hold", &r.task.as_ref().and_then(|t| t.hold.clone())),
            ] {
                let Some(s) = s else { continue };
                let d = humantime::parse_duration(s).map_err(|_| {
                    format!("mock rule {n}: {what} {s:?} is not a duration; write e.g. \"2s\"")
                })?;
                if d > std::time::Duration::from_secs(3600) {
                    return Err(format!("mock rule {n}: {what} is at most 1h"));
                }
            }
            if r.to.is_some() && r.send.is_none() {
                return Err(format!("mock rule {n}: `to` needs `send`"));
            }
            let acts = [
                r.sleep.is_some(),
                r.send.is_some(),
                r.doc_append.is_some(),
                r.vote.is_some(),
                r.propose.is_some(),
                r.resource.is_some(),
                r.write.is_some(),
                r.task.is_some(),
                r.fail.is_some(),
                r.reply.is_some(),
                r.result.is_some(),
            ];
            if !acts.contains(&true) {
                return Err(format!(
                    "mock rule {n} does nothing: give it one of sleep, write, send, doc_append, vote, propose, \
                     resource, result, task, fail, reply"
                ));
            }
            if let Some(w) = &r.write
                && (w.path.trim().is_empty() || w.content.len() > 1024 * 1024)
            {
                return Err(format!(
                    "mock rule {n}: write needs a path, and at most 1 MiB of content"
                ));
            }
            if let Some(p) = &r.propose
                && p.options.len() < 2
            {
                return Err(format!("mock rule {n}: propose needs at least two options"));
            }
            if r.times == Some(0) {
                return Err(format!(
                    "mock rule {n}: times must be at least 1 (leave it out for always)"
                ));
            }
        }
        Ok(())
    }
}

/// What went wrong in a run, in the words a scheduler acts on.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// Not logged in, bad or missing key: a person must act.
    Auth,
    /// Out of credit or quota: a person must act.
    BillingQuota,
    /// Too many requests: try again later.
    RateLimit,
    /// The provider or the kernel could not be reached.
    Network,
    /// A limit of the process manager (startup, idle or total).
    Timeout,
    /// The worker died without reporting an outcome.
    Crash,
    /// Stopped on purpose (pause, delete, shutdown).
    Stopped,
    /// The kernel restarted while the run was in progress.
    Lost,
    Other,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Auth => "auth",
            ErrorClass::BillingQuota => "billing_quota",
            ErrorClass::RateLimit => "rate_limit",
            ErrorClass::Network => "network",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Crash => "crash",
            ErrorClass::Stopped => "stopped",
            ErrorClass::Lost => "lost",
            ErrorClass::Other => "other",
        }
    }
}

/// Token counts and cost. Reports carry the run's running totals, not increments.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// In US dollars, when the backend reports it or its price is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
    }
}

/// A line a worker prints on stdout.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Report {
    /// Printed first, before anything slow.
    Started,
    /// Something happened (a tool call, a model turn). Shown as MCP progress.
    Progress { message: String },
    /// The backend is busy (its CLI printed something); resets the kernel's idle timer
    /// without a progress notification.
    Alive,
    /// The backend's conversation id, to resume next time.
    Session { id: String },
    /// The run's usage so far.
    Usage(Usage),
    /// The backend's count for its whole conversation, where it only reports that
    /// (Codex counts a resumed thread from its start); kept with the session so the
    /// next run can take it off.
    SessionTotal(Usage),
    /// A process group the run started outside its own (a command of the sdk
    /// backend runs in its own group): the kernel kills it when the run ends, so a
    /// worker that dies outright still leaves nothing running.
    Group {
        pid: u32,
        #[serde(default)]
        start_time: Option<u64>,
    },
    /// A tool call the agent's permissions refused (nothing of it happened); kept
    /// with the run so the lead sees what the agent was denied.
    Denied {
        tool: String,
        detail: String,
        reason: String,
    },
    /// The outcome; the last line of a run.
    Result(Outcome),
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Outcome {
    pub ok: bool,
    /// The backend's private final text (never posted to the channel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<ErrorClass>,
    /// The error in the backend's own words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Report {
    /// One JSON line.
    pub fn line(&self) -> String {
        serde_json::to_string(self).expect("reports serialise")
    }

    /// Parses a stdout line; `None` for anything that is not a report.
    pub fn parse(line: &str) -> Option<Report> {
        let line = line.trim();
        if !line.starts_with('{') {
            return None;
        }
        serde_json::from_str(line).ok()
    }
}

/// The most one MCP request to the kernel may carry, over HTTP: the kernel's body
/// limit, and what a worker's client checks before it sends.
pub const MAX_MCP_BODY: usize = 4 * 1024 * 1024;

/// The worker binary's readiness-probe mode (`agent-worker __probe [backend…]`):
/// one JSON line of [`BackendReport`]s on stdout.
pub const PROBE_MODE: &str = "__probe";

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct BackendReport {
    pub backend: String,
    /// Whether an agent of this backend can run here now.
    pub ready: bool,
    /// Where its command is (CLIs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// False when the command was found only in a usual install place, not on the PATH.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_path: Option<bool>,
    /// What `--version` printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Whether credentials were found (`None`: none needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logged_in: Option<bool>,
    /// What to do to make it ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// What each permission profile becomes on this backend.
    pub profiles: BTreeMap<String, String>,
}
