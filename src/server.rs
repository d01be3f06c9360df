//! Process wiring: one kernel per data dir, logging, the stdio and HTTP listeners,
//! `kernel.json`, and shutdown.
//!
//! The first process to take the data dir's lock is the kernel. Without `--http` it
//! also listens on a loopback HTTP port, because workers (and `agent_join` clients)
//! reach the kernel over HTTP with their own tokens: the data dir's port, remembered
//! in `kernel.port` and taken again by every kernel started there, so the URL
//! agent_join handed out outlives idle exits and restarts (a new port only when
//! another program holds it, with a warning).

use crate::config::{self, Options};
use anyhow::{Context, anyhow};
use kernel::Kernel;
use mcp::{AgentWorker, Tools, http};
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::{EnvFilter, Layer, fmt, layer::SubscriberExt, util::SubscriberInitExt};

pub const LOCK_FILE: &str = "kernel.lock";
pub use crate::config::KERNEL_JSON;

/// Holds the data dir's exclusive lock for the life of the process.
pub struct DataDirLock {
    _lock: nix::fcntl::Flock<File>,
}

/// Takes the data dir's lock; `None` when another kernel holds it.
pub fn lock_data_dir(dir: &Path) -> anyhow::Result<Option<DataDirLock>> {
    let path = dir.join(LOCK_FILE);
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(DataDirLock { _lock: lock })),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, errno)) => Err(anyhow!("cannot lock {}: {errno}", path.display())),
    }
}

/// The running kernel's `kernel.json`: its URL and, when it wrote one, its local
/// lead credential.
pub struct RunningKernel {
    pub url: String,
    pub token: Option<String>,
    /// Where it keeps its state, as its logs show it.
    pub store: Option<String>,
    /// Its node name.
    pub node: Option<String>,
}

fn running_kernel(dir: &Path) -> anyhow::Result<RunningKernel> {
    let path = dir.join(KERNEL_JSON);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "another kernel holds {} but {} is missing or unreadable",
            dir.display(),
            path.display()
        )
    })?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let url = v["url"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("{} has no url", path.display()))?;
    Ok(RunningKernel {
        url,
        token: v["token"].as_str().map(str::to_owned),
        store: v["store"].as_str().map(str::to_owned),
        node: v["node"].as_str().map(str::to_owned),
    })
}

/// Lines queued for the log file's writer thread.
const LOG_QUEUE_LINES: usize = 4096;

