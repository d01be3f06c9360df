//! A blocking PostgreSQL client whose every wait is bounded.
//!
//! Why not the `postgres` crate's client: it waits without limit. Its connect
//! timeout covers only the TCP connect, so a server that accepts the connection
//! and then says nothing (a frozen server, a proxy whose backend is gone, some
//! other service on the port) held the kernel's start forever, and a database that
//! went silent later held every store thread forever. This client does what that
//! one does (a current-thread runtime per connection, driven on the calling store
//! thread, never on the async runtime's), with a deadline on each call: the
//! connect and startup within the store's timeout, each statement within
//! [`statement_bound`]. A call past its deadline fails with [`Fail::Silent`] and
//! leaves the connection closed, so the store's threads open a new one (itself
//! bounded) on their next job.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The connection's stream: TLS when the URL asks for it, else plain.
type Stream = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{AsyncMessage, Notification, Row, Socket, Statement};

/// What a bounded call failed with.
#[derive(Debug)]
pub enum Fail {
    /// PostgreSQL's own error (or the client's: the connection closed).
    Pg(tokio_postgres::Error),
    /// Nothing came back within this long; the connection is closed.
    Silent(Duration),
    /// The client could not even start (its runtime: out of file descriptors).
    Io(std::io::Error),
    /// A statement sent earlier without waiting for its answer ([`Client::defer`])
    /// failed: the statement (for the error) and how.
    Earlier(String, Box<Fail>),
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Pg(e) => write!(f, "{e}"),
            Self::Io(e) => write!(f, "cannot start a PostgreSQL client: {e}"),
            Self::Silent(d) => write!(
                f,
                "the server did not answer within {} s (the connection was closed)",
                domain::clock::secs(*d)
            ),
            Self::Earlier(_, e) => write!(f, "{e}"),
        }
    }
}

impl From<tokio_postgres::Error> for Fail {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Pg(e)
    }
}

pub type Result<T> = std::result::Result<T, Fail>;

/// How long a statement may go unanswered: a minute, or the store's timeout if
/// that is longer. Generous on purpose (a write waits for the database's write
/// lock, which another kernel's transaction may hold); the point is that nothing
/// waits forever.
pub fn statement_bound(connect: Duration) -> Duration {
    connect.max(Duration::from_secs(60))
}

/// A statement's answer, read later.
type Deferred0 =
    Pin<Box<dyn Future<Output = std::result::Result<u64, tokio_postgres::Error>> + Send>>;
/// A statement sent whose answer is read later, with its text for errors.
type Deferred = (Deferred0, String);

/// Where the rows of a query sent with [`Client::query_later`] arrive.
pub type Slot = Arc<std::sync::Mutex<Option<Vec<Row>>>>;

pub struct Client {
    /// Declared before `link`, so it is dropped first: the connection, seeing its
    /// client gone, says goodbye to the server as `link` drops. Shared with the
    /// deferred statements' futures, which outlive the call that made them.
    client: Arc<tokio_postgres::Client>,
    /// Statements sent, in order, whose answers the next call reads (see
    /// [`Client::defer`]).
    deferred: Vec<Deferred>,
    link: Link,
    /// The deadline of each statement.
    bound: Duration,
}

/// The connection and the runtime that drives it.
struct Link {
    rt: tokio::runtime::Runtime,
    /// None once the connection ended, failed, or a call ran past its deadline.
    connection: Option<tokio_postgres::Connection<Socket, Stream>>,
    /// Notifications (LISTEN) the connection brought while a call was driven.
    notifications: VecDeque<Notification>,
}

impl Link {
    /// [`drive`] of this link.
    fn drive<T>(
        &mut self,
        bound: Duration,
        fut: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    ) -> Result<T> {
        drive(
            &self.rt,
            &mut self.connection,
            &mut self.notifications,
            bound,
            fut,
        )
    }
}

