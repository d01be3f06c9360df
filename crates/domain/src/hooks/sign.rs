//! HMAC-SHA256 (RFC 2104) and the two header forms that carry it.

use super::Refusal;
use sha2::{Digest, Sha256};

/// GitHub's header: `sha256=<hex>` over the body.
pub const GITHUB_SIGNATURE: &str = "x-hub-signature-256";
/// The generic header: `t=<unix seconds>,v1=<hex>` over `<t>.<body>`.
pub const GENERIC_SIGNATURE: &str = "x-hook-signature";

const BLOCK: usize = 64;

/// HMAC-SHA256 of `msg` under `key`.
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |x: u8| k.map(|b| b ^ x);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// The GitHub header's value for `body`.
pub fn sign_github(secret: &[u8], body: &[u8]) -> String {
    format!("sha256={}", hex::encode(hmac_sha256(secret, body)))
}

/// The generic header's value for `body` sent at `t` (unix seconds).
pub fn sign_generic(secret: &[u8], t: i64, body: &[u8]) -> String {
    let mut signed = format!("{t}.").into_bytes();
    signed.extend_from_slice(body);
    format!("t={t},v1={}", hex::encode(hmac_sha256(secret, &signed)))
}

pub(super) fn parse_github(v: &str) -> Option<[u8; 32]> {
    unhex(v.trim().strip_prefix("sha256=")?)
}

pub(super) fn parse_generic(v: &str) -> Option<(i64, [u8; 32])> {
    let (mut t, mut mac) = (None, None);
    for part in v.split(',') {
        match part.trim().split_once('=')? {
            ("t", x) => t = Some(x.parse::<i64>().ok()?),
            ("v1", x) => mac = Some(unhex(x)?),
            _ => {}
        }
    }
    Some((t?, mac?))
}

fn unhex(h: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(h, &mut out).ok()?;
    Some(out)
}

/// Whether `mac` is `msg`'s under `secret`, compared in constant time.
pub(super) fn check(secret: &[u8], msg: &[u8], mac: &[u8; 32]) -> Result<(), Refusal> {
    let want = hmac_sha256(secret, msg);
    let diff = want.iter().zip(mac).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    if diff == 0 {
        Ok(())
    } else {
        Err(Refusal::BadSignature)
    }
}