fn init_logging(
    dir: &Path,
    level: &str,
) -> anyhow::Result<tracing_appender::non_blocking::WorkerGuard> {
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    // The queue of lines to the file is allocated whole up front: the default 128,000
    // lines were 4 MiB, a fifth of the idle kernel. A burst past 4,096 lines drops
    // lines rather than block the runtime.
    let (file, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .finish(tracing_appender::rolling::never(&logs, "agent-worker.log"));
    // rmcp logs request payloads at info/debug: keep it at warn so arguments never reach logs.
    let filter = || EnvFilter::new(format!("{level},rmcp=warn,hyper=warn,axum=warn"));
    tracing_subscriber::registry()
        .with(
            fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .with_filter(filter()),
        )
        .with(
            fmt::layer()
                .with_writer(file)
                .with_ansi(false)
                .with_filter(filter()),
        )
        .try_init()
        .ok();
    Ok(guard)
}

/// `kernel.json`: where the kernel is and its local lead credential, readable by
/// its owner only (mode 0600, written whole and renamed into place).
fn write_kernel_json(
    dir: &Path,
    url: &str,
    token: &str,
    store: &store::Location,
    node: &str,
) -> anyhow::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(KERNEL_JSON);
    // The store as shown in logs (no password), and the node: a launch that names
    // either checks it.
    let body = serde_json::json!({
        "pid": std::process::id(),
        "url": url,
        "token": token,
        "store": store.to_string(),
        "node": node,
    });
    let tmp = dir.join(format!("{KERNEL_JSON}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.write_all(&serde_json::to_vec_pretty(&body)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// The loopback listener of a kernel without `--http`: the port the data dir
/// remembers (`kernel.port`), else a free one, which is remembered from then on.
/// A remembered port another program holds is said in the log: the URLs handed
/// out for it no longer reach this kernel (the stdio configs still do).
async fn bind_data_dir_port(dir: &Path) -> anyhow::Result<tokio::net::TcpListener> {
    let path = dir.join(config::PORT_FILE);
    let remembered = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<u16>().ok())
        .filter(|p| *p != 0);
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    let listener = match remembered {
        Some(port) => {
            match tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await {
                Ok(l) => return Ok(l),
                Err(e) => {
                    let l = tokio::net::TcpListener::bind(any)
                        .await
                        .with_context(|| format!("cannot listen on {any}"))?;
                    let now = l.local_addr()?.port();
                    tracing::warn!(
                        "the data dir's port {port} (remembered in {}) is not free ({e}): this kernel serves \
                     on port {now} instead, remembered from now on; URLs agent_join handed out for port \
                     {port} do not reach it (its stdio configs do), so join again for a new URL",
                        path.display()
                    );
                    l
                }
            }
        }
        None => tokio::net::TcpListener::bind(any)
            .await
            .with_context(|| format!("cannot listen on {any}"))?,
    };
    let port = listener.local_addr()?.port();
    // Written whole and renamed: a kernel starting later never reads half a number.
    let tmp = dir.join(format!("{}.tmp", config::PORT_FILE));
    std::fs::write(&tmp, format!("{port}\n"))
        .and_then(|()| std::fs::rename(&tmp, &path))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(listener)
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
}

/// A second stdio client on a data dir whose kernel runs: relayed to it.
async fn relay_to_running(opts: &Options, dir: PathBuf) -> anyhow::Result<()> {
    // A second stdio client on the same data dir: relay to the running kernel
    // with its local credential. Nothing is written here (an admin.token created
    // now would not be the running kernel's). Whatever goes wrong is the answer
    // to the client's first request, so it never waits for a reply that won't come.
    let target = running_kernel(&dir).and_then(|k| {
        config::check_store(opts, &dir, k.store.as_deref()).map_err(|e| anyhow!(e))?;
        config::check_node(opts, &dir, k.node.as_deref()).map_err(|e| anyhow!(e))?;
        let token = k
            .token
            .or_else(|| config::existing_admin_token(opts, &dir))
            .ok_or_else(|| {
                anyhow!(
                    "the kernel running on {} did not leave its credential in {}: stop it and start \
                     it again with this version, or give this launch its --token",
                    dir.display(),
                    KERNEL_JSON
                )
            })?;
        Ok((k.url, token))
    });
    tracing::info!("data dir in use: bridging stdio to the running kernel");
    crate::bridge::run(target.map_err(|e| format!("{e:#}")), None, dir).await
}

/// Serves until the stdio session ends, a signal arrives, or (a background
/// kernel) it has been idle long enough.
async fn serve_until_done(
    opts: &Options,
    kernel: &Arc<Kernel>,
    tools: Arc<Tools>,
    stdio: bool,
) -> anyhow::Result<()> {
    if stdio {
        let service = mcp::stdio::serve(AgentWorker::new(kernel.clone(), tools))
            .await
            .context("stdio MCP session failed to start")?;
        tokio::select! {
            r = service.waiting() => { if let Err(e) = r { tracing::warn!("stdio session ended: {e}"); } }
            _ = shutdown_signal() => {}
        }
    } else if opts.background_kernel {
        let idle = async {
            match opts.idle_exit {
                Some(d) => crate::background::idle_exit(kernel.clone(), d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown_signal() => {}
            _ = idle => {}
        }
    } else {
        shutdown_signal().await;
    }
    Ok(())
}

/// Traces, when an endpoint is set (nothing runs otherwise); made off the async
/// threads (its HTTP client is a blocking one), flushed when the guard drops. An
/// endpoint given by flag that cannot be used stops the start.
async fn init_traces(opts: &Options) -> anyhow::Result<Option<telemetry::Guard>> {
    let flag = opts.otlp_endpoint.clone();
    let Some(url) = telemetry::configured(flag.as_deref()) else {
        return Ok(None);
    };
    let made = tokio::task::spawn_blocking(move || {
        telemetry::init("agent-worker", &url, std::time::Duration::from_secs(3))
    })
    .await
    .map_err(|e| anyhow!("{e}"))?;
    match (made, flag) {
        (Ok(g), _) => Ok(Some(g)),
        (Err(e), Some(_)) => Err(anyhow!("--otlp-endpoint: {e}")),
        (Err(e), None) => {
            tracing::warn!("traces are off: {e}");
            Ok(None)
        }
    }
}

/// Runs the server until stdin closes (stdio) or a signal arrives (HTTP).
pub async fn run(opts: Options) -> anyhow::Result<()> {
    let dir = config::data_dir(&opts).map_err(|e| anyhow!(e))?;
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create data dir {}", dir.display()))?;
    let _log_guard = init_logging(&dir, opts.log.as_deref().unwrap_or("info"))?;
    let stdio = opts.http.is_none() && !opts.background_kernel;
    if stdio && !opts.foreground {
        // The team outlives this client: relay to the data dir's kernel, started
        // in the background if none runs (see `background`).
        let mut launcher = crate::background::Launcher::new(&opts, &dir);
        match config::agent_token(&opts) {
            Ok(Some(t)) => launcher = launcher.as_agent(t),
            Ok(None) => {}
            // Said to the client's first request, so it never waits in silence.
            Err(e) => return crate::bridge::run(Err(e), None, dir).await,
        }
        let l = launcher.clone();
        let target = tokio::task::spawn_blocking(move || l.ensure())
            .await
            .map_err(|e| anyhow!("{e}"))?;
        return crate::bridge::run(target, Some(launcher), dir).await;
    }
    let Some(_lock) = lock_data_dir(&dir)? else {
        if !stdio {
            let at = running_kernel(&dir).map_or_else(|e| format!("({e})"), |k| k.url);
            return Err(anyhow!(
                "data dir {} is in use by another agent-worker kernel at {at}: connect to it with the admin \
                 token, or pass another --data-dir",
                dir.display()
            ));
        }
        return relay_to_running(&opts, dir).await;
    };
    let _traces = init_traces(&opts).await?;
    let admin = config::admin_token(&opts, &dir).map_err(|e| anyhow!(e))?;
    let store = config::store(&opts, &dir).map_err(|e| anyhow!(e))?;
    let node = config::node(&opts).map_err(|e| anyhow!(e))?;
    let setup = kernel::Setup::production().with_labels(config::labels(&opts)?);
    let kernel = Kernel::open_timed(&dir, admin, &store, &node, setup).await?;
    let tools = Tools::new();
    let ct = CancellationToken::new();

    let listener = match opts.http {
        Some(addr) => tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?,
        None => bind_data_dir_port(&dir).await?,
    };
    let url = format!("http://{}{}", listener.local_addr()?, http::MCP_PATH);
    kernel.set_url(url.clone());
    // Workers need the URL, so what the store says is owed (schedules, pending
    // deliveries, workflow runs in progress) is served only from here.
    kernel.start().await.context("cannot start the scheduler")?;
    let kernel_json =
        write_kernel_json(&dir, &url, kernel.registry().local_token(), &store, &node)?;
    eprintln!(
        "agent-worker {} serving MCP at {url} (data dir {})",
        env!("CARGO_PKG_VERSION"),
        dir.display()
    );
    tracing::info!(%url, data_dir = %dir.display(), %store, node, stdio, "kernel started");
    // The start's temporaries (migrations, recovery, tool schemas) were freed on this
    // thread, which from here on only waits: give their pages back now.
    os::memory::collect_thread();
    // And the code that ran only to start (5 to 10 MiB of the binary's pages, else
    // mapped for good): what the idle kernel runs comes back from the page cache.
    os::memory::release_start_code();

    let app = http::app(kernel.clone(), tools.clone(), ct.child_token());
    let http_ct = ct.clone();
    let http_task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { http_ct.cancelled().await })
            .await
    });

    serve_until_done(&opts, &kernel, tools, stdio).await?;
    // No worker outlives its kernel: stop them (and their process groups) first.
    kernel.stop_all_runs().await;
    // Then out of the store's nodes, so that other nodes take its agents now.
    if let Err(e) = kernel.runtime().nodes().leave().await {
        tracing::warn!("could not leave the store's nodes: {e}");
    }
    ct.cancel();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), http_task).await;
    let _ = std::fs::remove_file(kernel_json);
    tracing::info!("kernel stopped");
    Ok(())
}
