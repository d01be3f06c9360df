//! Shared by the examples: an in-process kernel served over loopback HTTP, and a
//! thin MCP client over rmcp. Everything the examples do goes through MCP.
#![allow(dead_code)]

use agent_worker::kernel::Kernel;
use agent_worker::mcp::{Tools, http};
use agent_worker::store::Location;
use rmcp::{
    RoleClient,
    model::{CallToolRequestParams, ProtocolVersion},
    service::{ClientLifecycleMode, ClientServiceExt, RunningService},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

pub type Client = RunningService<RoleClient, ()>;

/// A kernel on `dir`, served at the returned loopback URL until the process ends.
pub async fn start_kernel(dir: &Path, admin: &str) -> (Arc<Kernel>, String) {
    let store = Location::Sqlite(dir.join(agent_worker::kernel::DB_FILE));
    start_kernel_at(dir, admin, &store).await
}

/// [`start_kernel`] with its state at `store` (SQLite or PostgreSQL).
pub async fn start_kernel_at(dir: &Path, admin: &str, store: &Location) -> (Arc<Kernel>, String) {
    let node = agent_worker::kernel::runtime::nodes::default_name();
    start_node(dir, admin, store, &node).await
}

/// [`start_kernel_at`] as node `node` (several nodes may share a PostgreSQL store).
pub async fn start_node(
    dir: &Path,
    admin: &str,
    store: &Location,
    node: &str,
) -> (Arc<Kernel>, String) {
    let kernel = Kernel::open_at(dir, admin.to_owned(), store, node)
        .await
        .expect("open kernel");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    kernel.set_url(url.clone());
    let app = http::app(
        kernel.clone(),
        Tools::new(),
        tokio_util::sync::CancellationToken::new(),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    kernel.start().await.expect("start the kernel's scheduler");
    (kernel, url)
}

/// Kernels started in an example run workers as `<exe> __worker`: an example whose
/// agents run calls this first, so it serves that mode too (and exits there).
pub async fn serve_worker_mode() {
    if std::env::args().nth(1).as_deref()
        == Some(agent_worker::kernel::runtime::workers::WORKER_MODE)
    {
        // On a thread of its own, which puts itself in the run's sandbox before
        // it makes any (threads and processes made from it inherit the sandbox;
        // in this already threaded process the user namespace is left out).
        let code = std::thread::spawn(|| {
            let config = agent_worker::worker::configure();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(agent_worker::worker::main(config))
        })
        .join()
        .unwrap_or(1);
        std::process::exit(code);
    }
}

pub async fn connect(url: &str, token: &str, modern: bool) -> Client {
    let t = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
    );
    let life = if modern {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        }
    } else {
        ClientLifecycleMode::Initialize
    };
    ().serve_with_lifecycle(t, life).await.expect("connect")
}

/// Calls a tool and returns its structured result; a tool error aborts with its text.
pub async fn call(c: &Client, tool: &str, args: Value) -> Value {
    let Value::Object(m) = args else {
        panic!("arguments must be an object")
    };
    let r = c
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(m))
        .await
        .expect(tool);
    if r.is_error == Some(true) {
        panic!("{tool} failed: {:?}", r.content);
    }
    r.structured_content.unwrap_or(Value::Null)
}

/// A lean MCP 2026-07-28 client for load generation: one keep-alive HTTP connection
/// pool, one POST per `tools/call` with the per-request protocol headers and `_meta`
/// the spec requires, JSON responses read to the end. It speaks the same protocol as
/// rmcp's client without its per-call machinery (and its one-connection-per-call).
pub struct RawClient {
    http: reqwest::Client,
    url: String,
    token: String,
    next_id: std::sync::atomic::AtomicU64,
}

impl RawClient {
    pub fn new(url: &str, token: &str) -> Self {
        let http = reqwest::Client::builder()
            .tcp_nodelay(true)
            .build()
            .expect("http client");
        Self {
            http,
            url: url.to_owned(),
            token: token.to_owned(),
            next_id: Default::default(),
        }
    }

    pub async fn call(&self, tool: &str, args: Value) -> Value {
        self.try_call(tool, args)
            .await
            .unwrap_or_else(|e| panic!("{tool} failed: {e}"))
    }

    /// A call that may fail (the server gone, a tool error): the structured result
    /// or why not.
    pub async fn try_call(&self, tool: &str, args: Value) -> Result<Value, String> {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "agent-worker-bench", "version": "1"}
            }}
        });
        let r = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .json(&body)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = r.status();
        let v: Value = r
            .json()
            .await
            .map_err(|e| format!("HTTP {status}, body is not JSON: {e}"))?;
        let result = &v["result"];
        if result.is_null() || result["isError"] == Value::Bool(true) {
            return Err(v.to_string());
        }
        Ok(result["structuredContent"].clone())
    }
}

/// Either client, so the benchmark can run the same load through both.
pub enum AnyClient {
    Rmcp(Client),
    Raw(RawClient),
}

impl AnyClient {
    pub async fn call(&self, tool: &str, args: Value) -> Value {
        match self {
            AnyClient::Rmcp(c) => call(c, tool, args).await,
            AnyClient::Raw(c) => c.call(tool, args).await,
        }
    }
}

/// An example's command-line flags: `--help` (or `-h`) prints `usage` and exits 0;
/// a flag without its value, a value that does not parse or an unknown flag says
/// what is wrong, then the usage, and exits 2 (no panic, no backtrace).
pub struct Flags {
    args: std::iter::Skip<std::env::Args>,
    usage: &'static str,
    flag: String,
}

impl Flags {
    pub fn new(usage: &'static str) -> Self {
        Self {
            args: std::env::args().skip(1),
            usage,
            flag: String::new(),
        }
    }

    /// The next flag, or None at the end; `--help` ends the program here.
    pub fn next(&mut self) -> Option<String> {
        self.flag = self.args.next()?;
        if matches!(self.flag.as_str(), "--help" | "-h") {
            println!("{}", self.usage);
            std::process::exit(0);
        }
        Some(self.flag.clone())
    }

    /// The current flag's value, as text.
    pub fn text(&mut self) -> String {
        match self.args.next() {
            Some(v) => v,
            None => self.fail(&format!("{} needs a value", self.flag)),
        }
    }

    /// The current flag's value, parsed.
    pub fn value<T: std::str::FromStr>(&mut self) -> T {
        let v = self.text();
        v.parse()
            .unwrap_or_else(|_| self.fail(&format!("{} {v:?}: not a valid value", self.flag)))
    }

    /// Says what is wrong and how the example is called, and exits 2.
    pub fn fail(&self, why: &str) -> ! {
        eprintln!("error: {why}\n\n{}", self.usage);
        std::process::exit(2);
    }

    /// An unknown flag.
    pub fn unknown(&self) -> ! {
        self.fail(&format!("unknown argument {:?}", self.flag))
    }
}