impl Drop for Link {
    /// Closes the connection politely (a Terminate message, as the `postgres`
    /// crate does), but never waits more than a second for it.
    fn drop(&mut self) {
        let Some(mut connection) = self.connection.take() else {
            return;
        };
        self.rt.block_on(async {
            let done = std::future::poll_fn(|cx| {
                loop {
                    match connection.poll_message(cx) {
                        Poll::Ready(Some(Ok(_))) => {}
                        Poll::Ready(_) => return Poll::Ready(()),
                        Poll::Pending => return Poll::Pending,
                    }
                }
            });
            let _ = tokio::time::timeout(Duration::from_secs(1), done).await;
        });
    }
}

impl Client {
    /// Connects with `config` (TCP, TLS if `tls` is asked, startup and
    /// authentication) within `connect`; statements are then bounded by `bound`.
    pub fn connect(
        config: &tokio_postgres::Config,
        tls: &super::tls::Tls,
        connect: Duration,
        bound: Duration,
    ) -> Result<Self> {
        let connector =
            super::tls::connector(tls).map_err(|e| Fail::Io(std::io::Error::other(e)))?;
        // TLS exactly when asked: a server that offers it is never trusted unchecked.
        let mut config = config.clone();
        config.ssl_mode(match tls.mode {
            super::tls::Mode::Off => tokio_postgres::config::SslMode::Disable,
            _ => tokio_postgres::config::SslMode::Require,
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Fail::Io)?;
        let (client, connection) = rt
            .block_on(async { tokio::time::timeout(connect, config.connect(connector)).await })
            .map_err(|_| Fail::Silent(connect))??;
        Ok(Self {
            client: Arc::new(client),
            deferred: Vec::new(),
            link: Link {
                rt,
                connection: Some(connection),
                notifications: VecDeque::new(),
            },
            bound,
        })
    }

    /// Whether the connection is gone (closed by the server, broken, or given up
    /// on after a silent call).
    pub fn is_closed(&self) -> bool {
        self.link.connection.is_none() || self.client.is_closed()
    }

    /// Sets the deadline of each statement from now on.
    pub fn set_bound(&mut self, bound: Duration) {
        self.bound = bound;
    }

    /// Runs a simple query (several statements, no parameters).
    pub fn batch_execute(&mut self, sql: &str) -> Result<()> {
        let c = self.client.clone();
        self.settle(async move { c.batch_execute(sql).await })
    }

    /// Whether the server answers within `within` (an empty query).
    pub fn ping(&mut self, within: Duration) -> Result<()> {
        let fut = self.client.batch_execute("");
        self.link.drive(within, fut)
    }

    pub fn prepare_typed(&mut self, sql: &str, types: &[Type]) -> Result<Statement> {
        let c = self.client.clone();
        self.settle(async move { c.prepare_typed(sql, types).await })
    }

    pub fn execute(&mut self, st: &Statement, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        let c = self.client.clone();
        self.settle(async move { c.execute(st, params).await })
    }

    /// [`Client::execute`] of a statement given as text.
    pub fn execute_sql(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        let c = self.client.clone();
        self.settle(async move { c.execute(sql, params).await })
    }

    pub fn query(&mut self, st: &Statement, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>> {
        let c = self.client.clone();
        self.settle(async move { c.query(st, params).await })
    }

    /// Sends `st` with `params` now and reads its answer with the next call's (its
    /// count is never seen): a job's writes whose answers nothing waits for share
    /// one round trip with the next statement that needs an answer. Their order is
    /// kept (each is queued on the connection as it is made); the first failure
    /// among them is the next call's error ([`Fail::Earlier`], naming `sql`).
    pub fn defer<P>(&mut self, st: Statement, params: Vec<P>, sql: String)
    where
        P: ToSql + Sync + Send + 'static,
    {
        let c = self.client.clone();
        self.queue(
            Box::pin(async move { c.execute_raw(&st, params.iter()).await }),
            sql,
        );
    }

    /// Sends the query `st` with `params` now, like [`Client::defer`], and keeps its
    /// rows in the slot returned when its answer is read (with the next call's, or
    /// by [`Client::rows_of`]): two reads that do not depend on each other share a
    /// round trip. Its failure is reported as a deferred statement's.
    pub fn query_later<P>(&mut self, st: Statement, params: Vec<P>, sql: String) -> Slot
    where
        P: ToSql + Sync + Send + 'static,
    {
        use futures::TryStreamExt;
        let c = self.client.clone();
        let slot = Slot::default();
        let into = slot.clone();
        self.queue(
            Box::pin(async move {
                let rows: Vec<Row> = c.query_raw(&st, params.iter()).await?.try_collect().await?;
                *into.lock().unwrap_or_else(|e| e.into_inner()) = Some(rows);
                Ok(0)
            }),
            sql,
        );
        slot
    }

    /// The rows of a query sent by [`Client::query_later`], reading the answers of
    /// every statement sent before them first if no call has yet. Fails as that
    /// reading does, or if the rows were taken already or never came (a call
    /// failed on an earlier statement, and the job is being rolled back).
    pub fn rows_of(&mut self, slot: &Slot) -> Result<Vec<Row>> {
        let take = |slot: &Slot| slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(rows) = take(slot) {
            return Ok(rows);
        }
        if !self.deferred.is_empty() {
            self.settle(async { Ok(()) })?;
        }
        take(slot).ok_or_else(|| {
            Fail::Io(std::io::Error::other(
                "the rows of a query sent earlier were read already, or lost with an earlier failure",
            ))
        })
    }

    /// Whether statements were sent whose answers were not read yet.
    pub fn has_deferred(&self) -> bool {
        !self.deferred.is_empty()
    }

    /// Reads the answers of the deferred statements now: the first failure among them.
    pub fn settle_deferred(&mut self) -> Result<()> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        self.settle(async { Ok(()) })
    }

    /// Forgets the answers of the deferred statements (their job is rolled back):
    /// the server still runs them, in order, before anything sent later, and the
    /// connection drops answers nobody waits for.
    pub fn discard_deferred(&mut self) {
        self.deferred.clear();
    }

    /// [`Client::defer`] of a simple query (a savepoint).
    pub fn defer_batch(&mut self, sql: &'static str) {
        let c = self.client.clone();
        self.queue(
            Box::pin(async move { c.batch_execute(sql).await.map(|()| 0) }),
            sql.to_owned(),
        );
    }

    /// Polls `fut` once, which queues its request on the connection (tokio-postgres
    /// sends before it first waits), and keeps it for the next call to finish.
    fn queue(&mut self, mut fut: Deferred0, sql: String) {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            fut = Box::pin(std::future::ready(out));
        }
        self.deferred.push((fut, sql));
    }

