//! Test harness: the real binary over real transports, or the kernel in the test's
//! own process (in_process.rs), driven by rmcp's client.
#![allow(dead_code)]

pub mod clis;
pub mod fake_llm;
pub mod heavy;
pub mod in_process;
pub mod inspector;
pub mod otlp;
pub mod packaging;
pub mod proxy;
pub mod raw;
pub mod repo;
pub mod store;
pub mod waits;

#[allow(unused_imports)] // not every test binary uses it
pub use in_process::InProcess;
#[allow(unused_imports)]
pub use raw::*;
pub use waits::*;

use rmcp::{
    RoleClient,
    model::{CallToolRequestParams, ProtocolVersion},
    service::{ClientLifecycleMode, ClientServiceExt, RunningService},
    transport::{
        StreamableHttpClientTransport, TokioChildProcess,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};

pub const BIN: &str = env!("CARGO_BIN_EXE_agent-worker");

pub type Client = RunningService<RoleClient, ()>;

/// What an agent session sees.
pub const CONTEXT_TOOLS: &[&str] = &[
    "approval_decide",
    "approval_list",
    "branch_diff",
    "channel_read",
    "channel_send",
    "document_suggest",
    "my_feedback",
    "my_inbox",
    "my_inbox_ack",
    "my_inbox_defer",
    "my_status_set",
    "resource_create",
    "resource_read",
    "result_submit",
    "task_add",
    "task_claim",
    "task_list",
    "task_update",
    "team_doc_append",
    "team_doc_create",
    "team_doc_list",
    "team_doc_read",
    "team_doc_write",
    "team_members",
    "team_proposal_cancel",
    "team_proposal_create",
    "team_proposal_status",
    "team_vote",
];
/// What only the lead sees, besides the context tools.
pub const MANAGEMENT_TOOLS: &[&str] = &[
    "agent_ask",
    "agent_delete",
    "agent_info",
    "agent_join",
    "agent_list",
    "agent_new",
    "agent_pause",
    "agent_update",
    "backend_list",
    "branch_merge",
    "contract_list",
    "contract_set",
    "hook_set",
    "org_set",
    "schedule_set",
    "workflow_context_set",
    "workflow_list",
    "workflow_run",
    "workflow_status",
    "workflow_stop",
];

/// Every tool, sorted: what the lead sees.
pub fn lead_tools() -> Vec<String> {
    let mut all: Vec<String> = CONTEXT_TOOLS
        .iter()
        .chain(MANAGEMENT_TOOLS)
        .map(|t| t.to_string())
        .collect();
    all.sort();
    all
}

/// Which MCP protocol generation a client speaks.
#[derive(Clone, Copy, Debug)]
pub enum Proto {
    /// 2025-11-25: initialize handshake, sessions over HTTP.
    Legacy,
    /// 2026-07-28: server/discover, stateless.
    Modern,
}

fn lifecycle(p: Proto) -> ClientLifecycleMode {
    match p {
        Proto::Legacy => ClientLifecycleMode::Initialize,
        Proto::Modern => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    }
}

/// The retry backoff a tenth of production's (1 s, 2 s, 4 s), for a server whose
/// test sits through failed runs: `HttpServer::start_with_env(dir, &[SHORT_RETRIES])`.
pub const SHORT_RETRIES: (&str, &str) = ("AGENT_WORKER_RETRY_DELAYS_MS", "100,200,400");

/// A server process serving HTTP on an ephemeral loopback port.
pub struct HttpServer {
    pub child: tokio::process::Child,
    pub url: String,
    pub data_dir: PathBuf,
    pub admin: String,
}

impl HttpServer {
    pub async fn start(data_dir: &Path) -> Self {
        Self::start_with_env(data_dir, &[]).await
    }

    /// Starts the server with extra environment variables (e.g. a worker limit).
    pub async fn start_with_env(data_dir: &Path, env: &[(&str, &str)]) -> Self {
        Self::start_with(data_dir, &[], env).await
    }

    /// Starts the server with extra launch flags and environment variables. With
    /// `--token T` the admin token is T (no admin.token file is written).
    pub async fn start_with(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = tokio::process::Command::new(BIN)
            .args(["--http", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(args)
            .envs(store::env_for(data_dir))
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn agent-worker");
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let url = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(l) = lines.next_line().await.unwrap() {
                if let Some(rest) = l.split("serving MCP at ").nth(1) {
                    return rest.split_whitespace().next().unwrap().to_owned();
                }
            }
            panic!("server exited before printing its URL");
        })
        .await
        .expect("server did not start in time");
        // Keep draining stderr so the server never blocks on a full pipe.
        let echo = std::env::var_os("AW_TEST_SERVER_LOG").is_some();
        tokio::spawn(async move {
            while let Ok(Some(l)) = lines.next_line().await {
                if echo {
                    eprintln!("server: {l}");
                }
            }
        });
        let given = args
            .iter()
            .position(|a| *a == "--token")
            .map(|i| args[i + 1].to_owned());
        let admin = given.unwrap_or_else(|| {
            std::fs::read_to_string(data_dir.join("admin.token"))
                .unwrap()
                .trim()
                .to_owned()
        });
        Self {
            child,
            url,
            data_dir: data_dir.to_owned(),
            admin,
        }
    }

    /// SIGTERM and wait: a clean shutdown.
    pub async fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id().unwrap() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("server did not stop");
        assert!(
            status.unwrap().success(),
            "server exited with an error on SIGTERM"
        );
    }

    /// SIGKILL: a crash.
    pub async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }
}

