//! Hooks (pure): events from outside, taken at `POST /hooks/{name}` when signed
//! with the hook's secret. What a request must carry ([`verify`]), what a hook
//! does ([`Action`]), values picked from a payload by `$.a.b` paths ([`pick`]), and
//! the nesting a payload may have ([`check_depth`]).
//!
//! Two signature forms, both HMAC-SHA256 with the hook's secret, compared in
//! constant time:
//! - GitHub's `X-Hub-Signature-256: sha256=<hex>` over the body;
//! - the generic `X-Hook-Signature: t=<unix seconds>,v1=<hex>` over `<t>.<body>`,
//!   taken only while `t` is within [`REPLAY_WINDOW_SECS`] of now.
//!
//! The sender's delivery id (`X-GitHub-Delivery`, `X-Hook-Delivery`) makes a
//! retry the same delivery; without one, the signature stands for it.

mod action;
mod sign;
#[cfg(test)]
mod tests;

pub use action::{Action, Param, check_name, parse_params};
pub use sign::{GENERIC_SIGNATURE, GITHUB_SIGNATURE, hmac_sha256, sign_generic, sign_github};

/// The largest body a hook takes.
pub const MAX_BODY: usize = 1024 * 1024;
/// The deepest nesting of arrays and objects a payload may have.
pub const MAX_DEPTH: usize = 64;
/// How far a generic signature's timestamp may be from now, either way.
pub const REPLAY_WINDOW_SECS: i64 = 300;
/// Requests a hook takes per minute unless its `rate` says otherwise.
pub const DEFAULT_RATE: u32 = 60;
/// The most a hook's `rate` may be.
pub const MAX_RATE: u32 = 6_000;
/// The longest secret, and the shortest (a guessable one signs nothing).
pub const SECRET_CHARS: (usize, usize) = (16, 256);

/// How the name of an environment variable holding a hook's secret ends: the
/// kernel passes no variable so named to any worker, so no agent reads it.
pub const SECRET_VAR_SUFFIX: &str = "_HOOK_SECRET";

/// The `${{ env.X }}` names in `text` that do not end in [`SECRET_VAR_SUFFIX`].
pub fn unscrubbed_vars(text: &str) -> Vec<&str> {
    text.split("${{")
        .skip(1)
        .filter_map(|rest| rest.split("}}").next())
        .filter_map(|inner| inner.trim().strip_prefix("env."))
        .filter(|name| !name.ends_with(SECRET_VAR_SUFFIX))
        .collect()
}
/// The longest delivery id kept.
pub const MAX_DELIVERY_ID: usize = 128;

/// The headers a hook reads, as the request gave them.
#[derive(Debug, Default, Clone)]
pub struct Signed<'a> {
    pub github: Option<&'a str>,
    pub generic: Option<&'a str>,
    pub delivery: Option<&'a str>,
    pub event: Option<&'a str>,
}

/// Why a request was refused. The sender is never told (every refusal looks the
/// same); the kernel's log says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no hook of that name")]
    Unknown,
    #[error("no signature header")]
    Unsigned,
    #[error("the signature does not match")]
    BadSignature,
    #[error("the signature's timestamp is outside the replay window")]
    Stale,
    #[error("the body is over the limit")]
    TooLarge,
    #[error("the body is not JSON, or nested too deep")]
    NotJson,
    #[error("over the hook's rate")]
    Rate,
    #[error("the delivery id is too long or not printable")]
    BadDelivery,
}

/// What [`verify`] found: the delivery id a retry shares, and the signature
/// (hex), which a replay under another delivery id shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub delivery: String,
    pub mac: String,
}

/// Checks `body` against `secret` as the headers sign it, at `now_secs`.
pub fn verify(secret: &[u8], h: &Signed, body: &[u8], now_secs: i64) -> Result<Verified, Refusal> {
    let digest = if let Some(g) = h.generic {
        let (t, mac) = sign::parse_generic(g).ok_or(Refusal::BadSignature)?;
        let mut signed = Vec::with_capacity(body.len() + 24);
        signed.extend_from_slice(t.to_string().as_bytes());
        signed.push(b'.');
        signed.extend_from_slice(body);
        sign::check(secret, &signed, &mac)?;
        if now_secs.abs_diff(t) > REPLAY_WINDOW_SECS.unsigned_abs() {
            return Err(Refusal::Stale);
        }
        mac
    } else if let Some(g) = h.github {
        let mac = sign::parse_github(g).ok_or(Refusal::BadSignature)?;
        sign::check(secret, body, &mac)?;
        mac
    } else {
        return Err(Refusal::Unsigned);
    };
    let delivery = match h.delivery.map(str::trim).filter(|d| !d.is_empty()) {
        Some(d) if d.len() <= MAX_DELIVERY_ID && d.chars().all(|c| c.is_ascii_graphic()) => {
            d.to_owned()
        }
        Some(_) => return Err(Refusal::BadDelivery),
        None => format!("sig:{}", hex::encode(&digest[..16])),
    };
    Ok(Verified {
        delivery,
        mac: hex::encode(digest),
    })
}

/// Whether `body` nests arrays and objects at most [`MAX_DEPTH`] deep; one linear
/// pass over the bytes (strings skipped), before any parser sees it.
pub fn check_depth(body: &[u8]) -> Result<(), Refusal> {
    let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
    for &b in body {
        if in_str {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(Refusal::NotJson);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// The value at `path` (`$`, `$.a.b`, `$.list.0.name`) in `payload`, if any.
pub fn pick<'a>(payload: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    let rest = path.strip_prefix('$')?;
    let mut at = payload;
    for seg in rest.split('.').skip(1) {
        at = match at {
            serde_json::Value::Object(m) => m.get(seg)?,
            serde_json::Value::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at)
}