    /// Runs `fut` together with the answers of the statements deferred before it
    /// (already sent, so all of them are one round trip); a deferred failure wins.
    fn settle<T>(
        &mut self,
        fut: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    ) -> Result<T> {
        if self.deferred.is_empty() {
            return self.link.drive(self.bound, fut);
        }
        let pending = std::mem::take(&mut self.deferred);
        let earlier = async move {
            let mut failed = None;
            for (f, sql) in pending {
                if let Err(e) = f.await {
                    failed.get_or_insert((e, sql));
                }
            }
            failed
        };
        // `fut` first: its request goes out behind the deferred ones before anything waits.
        let both = async move { Ok(futures::join!(fut, earlier)) };
        match self.link.drive(self.bound, both)? {
            (_, Some((e, sql))) => Err(Fail::Earlier(sql, Box::new(Fail::Pg(e)))),
            (out, None) => Ok(out?),
        }
    }

    /// The next notification (LISTEN), waiting for one at most `wait`: None if none
    /// came. Fails if the connection does.
    pub fn notification(&mut self, wait: Duration) -> Result<Option<Notification>> {
        if let Some(n) = self.link.notifications.pop_front() {
            return Ok(Some(n));
        }
        let quiet = async {
            tokio::time::sleep(wait).await;
            Ok(())
        };
        // A quiet wait is not a silent server: the deadline is past the sleep.
        let bound = wait + Duration::from_secs(1);
        let link = &mut self.link;
        drive_until(
            &link.rt,
            &mut link.connection,
            &mut link.notifications,
            bound,
            quiet,
            true,
        )?;
        Ok(link.notifications.pop_front())
    }
}