/// A kernel a test talks to: a server process ([`HttpServer`]) or one in the test's
/// own process ([`InProcess`]).
pub trait Served {
    /// Its MCP endpoint over HTTP.
    fn url(&self) -> &str;
    /// The lead's bearer token.
    fn admin(&self) -> &str;

    /// A session with this bearer token over HTTP.
    async fn client(&self, token: &str, p: Proto) -> Client {
        http_client(self.url(), token, p).await
    }

    /// A lead session (over HTTP with the admin token, unless the kernel says otherwise).
    async fn lead(&self, p: Proto) -> Client {
        self.client(self.admin(), p).await
    }
}

impl Served for HttpServer {
    fn url(&self) -> &str {
        &self.url
    }

    fn admin(&self) -> &str {
        &self.admin
    }
}

pub async fn http_client(url: &str, token: &str, p: Proto) -> Client {
    let t = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
    );
    ().serve_with_lifecycle(t, lifecycle(p))
        .await
        .expect("connect over HTTP")
}

/// The transport of a default stdio launch (relayed to the data dir's kernel, not in
/// the foreground) with extra launch flags, for a test that connects or expects the
/// connection to be refused.
pub fn stdio_launch(data_dir: &Path, args: &[&str]) -> TokioChildProcess {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .env_remove("AGENT_WORKER_FOREGROUND");
    let (t, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the stdio launch");
    t
}

/// A lead session over stdio: the binary spawned as a child process.
pub async fn stdio_client(data_dir: &Path, p: Proto) -> Client {
    let mut cmd = tokio::process::Command::new(BIN);
    // In this process: the session is the kernel's life (tests/background.rs covers
    // the default, a kernel in the background).
    cmd.arg("--data-dir").arg(data_dir).arg("--foreground");
    cmd.envs(store::env_for(data_dir));
    let (t, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn stdio server");
    ().serve_with_lifecycle(t, lifecycle(p))
        .await
        .expect("connect over stdio")
}

/// The outcome of a tool call: structured content on success, the error text on a
/// tool error. JSON-RPC failures panic (tests expect none unless they say so).
#[derive(Debug)]
pub enum Out {
    Ok(Value),
    Err(String),
}

impl Out {
    #[track_caller]
    pub fn ok(self) -> Value {
        match self {
            Out::Ok(v) => v,
            Out::Err(e) => panic!("expected success, got tool error: {e}"),
        }
    }
    #[track_caller]
    pub fn err(self) -> String {
        match self {
            Out::Err(e) => e,
            Out::Ok(v) => panic!("expected a tool error, got {v}"),
        }
    }
}

/// A tool's result, for any session (`&client` coerces: a session derefs to its peer).
pub async fn call(c: &rmcp::Peer<RoleClient>, tool: &str, args: Value) -> Out {
    try_call(c, tool, args)
        .await
        .unwrap_or_else(|e| panic!("{tool}: protocol error {e}"))
}

pub async fn try_call(
    c: &rmcp::Peer<RoleClient>,
    tool: &str,
    args: Value,
) -> Result<Out, rmcp::ServiceError> {
    let args = match args {
        Value::Object(m) => m,
        Value::Null => Default::default(),
        other => panic!("arguments must be an object, got {other}"),
    };
    let r = c
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await?;
    if r.is_error == Some(true) {
        let text = r
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        return Ok(Out::Err(text));
    }
    Ok(Out::Ok(r.structured_content.unwrap_or(Value::Null)))
}

/// The tool names a session sees, sorted.
pub async fn tool_names(c: &Client) -> Vec<String> {
    let mut names: Vec<String> = c
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    names
}

pub async fn info(lead: &Client, target: &str) -> Value {
    call(lead, "agent_info", json!({"target": target}))
        .await
        .ok()
}

/// The node that runs `target`, as agent_info shows it ("" for none).
pub async fn node_of(lead: &Client, target: &str) -> String {
    info(lead, target).await["agent"]["node"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The lead's `agent-worker://nodes`.
pub async fn nodes(c: &Client) -> Value {
    let r = c
        .peer()
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "agent-worker://nodes",
        ))
        .await
        .unwrap();
    match &r.contents[0] {
        rmcp::model::ResourceContents::TextResourceContents { text, .. } => {
            serde_json::from_str(text).unwrap()
        }
        other => panic!("not text: {other:?}"),
    }
}

/// Resumes a paused agent (agent_pause with resume).
pub async fn resume(lead: &Client, target: &str) {
    call(
        lead,
        "agent_pause",
        json!({"target": target, "resume": true}),
    )
    .await
    .ok();
}

/// Polls agent_info until the agent has no run in progress.
pub async fn settled(lead: &Client, target: &str) -> Value {
    for _ in 0..200 {
        let i = info(lead, target).await;
        if i.get("running").is_none() {
            return i;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{target} is still running after 20 s");
}

/// agent_ask, waiting up to `wait` seconds.
pub async fn ask(lead: &Client, target: &str, message: &str, wait: u64) -> Value {
    call(
        lead,
        "agent_ask",
        json!({"target": target, "message": message, "wait_seconds": wait}),
    )
    .await
    .ok()
}

/// Registers agents in a workflow instance (as the lead).
pub async fn new_agents(lead: &rmcp::Peer<RoleClient>, workflow: &str, names: &[&str]) {
    for n in names {
        call(
            lead,
            "agent_new",
            json!({"name": n, "backend": "external", "workflow": workflow}),
        )
        .await
        .ok();
    }
}

/// Registers a mock agent in the lead's default instance, driven by `rules`.
pub async fn new_mock(lead: &Client, name: &str, rules: Value) {
    call(
        lead,
        "agent_new",
        json!({"name": name, "backend": "mock", "mock": rules}),
    )
    .await
    .ok();
}

/// An sdk agent of the fake model at `llm_url`, working in `work` under `permissions`.
pub async fn new_sdk_in(lead: &Client, name: &str, work: &Path, llm_url: &str, permissions: Value) {
    call(
        lead,
        "agent_new",
        json!({"name": name, "backend": "sdk", "model": "claude-sonnet-4-5",
               "env": {"ANTHROPIC_BASE_URL": llm_url, "ANTHROPIC_API_KEY": "sk-test"},
               "cwd": work.display().to_string(), "permissions": permissions}),
    )
    .await
    .ok();
}

/// The JSON-RPC messages in an SSE body, or the JSON body itself.
pub fn messages(body: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return vec![v];
    }
    body.split("\n\n")
        .filter_map(|ev| {
            let data: String = ev
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            serde_json::from_str(&data).ok()
        })
        .collect()
}

/// A kernel in the foreground on `dir`, its stdin and stdout piped (raw stdio
/// lines, no client library in between).
pub fn foreground_kernel(dir: &Path) -> tokio::process::Child {
    tokio::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(dir)
        .arg("--foreground")
        .envs(store::env_for(dir))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn a foreground kernel")
}

/// Polls tasks/get until the task `id` has ended (at most `secs`): its last state.
pub async fn task_ended(
    peer: &rmcp::Peer<RoleClient>,
    id: &str,
    secs: u64,
) -> rmcp::model::DetailedTask {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let got = peer
            .get_task(rmcp::model::GetTaskParams::new(id.to_owned()))
            .await
            .unwrap_or_else(|e| panic!("tasks/get {id}: {e}"));
        if got.task.status().is_terminal() {
            return got.task;
        }
        assert!(
            Instant::now() < end,
            "the task {id} did not end within {secs} s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An agent session through an agent_join token.
pub async fn join(server: &impl Served, lead: &Client, target: &str, p: Proto) -> Client {
    let j = call(lead, "agent_join", json!({"target": target}))
        .await
        .ok();
    server.client(j["token"].as_str().unwrap(), p).await
}

/// Registers agents in a workflow instance and connects each through its own
/// agent_join token, alternating protocol generations (2026-07-28 first).
pub async fn agent_sessions(
    server: &impl Served,
    lead: &Client,
    workflow: &str,
    names: &[&str],
) -> Vec<Client> {
    new_agents(lead, workflow, names).await;
    let mut out = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let p = if i % 2 == 0 {
            Proto::Modern
        } else {
            Proto::Legacy
        };
        out.push(join(server, lead, &format!("{n}{workflow}"), p).await);
    }
    out
}

/// The entry of `agents` named `name` in a tool's result (agent_list,
/// workflow_status, workflow_run).
pub fn agent_named<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["agents"]
        .as_array()
        .unwrap_or_else(|| panic!("no agents in {v}"))
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no agent {name}: {v}"))
}

pub fn ids(v: &Value) -> Vec<String> {
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

pub fn contents(v: &Value) -> Vec<String> {
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}
