//! A TCP proxy a test controls, to cut a kernel off from its database while its
//! process lives: `cut` stops every byte both ways (open connections stall, new
//! ones are accepted and go nowhere, as behind a dropped route), `heal` drops the
//! connections that stalled and lets new ones through.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

#[derive(Default)]
struct Shared {
    cut: AtomicBool,
    conns: Mutex<Vec<AbortHandle>>,
}

pub struct Proxy {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    accept: AbortHandle,
}

impl Proxy {
    /// Listens on a loopback port and forwards each connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let conn = tokio::spawn(forward(client, upstream, s.clone()));
                s.conns.lock().unwrap().push(conn.abort_handle());
            }
        })
        .abort_handle();
        Self {
            addr,
            shared,
            accept,
        }
    }

    /// `url` (a postgres:// URL) through this proxy.
    pub fn url(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").unwrap();
        let (auth, path) = rest.split_once('/').unwrap();
        let user = auth.rsplit_once('@').map(|(u, _)| format!("{u}@"));
        format!(
            "{scheme}://{}{}/{path}",
            user.unwrap_or_default(),
            self.addr
        )
    }

    pub fn cut(&self) {
        self.shared.cut.store(true, Ordering::SeqCst);
    }

    pub fn heal(&self) {
        for c in self.shared.conns.lock().unwrap().drain(..) {
            c.abort();
        }
        self.shared.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        for c in self.shared.conns.lock().unwrap().drain(..) {
            c.abort();
        }
    }
}

async fn forward(client: TcpStream, upstream: SocketAddr, s: Arc<Shared>) {
    while s.cut.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    tokio::join!(pump(cr, sw, &s), pump(sr, cw, &s));
}

/// Copies `from` to `to`, holding every chunk while the proxy is cut.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    s: &Shared,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        while s.cut.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
