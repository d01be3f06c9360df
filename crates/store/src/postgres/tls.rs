//! TLS to PostgreSQL, asked for in the URL as libpq spells it:
//! `?sslmode=require|verify-ca|verify-full&sslrootcert=/path/ca.pem`.
//!
//! - No `sslmode`, or `disable`, `allow`, `prefer`: no TLS (as before; a server's
//!   certificate is never trusted unchecked).
//! - `require` and `verify-full`: TLS, and the server's certificate must chain to a
//!   trusted root and name the host connected to. (libpq's `require` checks
//!   nothing; here asking for TLS means asking for a verified server.)
//! - `verify-ca`: TLS, the chain is checked but not the name.
//!
//! The roots are `sslrootcert` (PEM, one or more certificates) or, without it, the
//! system's. tokio-postgres knows neither `verify-*` nor `sslrootcert`: both are
//! taken out of the URL here and it is given `sslmode=require`. rustls with ring
//! does the TLS.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject};
use rustls::{CertificateError, DigitallySignedStruct, Error as TlsError, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// What the URL asks of TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    pub mode: Mode,
    pub root: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Off,
    /// The chain is checked, not the name (`verify-ca`).
    Chain,
    /// The chain and the name (`require`, `verify-full`).
    Full,
}

/// Takes `sslmode` and `sslrootcert` out of a URL (or a `key=value` string): the
/// rest for tokio-postgres (which knows neither `verify-*` nor `sslrootcert`;
/// the connection sets its mode), and what they ask.
pub fn split(url: &str) -> Result<(String, Tls), String> {
    let (mut mode, mut root) = (None, None);
    let mut take = |k: &str, v: &str| -> Result<bool, String> {
        match k {
            "sslmode" => {
                mode = Some(match v {
                    "disable" | "allow" | "prefer" => Mode::Off,
                    "require" | "verify-full" => Mode::Full,
                    "verify-ca" => Mode::Chain,
                    other => {
                        return Err(format!(
                            "sslmode={other} is not a mode: use disable, require, verify-ca or \
                             verify-full"
                        ));
                    }
                });
                Ok(true)
            }
            "sslrootcert" => {
                root = Some(PathBuf::from(v));
                Ok(true)
            }
            _ => Ok(false),
        }
    };
    let rest = if let Some((base, query)) = url.split_once('?')
        && (url.starts_with("postgres://") || url.starts_with("postgresql://"))
    {
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if !take(k, &unescape(v))? {
                kept.push(pair.to_owned());
            }
        }
        join(base, &kept, '?', "&")
    } else if url.contains('=') && !url.contains("://") {
        let mut kept = Vec::new();
        for word in url.split_whitespace() {
            let (k, v) = word.split_once('=').unwrap_or((word, ""));
            if !take(k, v)? {
                kept.push(word.to_owned());
            }
        }
        kept.join(" ")
    } else {
        url.to_owned()
    };
    let tls = Tls {
        mode: mode.unwrap_or(Mode::Off),
        root,
    };
    if tls.root.is_some() && tls.mode == Mode::Off {
        return Err("sslrootcert is given but TLS is not asked: add sslmode=verify-full".into());
    }
    Ok((rest, tls))
}

fn join(base: &str, kept: &[String], first: char, sep: &str) -> String {
    if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}{first}{}", kept.join(sep))
    }
}

/// `%XX` escapes in a URL's query value (a path with spaces, say).
fn unescape(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 3 <= b.len()
            && let Ok(x) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or(""), 16)
        {
            out.push(x);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The connector for what the URL asks (with TLS off, one that is never used).
pub fn connector(tls: &Tls) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let roots = Arc::new(roots(tls)?);
    let config = match tls.mode {
        Mode::Off | Mode::Full => builder.with_root_certificates(roots).with_no_client_auth(),
        Mode::Chain => {
            let full = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| format!("TLS: {e}"))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(full)))
                .with_no_client_auth()
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The trusted roots: `sslrootcert`'s, else the system's.
fn roots(tls: &Tls) -> Result<rustls::RootCertStore, String> {
    let mut store = rustls::RootCertStore::empty();
    if tls.mode == Mode::Off {
        return Ok(store);
    }
    match &tls.root {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    format!(
                        "sslrootcert {}: cannot read its certificates ({e}); give a PEM file of \
                         the CA that signed the server's certificate",
                        path.display()
                    )
                })?;
            if certs.is_empty() {
                return Err(format!(
                    "sslrootcert {}: no certificate in it",
                    path.display()
                ));
            }
            for c in certs {
                store
                    .add(c)
                    .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for c in found.certs {
                let _ = store.add(c);
            }
            if store.is_empty() {
                return Err(
                    "TLS is asked but this machine has no trusted roots: give sslrootcert".into(),
                );
            }
        }
    }
    Ok(store)
}

/// `verify-ca`: the whole check but the host's name.
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(TlsError::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_s_tls_words_are_read_and_taken_out() {
        let (rest, t) = split("postgres://u:p@h:5/db?sslmode=verify-full&sslrootcert=%2Fca%20x.pem&application_name=a").unwrap();
        assert_eq!(rest, "postgres://u:p@h:5/db?application_name=a");
        assert_eq!(t.mode, Mode::Full);
        assert_eq!(t.root, Some(PathBuf::from("/ca x.pem")));
        let (rest, t) = split("postgres://h/db").unwrap();
        assert_eq!((rest.as_str(), t.mode), ("postgres://h/db", Mode::Off));
        let (_, t) = split("host=h sslmode=verify-ca sslrootcert=/ca.pem").unwrap();
        assert_eq!(t.mode, Mode::Chain);
        assert!(
            split("postgres://h/db?sslmode=maybe")
                .unwrap_err()
                .contains("sslmode=maybe")
        );
        assert!(
            split("postgres://h/db?sslrootcert=/x")
                .unwrap_err()
                .contains("add sslmode")
        );
    }
}
