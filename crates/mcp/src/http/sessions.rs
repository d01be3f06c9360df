//! HTTP sessions (MCP 2025-11-25): who owns each one, when it was last used, and
//! what it costs while idle.
//!
//! - **Owner**: a session belongs to the bearer token that opened it. A request that
//!   names another token's session is answered as if the session did not exist, so
//!   an agent cannot close, read the stream of, or even probe the lead's session.
//! - **Idle cost**: rmcp keeps a worker task with its channels per live session,
//!   about 100 KB. A session with no request in flight and no open stream for
//!   [`PARK_AFTER`] is parked: its rmcp worker is closed and only what it takes to
//!   bring it back (the client's `initialize` parameters, about a kilobyte) stays
//!   here. Its next request restores it transparently (rmcp's session store hook),
//!   so the client never notices.
//! - **Expiry**: a session unused for the TTL ([`DEFAULT_TTL`], or
//!   `AGENT_WORKER_SESSION_TTL`) is forgotten; its client gets 404 and, as the
//!   protocol says, starts a new session.
//! - **Caps**: at most [`PER_OWNER`] sessions per token and [`TOTAL`] in all; opening
//!   one more forgets the least recently used (one client that never closes its
//!   sessions cannot grow the server).

use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::{
    local::LocalSessionManager,
    store::{SessionState, SessionStore, SessionStoreError},
};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A session unused this long is forgotten (its client must initialize again).
pub const DEFAULT_TTL: Duration = Duration::from_secs(60 * 60);
/// A session idle this long (no request in flight, no open stream) is parked (or
/// after half the TTL, if that is shorter).
pub const PARK_AFTER: Duration = Duration::from_secs(120);
/// Sessions one token may hold.
pub const PER_OWNER: usize = 64;
/// Sessions in all.
pub const TOTAL: usize = 4096;
/// How often idle sessions are parked and expired ones forgotten (at most: half the
/// park time if that is shorter).
const SWEEP_EVERY: Duration = Duration::from_secs(15);

/// Who opened a session: a hash of the bearer token (the token itself is never kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner([u8; 32]);

impl Owner {
    pub fn of_token(token: &str) -> Self {
        Self(Sha256::digest(token.as_bytes()).into())
    }
}

struct Entry {
    /// `None` between rmcp's handshake and our sight of its response.
    owner: Option<Owner>,
    /// The protocol version the client asked for at `initialize`.
    version: String,
    state: Option<SessionState>,
    last_used: Instant,
    /// Responses still streaming (requests in flight, open GET streams).
    active: usize,
    opened: Instant,
}

/// Why a request naming a session is refused: it gets 404 either way.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    Unknown,
    NotYours,
}

/// What tells the time: the monotonic clock, or a test's manual one.
type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

pub struct Sessions {
    entries: Mutex<HashMap<String, Entry>>,
    manager: Arc<LocalSessionManager>,
    ttl: Duration,
    park: Duration,
    now: Clock,
}