/// Polls `fut` while driving `connection` (which keeps notifications), within
/// `bound`. A connection that ended or a call past its deadline leaves
/// `connection` None.
fn drive<T>(
    rt: &tokio::runtime::Runtime,
    connection: &mut Option<tokio_postgres::Connection<Socket, Stream>>,
    notifications: &mut VecDeque<Notification>,
    bound: Duration,
    fut: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
) -> Result<T> {
    drive_until(rt, connection, notifications, bound, fut, false)
        .map(|done| done.expect("only a wait for notifications ends before its call"))
}

/// Drives the connection as far as it goes now, keeping its notifications: None
/// while it lives, Some when it ended (with its error, if it had one).
fn pump(
    conn: &mut tokio_postgres::Connection<Socket, Stream>,
    cx: &mut std::task::Context<'_>,
    notifications: &mut VecDeque<Notification>,
) -> Option<Option<tokio_postgres::Error>> {
    loop {
        match conn.poll_message(cx) {
            Poll::Ready(Some(Ok(AsyncMessage::Notification(n)))) => notifications.push_back(n),
            Poll::Ready(Some(Ok(AsyncMessage::Notice(n)))) => {
                tracing::debug!("PostgreSQL notice: {}", n.message())
            }
            Poll::Ready(Some(Ok(_))) => {}
            Poll::Ready(Some(Err(e))) => return Some(Some(e)),
            Poll::Ready(None) => return Some(None),
            Poll::Pending => return None,
        }
    }
}

/// [`drive`]; with `on_notification`, also done as soon as a notification came.
fn drive_until<T>(
    rt: &tokio::runtime::Runtime,
    connection: &mut Option<tokio_postgres::Connection<Socket, Stream>>,
    notifications: &mut VecDeque<Notification>,
    bound: Duration,
    fut: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    on_notification: bool,
) -> Result<Option<T>> {
    enum Step<T> {
        Done(std::result::Result<T, tokio_postgres::Error>),
        Notified,
        Ended(Option<tokio_postgres::Error>),
        Silent,
    }
    let mut fut = pin!(fut);
    let step = match connection.as_mut() {
        None => Step::Ended(None),
        Some(conn) => rt.block_on(async {
            let mut deadline = pin!(tokio::time::sleep(bound));
            std::future::poll_fn(|cx| {
                let ended = pump(conn, cx, notifications);
                if let Poll::Ready(out) = fut.as_mut().poll(cx) {
                    return Poll::Ready(Step::Done(out));
                }
                if let Some(e) = ended {
                    return Poll::Ready(Step::Ended(e));
                }
                if on_notification && !notifications.is_empty() {
                    return Poll::Ready(Step::Notified);
                }
                if deadline.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Step::Silent);
                }
                Poll::Pending
            })
            .await
        }),
    };
    match step {
        Step::Done(out) => Ok(Some(out?)),
        Step::Notified => Ok(None),
        Step::Silent => {
            *connection = None;
            Err(Fail::Silent(bound))
        }
        Step::Ended(Some(e)) => {
            *connection = None;
            Err(Fail::Pg(e))
        }
        Step::Ended(None) => {
            // Gone without an error of its own: with the connection dropped the call
            // fails with the client's words for it (closed), at once.
            *connection = None;
            let closed = rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(1), fut.as_mut()).await
            });
            match closed {
                Ok(out) => Ok(Some(out?)),
                Err(_) => Err(Fail::Silent(bound)),
            }
        }
    }
}
