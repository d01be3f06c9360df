//! Identity: the admin token (the lead) and agent tokens.
//!
//! Agent tokens are random 256-bit secrets; only their SHA-256 is stored, with the
//! agent they stand for, an expiry and a revocation time. Valid tokens are cached in
//! memory so authenticating a request costs a hash and a map lookup; revocation and
//! agent deletion evict from the cache.

use crate::Caller;
use crate::registry::Registry;
use domain::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use store::sql;
use store::sql::OptionalExtension;

pub const AGENT_TOKEN_PREFIX: &str = "awt_";
pub const LOCAL_TOKEN_PREFIX: &str = "awlocal_";
pub const MAX_TOKEN_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// Why a bearer token was refused (shown in the 401 body).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error(
        "missing bearer token: send `Authorization: Bearer <token>` (the admin token from the data dir, or an agent token from agent_join)"
    )]
    Missing,
    #[error(
        "unknown token: use the admin token from the data dir or mint an agent token with agent_join"
    )]
    Unknown,
    #[error("token expired: mint a new one with agent_join")]
    Expired,
    #[error(
        "token revoked (its agent was deleted or its run ended): mint a new one with agent_join"
    )]
    Revoked,
    #[error("cannot check the token: {0}")]
    Internal(String),
}

struct Cached {
    caller: Caller,
    agent_id: i64,
    expires_at: i64,
}

pub struct Tokens {
    admin: String,
    /// A secret of this kernel's life only, also the lead's: written (0600) into
    /// `kernel.json` so a second stdio launch on the data dir gets in whatever admin
    /// token the kernel was started with, without that token ever being written down.
    local: String,
    cache: Mutex<HashMap<String, Cached>>,
}

pub fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A new random secret with a recognisable prefix.
pub fn new_secret(prefix: &str) -> String {
    format!("{prefix}{}", hex::encode(rand::random::<[u8; 32]>()))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Tokens {
    pub fn new(admin: String) -> Self {
        Self {
            admin,
            local: new_secret(LOCAL_TOKEN_PREFIX),
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn forget_agent(&self, agent_id: i64) {
        self.cache
            .lock()
            .unwrap()
            .retain(|_, c| c.agent_id != agent_id);
    }

    /// Evicts every cached token (after a gap in what the other kernels of the
    /// store said): each is checked against the store again at its next use.
    pub(crate) fn forget_all(&self) {
        self.cache.lock().unwrap().clear();
    }

    /// Evicts the cached tokens of the agent `name` of an instance (deleted through
    /// another kernel of the store, which knows it by name).
    pub(crate) fn forget_named(&self, workflow_id: i64, name: &str) {
        self.cache.lock().unwrap().retain(|_, c| match &c.caller {
            Caller::Agent(a) => {
                !(a.workflow_id == workflow_id && a.name.eq_ignore_ascii_case(name))
            }
            Caller::Lead => true,
        });
    }
}

impl Registry {
    /// This kernel's local lead credential (see [`Tokens`]); for `kernel.json` only.
    pub fn local_token(&self) -> &str {
        &self.tokens.local
    }

    /// Maps a bearer token to a caller.
    pub async fn authenticate(&self, bearer: Option<&str>) -> Result<Caller, AuthError> {
        let token = bearer
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(AuthError::Missing)?;
        if constant_time_eq(token.as_bytes(), self.tokens.admin.as_bytes())
            || constant_time_eq(token.as_bytes(), self.tokens.local.as_bytes())
        {
            return Ok(Caller::Lead);
        }
        let h = hash(token);
        let now = self.clock.now_ms();
        if let Some(c) = self.tokens.cache.lock().unwrap().get(&h)
            && c.expires_at > now
        {
            return Ok(c.caller.clone());
        }
        let h2 = h.clone();
        let row = self
            .store
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT agent_id, expires_at, revoked_at, run_id FROM tokens WHERE hash = ?1",
                    [&h2],
                    |r| {
                        Ok((
                            r.get::<i64>(0)?,
                            r.get::<i64>(1)?,
                            r.get::<Option<i64>>(2)?,
                            r.get::<Option<String>>(3)?,
                        ))
                    },
                )
                .optional()?)
            })
            .await
            .map_err(|e| AuthError::Internal(e.to_string()))?;
        let (agent_id, expires_at, revoked_at, run_id) = row.ok_or(AuthError::Unknown)?;
        if revoked_at.is_some() {
            return Err(AuthError::Revoked);
        }
        if expires_at <= now {
            self.tokens.cache.lock().unwrap().remove(&h);
            return Err(AuthError::Expired);
        }
        let caller = self
            .agent_caller(agent_id, run_id)
            .await
            .map_err(|e| match e {
                Error::NotFound(_) => AuthError::Revoked,
                e => AuthError::Internal(e.to_string()),
            })?;
        self.tokens.cache.lock().unwrap().insert(
            h,
            Cached {
                caller: caller.clone(),
                agent_id,
                expires_at,
            },
        );
        Ok(caller)
    }

    /// Mints an agent token valid for `ttl`. Returns the secret (shown once) and its
    /// expiry in ms since the epoch.
    pub async fn mint_agent_token(
        &self,
        agent_id: i64,
        ttl: Duration,
        purpose: &str,
        run_id: Option<String>,
    ) -> Result<(String, i64)> {
        let (purpose, now) = (purpose.to_owned(), self.clock.now_ms());
        self.store
            .write(move |c| mint_tx(c, agent_id, ttl, &purpose, run_id.as_deref(), now))
            .await
    }
}

/// Mints an agent token at `now` inside a write transaction (a run's token is
/// written with its run row, so neither exists without the other).
pub(crate) fn mint_tx(
    c: &sql::Connection,
    agent_id: i64,
    ttl: Duration,
    purpose: &str,
    run_id: Option<&str>,
    now: i64,
) -> Result<(String, i64)> {
    if ttl.is_zero() || ttl > MAX_TOKEN_TTL {
        return Err(Error::invalid(format!(
            "ttl must be more than 0 and at most {}",
            humantime::format_duration(MAX_TOKEN_TTL)
        )));
    }
    let secret = new_secret(AGENT_TOKEN_PREFIX);
    let expires_at = now + ttl.as_millis() as i64;
    c.execute(
        "INSERT INTO tokens (hash, agent_id, purpose, run_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        sql::params![hash(&secret), agent_id, purpose, run_id, now, expires_at],
    )?;
    Ok((secret, expires_at))
}