impl Sessions {
    pub fn new(manager: Arc<LocalSessionManager>) -> Arc<Self> {
        let ttl = std::env::var("AGENT_WORKER_SESSION_TTL")
            .ok()
            .and_then(|v| humantime::parse_duration(&v).ok())
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_TTL);
        Self::with_clock(manager, ttl, Arc::new(Instant::now))
    }

    fn with_clock(manager: Arc<LocalSessionManager>, ttl: Duration, now: Clock) -> Arc<Self> {
        Arc::new(Self {
            entries: Mutex::default(),
            manager,
            ttl,
            park: PARK_AFTER.min(ttl / 2),
            now,
        })
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A request from `owner` names session `id`: allowed only if it is its own.
    /// Returns the protocol version the session speaks, and counts the request as
    /// active until its guard is dropped.
    pub fn enter(self: &Arc<Self>, id: &str, owner: Owner) -> Result<(String, Active), Refused> {
        let mut entries = self.entries.lock().unwrap();
        let e = entries.get_mut(id).ok_or(Refused::Unknown)?;
        if e.owner != Some(owner) {
            return Err(Refused::NotYours);
        }
        e.active += 1;
        e.last_used = (self.now)();
        Ok((
            e.version.clone(),
            Active {
                sessions: self.clone(),
                id: id.to_owned(),
            },
        ))
    }

    /// A session rmcp just opened for `owner`: claims it and applies the caps.
    /// Returns the sessions evicted to make room (to be closed).
    pub fn opened(&self, id: &str, owner: Owner, version: &str) -> Vec<String> {
        let now = (self.now)();
        let mut entries = self.entries.lock().unwrap();
        let e = entries.entry(id.to_owned()).or_insert_with(|| Entry {
            owner: None,
            version: String::new(),
            state: None,
            last_used: now,
            active: 0,
            opened: now,
        });
        e.owner = Some(owner);
        e.version = version.to_owned();
        e.last_used = now;
        let mine = entries.values().filter(|e| e.owner == Some(owner)).count();
        let mut evicted = lru(&entries, mine.saturating_sub(PER_OWNER), id, |e| {
            e.owner == Some(owner)
        });
        for k in &evicted {
            entries.remove(k);
        }
        let over = entries.len().saturating_sub(TOTAL);
        for k in lru(&entries, over, id, |_| true) {
            entries.remove(&k);
            evicted.push(k);
        }
        evicted
    }

    pub fn forget(&self, id: &str) {
        self.entries.lock().unwrap().remove(id);
    }

    /// Closes rmcp's live sessions for these ids (evicted or expired).
    pub async fn close(&self, ids: Vec<String>) {
        for id in ids {
            let _ = self.manager.close_session(&Arc::from(id.as_str())).await;
        }
    }

    /// What a sweep at `now` does: forgets (and returns) the sessions idle past the
    /// TTL or never claimed past the park time, and returns those idle past the park
    /// time (to be parked). A session with a response streaming is neither.
    fn due(&self, now: Instant) -> (Vec<String>, Vec<String>) {
        let mut entries = self.entries.lock().unwrap();
        let mut expired = Vec::new();
        entries.retain(|id, e| {
            let gone = e.active == 0
                && (now.duration_since(e.last_used) > self.ttl
                    // Never claimed: a handshake whose answer never arrived.
                    || (e.owner.is_none() && now.duration_since(e.opened) > self.park));
            if gone {
                expired.push(id.clone());
            }
            !gone
        });
        let park: Vec<String> = entries
            .iter()
            .filter(|(_, e)| e.active == 0 && now.duration_since(e.last_used) > self.park)
            .map(|(id, _)| id.clone())
            .collect();
        (park, expired)
    }

    /// Parks idle sessions and forgets expired ones.
    async fn sweep(&self) {
        let (park, expired) = self.due((self.now)());
        let live = self.manager.sessions.read().await;
        let park: Vec<String> = park
            .into_iter()
            .chain(expired)
            .filter(|id| live.contains_key(id.as_str()))
            .collect();
        drop(live);
        // A request may have come in since `due` chose them: close only those still
        // idle, each checked right before it goes.
        for id in park {
            if self.still_idle(&id) {
                self.close(vec![id]).await;
            }
        }
    }

    /// Whether session `id` has no request or stream in progress (or is forgotten).
    fn still_idle(&self, id: &str) -> bool {
        self.entries
            .lock()
            .unwrap()
            .get(id)
            .is_none_or(|e| e.active == 0)
    }

    /// Runs the sweep until `ct` is cancelled.
    pub fn spawn_sweeper(self: &Arc<Self>, ct: tokio_util::sync::CancellationToken) {
        let me = Arc::downgrade(self);
        let every = SWEEP_EVERY.min(self.park / 2);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = ct.cancelled() => return,
                }
                let Some(s) = me.upgrade() else { return };
                s.sweep().await;
            }
        });
    }

    /// How many sessions are known, and how many of them are live in rmcp.
    pub async fn counts(&self) -> (usize, usize) {
        let known = self.entries.lock().unwrap().len();
        (known, self.manager.sessions.read().await.len())
    }
}

/// The `n` least recently used entries that match, never `keep`.
fn lru(
    entries: &HashMap<String, Entry>,
    n: usize,
    keep: &str,
    which: impl Fn(&Entry) -> bool,
) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    let mut v: Vec<(&String, &Entry)> = entries
        .iter()
        .filter(|(k, e)| k.as_str() != keep && which(e))
        .collect();
    // Busy sessions go last: evict idle ones first.
    v.sort_by_key(|(_, e)| (e.active > 0, e.last_used));
    v.into_iter().take(n).map(|(k, _)| k.clone()).collect()
}

/// A request or stream in progress on a session; the session is not idle meanwhile.
pub struct Active {
    sessions: Arc<Sessions>,
    id: String,
}

impl Drop for Active {
    fn drop(&mut self) {
        let now = (self.sessions.now)();
        if let Some(e) = self.sessions.entries.lock().unwrap().get_mut(&self.id) {
            e.active = e.active.saturating_sub(1);
            e.last_used = now;
        }
    }
}

/// rmcp's hook for bringing a parked session back: it stores the `initialize`
/// parameters after the handshake and loads them when a request names a session
/// it does not hold.
pub struct Store(pub Arc<Sessions>);

