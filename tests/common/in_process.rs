//! A kernel in the test's own process, for the many tests that need no server
//! process of their own: the lead talks to it over an in-memory duplex through the
//! stdio transport (with its checks), agents over HTTP on an ephemeral loopback port
//! of this process (their identity is their bearer token, as in production), and the
//! test may read the kernel directly or drive its clock. Workers are still real
//! processes (the binary's worker mode).
//!
//! Tests that stop, kill or restart the server, or read its stderr, use
//! [`super::HttpServer`] instead.

use super::{Client, Proto, Served, lifecycle, store};
use agent_worker::kernel::timing::{Clock, Timing};
use agent_worker::kernel::{Kernel, Setup};
use agent_worker::mcp::{AgentWorker, Tools, http};
use rmcp::service::ClientServiceExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const ADMIN: &str = "awadmin_in_process_test_token_0123456789";

pub struct InProcess {
    pub kernel: Arc<Kernel>,
    pub url: String,
    pub data_dir: PathBuf,
    pub admin: String,
    tools: Arc<Tools>,
    /// Stops the HTTP listener when the test drops the harness.
    stop: CancellationToken,
}

impl InProcess {
    /// A kernel on the suite's store with production's clock and delays.
    pub async fn start(data_dir: &Path) -> Self {
        Self::start_on(data_dir, Clock::system(), Timing::default()).await
    }

    /// A kernel on the given clock (e.g. [`Clock::manual`]) and delays.
    pub async fn start_on(data_dir: &Path, clock: Clock, timing: Timing) -> Self {
        let location = match store::env_for(data_dir) {
            Some((_, url)) => {
                agent_worker::store::Location::parse(&url, data_dir).expect("the test store")
            }
            None => agent_worker::store::Location::in_data_dir(data_dir),
        };
        let setup = Setup {
            clock,
            timing,
            worker_exe: PathBuf::from(super::BIN),
            labels: Vec::new(),
        };
        let kernel = Kernel::open_timed(data_dir, ADMIN.into(), &location, "local", setup)
            .await
            .expect("open the kernel in process");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}{}",
            listener.local_addr().unwrap(),
            http::MCP_PATH
        );
        kernel.set_url(url.clone());
        kernel.start().await.expect("start the kernel's scheduler");
        let (tools, stop) = (Tools::new(), CancellationToken::new());
        let app = http::app(kernel.clone(), tools.clone(), stop.child_token());
        let until = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(until.cancelled_owned())
                .await
                .ok();
        });
        Self {
            kernel,
            url,
            data_dir: data_dir.to_owned(),
            admin: ADMIN.into(),
            tools,
            stop,
        }
    }
}

impl InProcess {
    /// Stops as the server does on SIGTERM: no worker outlives the kernel, then
    /// the node leaves the store, then the listener closes.
    pub async fn stop(self) {
        self.kernel.stop_all_runs().await;
        self.kernel
            .runtime()
            .nodes()
            .leave()
            .await
            .expect("leave the store's nodes");
        self.stop.cancel();
    }
}

impl Served for InProcess {
    fn url(&self) -> &str {
        &self.url
    }

    fn admin(&self) -> &str {
        &self.admin
    }

    /// The lead over an in-memory duplex, served as stdio is: the lead by transport.
    async fn lead(&self, p: Proto) -> Client {
        let (ours, theirs) = tokio::io::duplex(256 * 1024);
        let (read, write) = tokio::io::split(theirs);
        let handler = AgentWorker::new(self.kernel.clone(), self.tools.clone());
        tokio::spawn(async move {
            if let Ok(service) = agent_worker::mcp::stdio::serve_on(handler, read, write).await {
                let _ = service.waiting().await;
            }
        });
        ().serve_with_lifecycle(ours, lifecycle(p))
            .await
            .expect("connect over the in-memory duplex")
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