#[async_trait::async_trait]
impl SessionStore for Store {
    async fn load(&self, id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        Ok(self
            .0
            .entries
            .lock()
            .unwrap()
            .get(id)
            .and_then(|e| e.state.clone()))
    }

    async fn store(&self, id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let now = (self.0.now)();
        let mut entries = self.0.entries.lock().unwrap();
        let e = entries.entry(id.to_owned()).or_insert_with(|| Entry {
            owner: None,
            version: state.initialize_params.protocol_version.to_string(),
            state: None,
            last_used: now,
            active: 0,
            opened: now,
        });
        e.state = Some(state.clone());
        Ok(())
    }

    async fn delete(&self, id: &str) -> Result<(), SessionStoreError> {
        self.0.forget(id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sessions with a TTL of 60 s (parked after 30 s) on a manual clock.
    fn on_a_manual_clock() -> (Arc<Sessions>, Arc<Mutex<Instant>>) {
        let t = Arc::new(Mutex::new(Instant::now()));
        let clock = t.clone();
        let now: Clock = Arc::new(move || *clock.lock().unwrap());
        let manager = Arc::new(LocalSessionManager::default());
        (
            Sessions::with_clock(manager, Duration::from_secs(60), now),
            t,
        )
    }

    fn at(t: &Mutex<Instant>, start: Instant, secs: u64) {
        *t.lock().unwrap() = start + Duration::from_secs(secs);
    }

    /// What a sweep at that moment parks and forgets, sorted.
    fn sweep_at(s: &Sessions, t: &Mutex<Instant>, start: Instant, secs: u64) -> [Vec<String>; 2] {
        at(t, start, secs);
        let (mut park, mut expired) = s.due(*t.lock().unwrap());
        park.sort();
        expired.sort();
        [park, expired]
    }

    /// Sessions a and b opened at 0 s: both parked once idle past 30 s; a used at
    /// 40 s is parked again at 71 s and forgotten only after 100 s, while b, unused,
    /// is forgotten after 60 s. A session with a response streaming is never parked
    /// nor forgotten, however long it streams; its idleness starts when it ends.
    #[test]
    fn idle_sessions_are_parked_at_half_the_ttl_and_forgotten_after_it() {
        let (s, t) = on_a_manual_clock();
        let start = *t.lock().unwrap();
        let me = Owner::of_token("lead");
        for id in ["a", "b", "streaming"] {
            assert!(s.opened(id, me, "2025-11-25").is_empty());
        }
        let (_, stream) = s.enter("streaming", me).unwrap();
        let none = Vec::<String>::new;
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(sweep_at(&s, &t, start, 30), [none(), none()]);
        assert_eq!(sweep_at(&s, &t, start, 31), [ids(&["a", "b"]), none()]);
        at(&t, start, 40);
        drop(s.enter("a", me).unwrap());
        assert_eq!(sweep_at(&s, &t, start, 60), [ids(&["b"]), none()]);
        assert_eq!(sweep_at(&s, &t, start, 61), [none(), ids(&["b"])]);
        assert_eq!(s.enter("b", me).err(), Some(Refused::Unknown), "forgotten");
        assert_eq!(sweep_at(&s, &t, start, 71), [ids(&["a"]), none()]);
        assert_eq!(sweep_at(&s, &t, start, 100), [ids(&["a"]), none()]);
        assert_eq!(sweep_at(&s, &t, start, 101), [none(), ids(&["a"])]);
        assert_eq!(sweep_at(&s, &t, start, 500), [none(), none()]);
        drop(stream);
        assert_eq!(sweep_at(&s, &t, start, 530), [none(), none()]);
        assert_eq!(sweep_at(&s, &t, start, 531), [ids(&["streaming"]), none()]);
        assert_eq!(sweep_at(&s, &t, start, 561), [none(), ids(&["streaming"])]);
    }

    /// A handshake whose answer never arrived (rmcp stored the session, nobody
    /// claimed it) is forgotten after the park time, not the TTL.
    #[tokio::test]
    async fn an_unclaimed_handshake_is_forgotten_after_the_park_time() {
        let (s, t) = on_a_manual_clock();
        let start = *t.lock().unwrap();
        let params = serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {},
                                        "clientInfo": {"name": "c", "version": "1"}});
        let state = SessionState::new(serde_json::from_value(params).unwrap());
        Store(s.clone()).store("half-open", &state).await.unwrap();
        assert!(Store(s.clone()).load("half-open").await.unwrap().is_some());
        assert_eq!(sweep_at(&s, &t, start, 30), [Vec::<String>::new(), vec![]]);
        assert_eq!(sweep_at(&s, &t, start, 31)[1], ["half-open"]);
        assert!(Store(s.clone()).load("half-open").await.unwrap().is_none());
    }
}
